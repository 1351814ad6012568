"""`batch` in Python: the worked example of docs/guests.md (the same guest exists in
Rust, guests/rust/batch, and in JavaScript, guests/examples/js_batch).

The code is one tool call per line, `<tool> <JSON object of arguments>` (the arguments
may be left out); blank lines and `#` comments are skipped. The run's value is the
list of results.

Built by `cargo xtask guests` with componentize-py, which generates the `wit_world`
bindings from wit/ while it builds:

    componentize-py -d wit -w code-runner componentize app -p guests/examples/python_batch -o batch.wasm
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.runner import GuestException, RunError_Exception, RunError_Syntax
from wit_world.imports import tools

# The exception kinds the built-in guests use for each call-error case.
KINDS = {
    tools.CallError_Denied: "ToolDenied",
    tools.CallError_BudgetExhausted: "ToolBudgetExhausted",
    tools.CallError_InvalidArgs: "ToolInvalidArgs",
    tools.CallError_Failed: "ToolFailed",
    tools.CallError_Timeout: "ToolTimeout",
}


class Runner(exports.Runner):
    # An exception escaping `run` traps the instance, so every failure is returned as
    # `Err(run-error)`, which componentize-py spells `raise Err(...)`.
    def run(self, code: str, input_json: str) -> str:
        results = []
        for number, line in enumerate(code.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, args = (line.split(None, 1) + ["{}"])[:2]
            try:
                json.loads(args)
            except ValueError as e:
                message = "line %d: the arguments are not JSON (%s)" % (number, e)
                raise Err(RunError_Syntax(GuestException("SyntaxError", message, "")))
            try:
                result = tools.call(name, args)
            except Err as e:
                # A refused or failed call: e.value is the call-error case.
                kind = KINDS.get(type(e.value), "ToolFailed")
                raise Err(RunError_Exception(GuestException(kind, e.value.value, "")))
            results.append(json.loads(result))
        return json.dumps(results)
