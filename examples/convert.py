# Runs inside the sandbox: it reaches the world only through the tools it is allowed
# (`--allow`), here the two of tools.toml.
marathon = tools.convert(value=42.195, unit="km", to="mi")
oven = tools.convert(value=180, unit="C", to="F")
try:
    checked_at = tools.now()["utc"]
except ToolDenied:  # not in --allow
    checked_at = None
print(f"a marathon is {marathon['value']:.1f} mi; 180 °C is {oven['value']:.0f} °F")
{"marathon_mi": marathon["value"], "oven_f": oven["value"], "checked_at": checked_at}
