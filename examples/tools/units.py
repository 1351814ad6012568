"""A command tool of wasmbox's examples: converts a value between units.

wasmbox runs it once per call with the call's arguments as a JSON object on stdin
(`{"value": 42.195, "unit": "km", "to": "mi"}`) and reads one JSON value from stdout.
A failure is an exit status other than 0; the script in the sandbox sees the last line
of stderr (`ToolFailed`).
"""

import json
import sys

# Each unit: (quantity, factor to the quantity's base unit).
LINEAR = {
    "m": ("length", 1.0),
    "km": ("length", 1000.0),
    "cm": ("length", 0.01),
    "mm": ("length", 0.001),
    "mi": ("length", 1609.344),
    "ft": ("length", 0.3048),
    "in": ("length", 0.0254),
    "kg": ("mass", 1.0),
    "g": ("mass", 0.001),
    "lb": ("mass", 0.45359237),
    "oz": ("mass", 0.028349523125),
}
# Temperatures are not a factor apart: through kelvin.
TO_KELVIN = {"K": lambda t: t, "C": lambda t: t + 273.15, "F": lambda t: (t - 32) * 5 / 9 + 273.15}
FROM_KELVIN = {"K": lambda k: k, "C": lambda k: k - 273.15, "F": lambda k: (k - 273.15) * 9 / 5 + 32}


def convert(value, unit, to):
    if unit in TO_KELVIN and to in FROM_KELVIN:
        return FROM_KELVIN[to](TO_KELVIN[unit](value))
    if unit in LINEAR and to in LINEAR and LINEAR[unit][0] == LINEAR[to][0]:
        return value * LINEAR[unit][1] / LINEAR[to][1]
    known = ", ".join(list(LINEAR) + list(TO_KELVIN))
    sys.exit(f"cannot convert {unit!r} to {to!r} (units: {known})")


args = json.load(sys.stdin)
print(json.dumps({"value": round(convert(args["value"], args["unit"], args["to"]), 6), "unit": args["to"]}))
