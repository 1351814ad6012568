"""Native tests of the Python guest's logic (app.py), without wasm.

Run with any CPython >= 3.11: `python3 guests/python/test_app_native.py`.

app.py imports the bindings componentize-py generates (`wit_world`,
`componentize_py_types`). Here hand-written fakes with the same module paths, class
names and fields stand in for them, and a fake host implements the `tools` import.
To check the fakes against real generated bindings, generate them and point
WASMBOX_PY_BINDINGS at the directory (the test is skipped otherwise):

    target/guest-tools/venv/bin/componentize-py -d wit -w code-runner bindings /tmp/bind
    WASMBOX_PY_BINDINGS=/tmp/bind python3 guests/python/test_app_native.py
"""

import ast
import io
import json
import os
import sys
import types
import unittest
from dataclasses import dataclass, fields
from typing import Generic, Protocol, TypeVar, Union

HERE = os.path.dirname(os.path.abspath(__file__))

# ------------------------------------------------------------ fake bindings
# Mirrors of the generated code (componentize-py 0.25.1, wit/sandbox.wit).
cpt = types.ModuleType("componentize_py_types")
S, T, E = TypeVar("S"), TypeVar("T"), TypeVar("E")


@dataclass
class Some(Generic[S]):
    value: S


@dataclass
class Ok(Generic[T]):
    value: T


@dataclass(frozen=True)
class Err(Generic[E], Exception):
    value: E


cpt.Some, cpt.Ok, cpt.Err, cpt.Result = Some, Ok, Err, Union[Ok[T], Err[E]]

tools_mod = types.ModuleType("wit_world.imports.tools")


@dataclass
class ToolInfo:
    name: str
    description: str
    args_schema: str


@dataclass
class CallError_Denied:
    value: str


@dataclass
class CallError_BudgetExhausted:
    value: str


@dataclass
class CallError_InvalidArgs:
    value: str


@dataclass
class CallError_Failed:
    value: str


@dataclass
class CallError_Timeout:
    value: str


@dataclass
class Finished:
    id: int
    answer: object


for _cls in (ToolInfo, CallError_Denied, CallError_BudgetExhausted, CallError_InvalidArgs,
             CallError_Failed, CallError_Timeout, Finished):
    setattr(tools_mod, _cls.__name__, _cls)
tools_mod.CallError = Union[CallError_Denied, CallError_BudgetExhausted, CallError_InvalidArgs,
                            CallError_Failed, CallError_Timeout]

runner_mod = types.ModuleType("wit_world.exports.runner")


@dataclass
class GuestException:
    kind: str
    message: str
    traceback: str


@dataclass
class RunError_Syntax:
    value: GuestException


@dataclass
class RunError_Exception:
    value: GuestException


@dataclass
class RunError_Contract:
    value: str


for _cls in (GuestException, RunError_Syntax, RunError_Exception, RunError_Contract):
    setattr(runner_mod, _cls.__name__, _cls)
runner_mod.RunError = Union[RunError_Syntax, RunError_Exception, RunError_Contract]

exports_mod = types.ModuleType("wit_world.exports")


class Runner(Protocol):
    def run(self, code: str, input_json: str) -> str:
        raise NotImplementedError


exports_mod.Runner = Runner
exports_mod.runner = runner_mod
imports_mod = types.ModuleType("wit_world.imports")
imports_mod.tools = tools_mod
world_mod = types.ModuleType("wit_world")
world_mod.exports, world_mod.imports = exports_mod, imports_mod


class Host:
    """The fake `tools` import: a few tools, a call log, errors on demand."""

    def __init__(self):
        self.calls = []
        self.tools = {
            "add": lambda a: a["a"] + a["b"],
            "echo": lambda a: a,
            "boom": self._fail,
        }
        self.errors = {}  # tool name -> CallError_* instance to return
        self.raw = {}  # tool name -> the exact text to return
        self.started = {}  # started call id -> its answer, Ok or Err
        self.events = []  # "call", "start", "await": how the guest reached the host

    @staticmethod
    def _fail(args):
        raise Err(CallError_Failed("boom failed"))

    def list_tools(self):
        return [ToolInfo(name, "does " + name, '{"type":"object"}') for name in sorted(self.tools)]

    def start_call(self, name, args_json):
        # Refusals come back at once, as the host's broker makes them before the tool runs.
        if name not in self.tools and name not in self.raw and name not in self.errors:
            self.calls.append((name, args_json))
            raise Err(CallError_Denied("tool %s is not allowed" % name))
        self.events.append("start")
        try:
            answer = Ok(self._answer(name, args_json))
        except Err as e:
            answer = e
        call_id = len(self.calls)
        self.started[call_id] = answer
        return call_id

    def await_any(self, timeout_ms):
        self.events.append("await")
        done = [Finished(i, a) for i, a in sorted(self.started.items())]
        self.started.clear()
        return done

    def call(self, name, args_json):
        self.events.append("call")
        return self._answer(name, args_json)

    def _answer(self, name, args_json):
        self.calls.append((name, args_json))
        if name in self.errors:
            raise Err(self.errors[name])
        if name in self.raw:
            return self.raw[name]
        if name not in self.tools:
            raise Err(CallError_Denied("tool %s is not allowed" % name))
        return json.dumps(self.tools[name](json.loads(args_json)))


HOST = Host()
tools_mod.list_tools = lambda: HOST.list_tools()
tools_mod.call = lambda name, args_json: HOST.call(name, args_json)
tools_mod.start_call = lambda name, args_json: HOST.start_call(name, args_json)
tools_mod.await_any = lambda timeout_ms: HOST.await_any(timeout_ms)

sys.modules.update({
    "componentize_py_types": cpt,
    "wit_world": world_mod,
    "wit_world.exports": exports_mod,
    "wit_world.exports.runner": runner_mod,
    "wit_world.imports": imports_mod,
    "wit_world.imports.tools": tools_mod,
})
sys.path.insert(0, HERE)
import app  # noqa: E402  (needs the fakes above)


# ------------------------------------------------------------------- helpers
def fresh_instance():
    """What a new wasm instance starts from: no earlier call, so no session, and the
    module the build made for the first call."""
    app._calls = 0
    app._session_module = None
    app._spare_module = app._fresh_module(None)


def run(code, input_json="null", fresh=True):
    """('ok', value) or (variant class name, payload); on a fresh instance unless told."""
    if fresh:
        fresh_instance()
    try:
        text = app.Runner().run(code, input_json)
    except Err as e:
        return type(e.value).__name__, e.value.value
    return "ok", json.loads(text), text


class Base(unittest.TestCase):
    def setUp(self):
        HOST.calls.clear()
        HOST.errors.clear()
        HOST.raw.clear()
        HOST.started.clear()
        HOST.events.clear()

    def ok(self, code, input_json="null"):
        r = run(code, input_json)
        self.assertEqual(r[0], "ok", r)
        return r[1]

    def contract(self, code):
        r = run(code)
        self.assertEqual(r[0], "RunError_Contract", r)
        return r[1]

    def exc(self, code, kind=None):
        r = run(code)
        self.assertEqual(r[0], "RunError_Exception", r)
        self.assertIsInstance(r[1], GuestException)
        if kind:
            self.assertEqual(r[1].kind, kind, r[1])
        return r[1]


# --------------------------------------------------------------------- tests
class Values(Base):
    def test_each_json_type(self):
        for src, want in [("1", 1), ("-2.5", -2.5), ("'héllo'", "héllo"), ("True", True),
                          ("None", None), ("[1, [2]]", [1, [2]]), ("(1, 2)", [1, 2]),
                          ("{'a': {'b': [None]}}", {"a": {"b": [None]}}), ("10**30", 10**30)]:
            self.assertEqual(self.ok(src), want, src)

    def test_text_is_compact_and_not_ascii_escaped(self):
        self.assertEqual(run("{'a': [1, 'é']}")[2], '{"a":[1,"é"]}')

    def test_final_expression_only_at_the_end(self):
        self.assertEqual(self.ok("x = 2\nx * 21"), 42)
        self.assertIsNone(self.ok("x = 2\nx * 21\ny = 1"))
        self.assertIsNone(self.ok("print('hi')"))
        self.assertIsNone(self.ok(""))
        self.assertEqual(self.ok("if True:\n    1\n'done'"), "done")

    def test_output_once_wins_over_final_expression(self):
        self.assertEqual(self.ok("output({'v': 1})\n5"), {"v": 1})
        self.assertIsNone(self.ok("output(None)\n5"))

    def test_output_twice_is_a_contract_error_even_if_caught(self):
        self.assertEqual(self.contract("output(1)\noutput(2)"), "output() called more than once")
        self.assertEqual(self.contract("output(1)\ntry:\n    output(2)\nexcept BaseException:\n    pass\n3"),
                         "output() called more than once")

    def test_input(self):
        self.assertEqual(self.ok("INPUT", '{"n": [1, 2]}'), {"n": [1, 2]})
        self.assertIsNone(self.ok("INPUT", ""))
        self.assertIsNone(self.ok("INPUT", "null"))
        self.assertEqual(run("INPUT", "{nope")[0], "RunError_Contract")
        self.assertEqual(run("INPUT", "NaN")[0], "RunError_Contract")

    def test_globals(self):
        self.assertEqual(self.ok("__name__"), "__main__")
        self.assertEqual(self.ok("[issubclass(c, ToolError) for c in "
                                 "(ToolDenied, ToolBudgetExhausted, ToolInvalidArgs, ToolFailed, ToolTimeout)]"),
                         [True] * 5)
        self.assertTrue(self.ok("issubclass(ToolError, Exception)"))
        self.assertEqual(self.ok("len(abs.__doc__) > 0"), True)  # builtins

    def test_fresh_globals_per_run(self):
        self.ok("leak = 1")
        self.assertEqual(self.exc("leak", "NameError").message, "name 'leak' is not defined")

    def test_dataclass_and_enum_in_user_code(self):
        code = ("from __future__ import annotations\nfrom dataclasses import dataclass, asdict\n"
                "import enum\nclass C(enum.Enum):\n    A = 1\n"
                "@dataclass\nclass P:\n    x: int\n    y: 'list[int]'\nasdict(P(C.A.value, [2]))")
        self.assertEqual(self.ok(code), {"x": 1, "y": [2]})

    def test_stdlib_set_imports(self):
        self.assertGreater(len(app.STDLIB), 40)
        for name in app.STDLIB:
            self.assertEqual(self.ok("import %s\n%s.__name__" % (name, name)), name)


class SourcePath(Base):
    """Code without words that need the tree is compiled from its source (app._compile_source):
    the same values, errors and warnings as through the tree."""

    def assertSourcePath(self, code, taken=True):
        self.assertIsNone(app._TREE_WORDS.search(code), code)
        try:
            compiled = app._compile_source(code, "<code>")
        except SyntaxError:
            compiled = None
        self.assertEqual(compiled is not None, taken, code)

    def test_values_as_through_the_tree(self):
        cases = [
            ("x = 2\nx * 21", 42, True), ("1 + 1", 2, True), ("x = [\n1,\n2]\nx", [1, 2], True),
            ("'doc'", "doc", True), ("'a'\n__doc__", "a", True), ("None", None, True),
            ("x = 1", None, True), ("pass\n\n\n", None, True), ("print('hi')", None, True),
            ("t = tools.add(a=1, b=2)\nt * 2", 6, True), ("x = 1\r\nx + 1", 2, True),
            ("output(3)\n4", 3, True), ("", None, True), ("  \n", None, True),
            ("b = 1\n*a, b = [1, 2, 3]\nb", 3, True), ("lambda: 0\n(lambda: 5)()", 5, True),
            ("try:\n    1/0\nexcept ZeroDivisionError:\n    pass\n'ok'", "ok", True),
            ("x = 1 \\\n+ 2\nx", 3, True),
            # the last line is not the whole last statement, or opens a block: the tree
            ("x = (1,\n2)", None, False), ('s = """\n' + "'''" + '"""#' + "'''", None, False),
            ("if True:\n    5", None, True), ("for i in range(3): i", None, False),
            ("1;2", 2, False), ("x = 1 \\\n+ 2", None, False),
            ("x = 1\n# done", None, False), ("x = 1\nx\n# done", 1, False), ("-1", -1, False), ("match = 5\nmatch", 5, False),
            # an annotation on the last line: since 3.14 (lazy annotations) its own would
            # replace those before it
            ("x: int = 1\ny: str = 'a'", None, sys.version_info < (3, 14)),
        ]
        for code, value, taken in cases:
            self.assertSourcePath(code, taken)
            self.assertEqual(self.ok(code), value, code)

    def test_code_that_ends_in_a_block(self):
        cases = [
            ("def square(n):\n    return n * n\n", True), ("x = 1\nfor i in range(3):\n    x += i\n", True),
            ("class C:\n    a: int = 1\n\n    # end\n", True), ("x = 0\nwhile x < 3:\n    x += 1", True),
            ("x = 1\nif x:\n    y = 2\n# done\n", True), ("try:\n    z = 1\nexcept Exception:\n    pass", False),
            ("@staticmethod\ndef f():\n    pass", False), ("if 0:\n    a = 1\nelse:\n    a = 2", False),
            ("def f():\n    s = '''\nfor x in y:\n    '''\n    return s", False),
            ("x = [\n    1]", False),
        ]
        for code, taken in cases:
            self.assertSourcePath(code, taken)
            self.assertEqual(self.ok(code), None, code)
        fresh_instance()
        run("")
        run("x = 1\nfor i in range(4):\n    x += i\ndef f():\n    return x", fresh=False)
        self.assertEqual(run("f()", fresh=False)[1], 7)
        e = self.exc("x = 1\nfor i in range(3):\n    y = 1 / (i - 1)", "ZeroDivisionError")
        self.assertIn('File "<code>", line 3, in <module>\n    y = 1 / (i - 1)', e.traceback)
        self.assertEqual(run("x = 1\nfor i in range(3):\n    y = = 1")[0], "RunError_Syntax")
        self.assertSourcePath("    x = 1", False)
        self.assertEqual(run("    x = 1")[1].kind, "IndentationError")

    def test_a_last_annotation_joins_the_ones_before(self):
        code = "x: int = 1\ny: str = 'a'\nimport sys\nsorted(sys.modules['__main__'].__annotations__)"
        self.assertEqual(self.ok(code), ["x", "y"])
        fresh_instance()
        run("")
        run("x: int = 1\ny: str = 'a'", fresh=False)
        self.assertEqual(run("import sys\nsorted(sys.modules['__main__'].__annotations__)", fresh=False)[1],
                         ["x", "y"])

    def test_an_expression_last_line_is_compiled_in_eval_mode(self):
        # (code, value, compiled in "eval" mode): never a statement in "eval" mode.
        cases = [
            ("1 + 1", 2, True), ("tools.add(a=1, b=2)", 3, True), ("x = 2\nx * 21", 42, True),
            ("print('a=b', end='')", None, True), ("dict(a=1)", {"a": 1}, True),
            ("len('abc')  # abc", 3, True), ("len('abc')  # a = b", 3, False), ("x = 1\nx if x else 0", 1, True), ("'doc'", "doc", True),
            ("not(0)", True, True), ("output(3)\n4", 3, True),
            ("x = 1", None, False), ("a, b = 1, 2", None, False), ("x = tools.add(a=1, b=2)", None, False),
            ("d = {}\nd[str(1)] = 2", None, False), ("x = 1\ndel(x)", None, False), ("(y := 5)", 5, False),
            ("[1, 2][0:1]", [1], False), ("a = [1]\na, *a", [[1], 1], False), ("dict(a=1)['a']", 1, False),
            ("x = 1\nx += 1", None, False), ("import json", None, False),
        ]
        for code, value, in_eval in cases:
            compiled = app._compile_source(code, "<code>")
            self.assertIsNotNone(compiled, code)
            self.assertEqual(compiled[3] is not None, in_eval, code)
            self.assertEqual(self.ok(code), value, code)
        # A line that "eval" mode refuses takes the tree, which reports it as before.
        self.assertIsNone(app._compile_source("f(", "<code>"))
        for code in ("x)", "f(x))", "f((x)"):
            self.assertEqual(run(code)[0], "RunError_Syntax", code)
        r = run("x = 1\nf(")
        self.assertEqual(r[0], "RunError_Syntax")
        self.assertIn('File "<code>", line 2', r[1].traceback)
        e = self.exc("x = 1\n\nlen(1/0)", "ZeroDivisionError")
        self.assertIn('File "<code>", line 3, in <module>\n    len(1/0)', e.traceback)

    def test_errors_as_through_the_tree(self):
        r = run("x = 1\ny = = 2")
        self.assertEqual(r[0], "RunError_Syntax")
        self.assertIn('File "<code>", line 2\n    y = = 2\n', r[1].traceback)
        r = run("yield 1")
        self.assertEqual(r[0], "RunError_Syntax")
        self.assertIn("'yield' outside function", r[1].message)
        for code in ("1\xa0", "\xa0\n1", "1\n\x1c"):  # Unicode spaces the tokenizer refuses
            self.assertEqual(run(code)[0], "RunError_Syntax", repr(code))
        e = self.exc("x = 1\n\n1/0", "ZeroDivisionError")
        self.assertIn('File "<code>", line 3, in <module>\n    1/0', e.traceback)

    def test_the_displayhook_is_the_codes_own_before_and_after(self):
        hook = sys.displayhook
        self.exc("1/0", "ZeroDivisionError")
        self.assertIs(sys.displayhook, hook)
        seen = []
        try:
            fresh_instance()
            run("")
            app._session_module.__dict__["seen"] = seen
            run("import sys\nsys.displayhook = seen.append", fresh=False)
            self.assertEqual(run("7", fresh=False)[1], 7)
            self.assertEqual(seen, [])
            self.assertEqual(run("import sys\nsys.displayhook.__self__ is seen", fresh=False)[1], True)
        finally:
            sys.displayhook = hook

    def test_each_syntax_warning_once(self):
        import warnings
        for code in ("x = '\\d'\nx", "'\\d'", "y = '\\d'", "x = 1\n1 is 1"):
            self.assertSourcePath(code)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                compile(code, "<code>", "exec")
            with warnings.catch_warnings(record=True) as got:
                warnings.simplefilter("always")
                self.ok(code)
            self.assertEqual([str(w.message) for w in got], [str(w.message) for w in caught], code)
            self.assertEqual(len(got), 1, code)


class StrictJson(Base):
    def test_paths_and_types(self):
        cases = [
            ("{'items': [1, 2, 3, {1, 2}]}", "$.items[3] is a set"),
            ("{'a b': b'x'}", '$["a b"] is bytes'),
            ("[float('nan')]", "$[0] is NaN"),
            ("{'x': float('inf')}", "$.x is Infinity"),
            ("{'x': -float('inf')}", "$.x is -Infinity"),
            ("{1: 2}", "$ has a non-string key 1 (int)"),
            ("class P: pass\n{'p': [P()]}", "$.p[0] is a P"),
            ("import datetime\n{'when': datetime.date(2020, 1, 1)}", "$.when is a date"),
            ("x = []\nx.append(x)\nx", "$[0] is a cycle (it contains itself)"),
            ("{'s': '\\ud800'}", "$.s is a string with a lone surrogate"),
            ("object()", "$ is an object"),
        ]
        for code, want in cases:
            self.assertEqual(self.contract(code), "result is not JSON: " + want, code)

    def test_depth_limit(self):
        value = self.ok("x = 1\nfor _ in range(200):\n    x = [x]\nx")
        depth = 0
        while isinstance(value, list):
            value, depth = value[0], depth + 1
        self.assertEqual((depth, value), (200, 1))
        message = self.contract("x = 1\nfor _ in range(201):\n    x = [x]\nx")
        self.assertTrue(message.startswith("result is not JSON: $[0][0]"), message)
        self.assertTrue(message.endswith("is nested more than 200 levels deep"), message)

    def test_shared_but_acyclic_is_fine(self):
        self.assertEqual(self.ok("a = [1]\n[a, a, {'k': a}]"), [[1], [1], {"k": [1]}])

    def test_fast_path_encodes_exactly_like_json_dumps(self):
        import collections
        import enum

        class Color(enum.IntEnum):
            RED = 1

        class Text(str):
            pass

        nested = 1
        for _ in range(200):
            nested = [nested]
        values = [
            None, True, 0, -7, 10**30, 1.5, -0.0, 1e308, "", "héllo", "a\"b\\c\n", "日本",
            [], {}, (1, "t"), {"é": ["ü", {"k": None}]}, {"a": 5, "b": 7}, nested,
            # Subclasses miss the fast check and go through the walk, then the same encoder.
            {"c": Color.RED}, collections.OrderedDict(a=1), Text("x"), [True, Color.RED, 2.0],
        ]
        for value in values:
            want = json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
            self.assertEqual(app._to_json(value), (want, None), repr(value)[:60])

    def test_fast_check_never_accepts_what_the_walk_refuses(self):
        refused = [
            float("nan"), [float("inf")], {"k": -float("inf")}, {1: 2}, {"\ud800": 1},
            ["\udfff"], {"s": {1, 2}}, b"x", [object()], {"d": {"e": bytearray()}},
        ]
        cycle = []
        cycle.append(cycle)
        deep = 1
        for _ in range(201):
            deep = [deep]
        for value in refused + [cycle, deep]:
            self.assertFalse(app._plainly_json(value), repr(value)[:60])
            self.assertIsNone(app._to_json(value)[0], repr(value)[:60])


class Tools(Base):
    def test_sync_call_kwargs_and_dict(self):
        self.assertEqual(self.ok("tools.add(a=1, b=2) + tools.add({'a': 3, 'b': 4})"), 10)
        self.assertEqual(HOST.calls, [("add", '{"a":1,"b":2}'), ("add", '{"a":3,"b":4}')])

    def test_result_is_parsed_json(self):
        self.assertEqual(self.ok("tools.echo(x=[1, {'y': 'é'}])"), {"x": [1, {"y": "é"}]})
        self.assertEqual(HOST.calls, [("echo", '{"x":[1,{"y":"é"}]}')])

    def test_result_text_the_fast_scan_does_not_take_whole(self):
        for text, want in [(" 5 ", 5), ('{"a": [1, 2]}\n', {"a": [1, 2]}), ("\t\"x\"", "x")]:
            HOST.raw["r"] = text
            self.assertEqual(self.ok("tools.r()"), want, text)
        for text in ["", "{", '{"a":1} x', "1 2", "nope"]:
            HOST.raw["r"] = text
            e = self.exc("tools.r()", "ToolFailed")
            self.assertTrue(e.message.startswith("the host returned invalid JSON"), (text, e.message))

    def test_bad_call_shapes_raise_type_error_before_the_host(self):
        for code in ("tools.add({'a': 1}, b=2)", "tools.add(1)", "tools.add({'a': 1}, {'b': 2})"):
            e = self.exc(code, "TypeError")
            self.assertIn("tools.add() takes keyword arguments or a single dict", e.message)
        self.assertEqual(HOST.calls, [])

    def test_non_json_args_name_the_path(self):
        e = self.exc("tools.echo(x=[1, {2}])", "TypeError")
        self.assertEqual(e.message, "tools.echo() arguments are not JSON: $.x[1] is a set")
        e = self.exc("tools.echo({'v': float('nan')})", "ValueError")
        self.assertEqual(e.message, "tools.echo() arguments are not JSON: $.v is NaN")
        e = self.exc("tools.echo(n=10**5000)", "ValueError")  # over int's digit limit
        self.assertTrue(e.message.startswith("tools.echo() arguments are not JSON: $ cannot be encoded: "), e.message)
        e = self.exc("tools.echo(b=b'x')", "TypeError")
        self.assertEqual(e.message, "tools.echo() arguments are not JSON: $.b is bytes")
        self.assertEqual(HOST.calls, [])

    def test_private_names_are_not_tools(self):
        self.assertIn("tools has no attribute '_x'", self.exc("tools._x", "AttributeError").message)
        self.assertEqual(self.ok("tools['echo'](k=1)"), {"k": 1})

    def test_a_tool_looked_up_again_is_the_same_tool(self):
        # the first lookup keeps the tool on `tools`; later ones must still call it
        self.assertEqual(self.ok("a = tools.add\n[a is tools.add, repr(tools.add), a(a=1, b=2), tools.add(a=3, b=4)]"),
                         [True, "<tool add>", 3, 7])
        self.assertEqual(self.ok("[repr(tools.mro), repr(tools.echo)]"), ["<tool mro>", "<tool echo>"])
        self.assertIn("tools has no attribute '_add'", self.exc("tools.add\ntools._add", "AttributeError").message)
        # the cache is not writable from the run's code
        self.assertEqual(self.exc("tools.add = 1", "AttributeError").message, "tools is read-only")
        self.assertEqual(self.exc("tools.add\ndel tools.add", "AttributeError").message, "tools is read-only")
        self.assertEqual(HOST.calls, [("add", '{"a":1,"b":2}'), ("add", '{"a":3,"b":4}')])

    def test_each_call_error_maps_to_a_catchable_subclass(self):
        cases = {
            "denied": (CallError_Denied, "ToolDenied"),
            "budget_exhausted": (CallError_BudgetExhausted, "ToolBudgetExhausted"),
            "invalid_args": (CallError_InvalidArgs, "ToolInvalidArgs"),
            "failed": (CallError_Failed, "ToolFailed"),
            "timeout": (CallError_Timeout, "ToolTimeout"),
        }
        for kind, (variant, cls) in cases.items():
            HOST.errors["echo"] = variant("msg " + kind)
            got = self.ok("try:\n    tools.echo(a=1)\nexcept ToolError as e:\n"
                          "    r = [type(e).__name__, e.kind, e.tool, e.message, str(e), isinstance(e, %s)]\nr" % cls)
            self.assertEqual(got, [cls, kind, "echo", "msg " + kind, "msg " + kind, True])

    def test_uncaught_tool_error(self):
        e = self.exc("x = 1\ntools.nope(q=1)", "ToolDenied")
        self.assertEqual(e.message, "tool nope is not allowed")
        self.assertTrue(e.traceback.startswith('Traceback (most recent call last):\n  File "<code>", line 2'), e.traceback)
        self.assertNotIn("app.py", e.traceback)
        self.assertTrue(e.traceback.endswith("\nToolDenied: tool nope is not allowed\n"), e.traceback)

    def test_list_tools(self):
        self.assertEqual(self.ok("list_tools()[0]"),
                         {"name": "add", "description": "does add", "args_schema": {"type": "object"}})
        self.assertEqual(self.ok("sorted(dir(tools))"), ["add", "boom", "echo"])


class Async(Base):
    def test_top_level_await(self):
        self.assertEqual(self.ok("x = await tools.add(a=1, b=2)\nx"), 3)
        self.assertEqual(self.ok("await tools.add(a=1, b=2)"), 3)

    def test_await_inside_async_def_with_asyncio_run(self):
        code = ("import asyncio\nasync def main():\n    a = await tools.add(a=1, b=2)\n"
                "    b = tools.add(a=a, b=1)\n    return [a, b]\nasyncio.run(main())")
        self.assertEqual(self.ok(code), [3, 4])

    def test_gather_forms(self):
        code = ("import asyncio\nasync def main():\n"
                "    r1 = await asyncio.gather(tools.add(a=1, b=1), tools.echo(k=2))\n"
                "    r2 = await asyncio.gather(*[tools.add(a=i, b=i) for i in range(3)])\n"
                "    coros = [tools.add(a=i, b=0) for i in range(2)]\n"
                "    r3 = await asyncio.gather(*coros)\n"
                "    t = asyncio.create_task(tools.add(a=5, b=5))\n"
                "    r4 = await asyncio.wait_for(tools.echo(w=1), timeout=5)\n"
                "    return [r1, r2, r3, await t, r4]\n"
                "output(await main())")
        self.assertEqual(self.ok(code), [[2, {"k": 2}], [0, 2, 4], [0, 1], 10, {"w": 1}])

    def test_gathered_calls_all_start_before_the_loop_waits_for_one(self):
        code = ("import asyncio\nasync def main():\n"
                "    return await asyncio.gather(tools.add(a=1, b=1), tools.echo(k=2), tools.add(a=2, b=2))\n"
                "asyncio.run(main())")
        self.assertEqual(self.ok(code), [2, {"k": 2}, 4])
        self.assertEqual(HOST.events, ["start", "start", "start", "await"])

    def test_a_plain_call_and_await_keep_the_synchronous_call(self):
        self.assertEqual(self.ok("import asyncio\nasync def main():\n    return await tools.add(a=1, b=2)\n"
                                 "[tools.add(a=0, b=0), asyncio.run(main())]"), [0, 3])
        self.assertEqual(HOST.events, ["call", "call"])

    def test_a_started_call_that_fails_raises_in_its_task(self):
        HOST.errors["slow"] = CallError_Timeout("slow did not answer")
        code = ("import asyncio\nasync def main():\n"
                "    r = await asyncio.gather(tools.slow(), tools.nope(), tools.add(a=1, b=1), return_exceptions=True)\n"
                "    return [type(r[0]).__name__, type(r[1]).__name__, r[2]]\nasyncio.run(main())")
        self.assertEqual(self.ok(code), ["ToolTimeout", "ToolDenied", 2])

    def test_futures_of_an_earlier_run_are_forgotten(self):
        # A task left waiting when its run ended must not hold up the next run's loop.
        app._STARTED[999] = None
        code = "import asyncio\nasync def main():\n    return await asyncio.gather(tools.add(a=1, b=1))\nasyncio.run(main())"
        self.assertEqual(self.ok(code), [2])
        self.assertEqual(app._STARTED, {})

    def test_from_asyncio_import_and_alias(self):
        code = ("import asyncio as aio\nfrom asyncio import gather as g, run\n"
                "async def main():\n    return await g(tools.add(a=1, b=2), aio.sleep(0, 'z'))\nrun(main())")
        self.assertEqual(self.ok(code), [3, "z"])

    def test_gather_return_exceptions_sees_tool_errors(self):
        code = ("import asyncio\nasync def main():\n"
                "    r = await asyncio.gather(tools.nope(), tools.add(a=1, b=1), return_exceptions=True)\n"
                "    return [type(r[0]).__name__, r[0].kind, r[1]]\nasyncio.run(main())")
        self.assertEqual(self.ok(code), ["ToolDenied", "denied", 2])

    def test_task_group_and_sleep(self):
        code = ("import asyncio, time\nasync def main():\n    t0 = time.monotonic()\n"
                "    async with asyncio.TaskGroup() as tg:\n"
                "        a = tg.create_task(tools.add(a=1, b=1))\n"
                "        b = tg.create_task(asyncio.sleep(0.02, 'slept'))\n"
                "    return [a.result(), b.result(), time.monotonic() - t0 >= 0.02]\nasyncio.run(main())")
        self.assertEqual(self.ok(code), [2, "slept", True])

    def test_top_level_await_with_asyncio_run_mixed(self):
        code = ("import asyncio\nx = await tools.add(a=1, b=1)\n"
                "async def main():\n    return x + 1\nasyncio.run(main())")
        self.assertEqual(self.ok(code), 3)

    def test_get_event_loop_run_until_complete_and_to_thread(self):
        code = ("import asyncio\nasync def main():\n    return await asyncio.to_thread(lambda: 7)\n"
                "asyncio.get_event_loop().run_until_complete(main())")
        self.assertEqual(self.ok(code), 7)
        self.assertEqual(self.ok("import asyncio\nloop = asyncio.new_event_loop()\n"
                                 "r = loop.run_until_complete(tools.add(a=2, b=2))\nloop.close()\nr"), 4)

    def test_deadlock_is_an_error_not_a_hang(self):
        e = self.exc("import asyncio\nasync def main():\n    await asyncio.get_running_loop().create_future()\n"
                     "asyncio.run(main())", "RuntimeError")
        self.assertIn("deadlock", e.message)

    def test_the_rewriter_is_skipped_only_where_it_would_change_nothing(self):
        # code without the words it acts on: rewriting leaves the tree as it was
        plain = [
            "x = 1\nx", "def run(f):\n    return f()\nrun(lambda: tools.add(a=1, b=2))",
            "class C:\n    def wait(self, x):\n        return x\nC().wait(2)",
            "r = [tools.add(a=i, b=i) for i in range(3)]\nr",
            "import json\nshield = lambda x: x\nshield(json.dumps({'a': 1}))",
        ]
        for code in plain:
            self.assertIsNone(app._REWRITER_WORDS.search(code), code)
            tree = ast.parse(code)
            self.assertEqual(ast.dump(app._Rewriter(tree).visit(tree)), ast.dump(ast.parse(code)), code)
        self.assertEqual(self.ok(plain[1]), 3)
        self.assertEqual(self.ok(plain[2]), 2)
        # ...and code that needs it finds its words even when written with compatibility
        # characters, which the parser reads NFKC-normalised
        code = "import \uff41syncio\n\uff41syncio.run(\uff41syncio.\uff57ait_for(tools.add(a=1, b=2), 5))"
        self.assertEqual(self.ok(code), 3)

    def test_tool_error_traceback_in_async_code(self):
        e = self.exc("import asyncio\nasync def main():\n    await tools.nope()\nawait main()", "ToolDenied")
        self.assertTrue(e.traceback.startswith('Traceback (most recent call last):\n  File "<code>", line 4'),
                        e.traceback)
        self.assertIn('line 3, in main\n    await tools.nope()', e.traceback)


class Errors(Base):
    def test_syntax_error(self):
        r = run("x = 1\ny = = 2\n")
        self.assertEqual(r[0], "RunError_Syntax")
        g = r[1]
        self.assertEqual(g.kind, "SyntaxError")
        self.assertIn("line 2", g.message)
        self.assertIn('File "<code>", line 2\n    y = = 2\n', g.traceback)
        self.assertIn("^", g.traceback)

    def test_compile_stage_errors_are_syntax_errors_with_the_line(self):
        r = run("x = 1\nreturn x\n")
        self.assertEqual(r[0], "RunError_Syntax")
        self.assertIn("'return' outside function", r[1].message)
        self.assertIn('line 2\n    return x', r[1].traceback)
        r = run("def f():\n    await g()\n")
        self.assertEqual(r[0], "RunError_Syntax")
        self.assertIn("line 2", r[1].traceback)
        r = run("if x:\nprint(1)")
        self.assertEqual((r[0], r[1].kind), ("RunError_Syntax", "IndentationError"))

    def test_exception_traceback_starts_at_user_code(self):
        e = self.exc("def f(d):\n    return d['k']\n\nf({})", "KeyError")
        self.assertEqual(e.message, "'k'")
        self.assertEqual(e.traceback, (
            'Traceback (most recent call last):\n'
            '  File "<code>", line 4, in <module>\n    f({})\n'
            '  File "<code>", line 2, in f\n    return d[\'k\']\n'
            + ("           ~^^^^^\n" if sys.version_info >= (3, 11) else "")
            + "KeyError: 'k'\n"))

    def test_chained_exception(self):
        e = self.exc("try:\n    1/0\nexcept ZeroDivisionError as z:\n    raise ValueError('bad') from z", "ValueError")
        self.assertIn("ZeroDivisionError: division by zero", e.traceback)
        self.assertIn("direct cause", e.traceback)
        self.assertNotIn("app.py", e.traceback)

    def test_base_exceptions_are_reported(self):
        self.assertEqual(self.exc("import sys\nsys.exit(3)", "SystemExit").message, "3")
        self.exc("raise KeyboardInterrupt", "KeyboardInterrupt")
        self.exc("raise MemoryError", "MemoryError")
        e = self.exc("def f(n):\n    return f(n + 1)\nf(0)", "RecursionError")
        self.assertIn("more time", e.traceback)  # "[Previous line repeated N more times]"
        self.exc("import asyncio\nasync def m():\n    raise SystemExit(2)\nasyncio.run(m())", "SystemExit")

    def test_unprintable_and_surrogate_messages(self):
        e = self.exc("class E(Exception):\n    def __str__(self):\n        raise RuntimeError\nraise E()", "E")
        self.assertIn("unprintable", e.message)
        e = self.exc("raise ValueError('\\ud800')", "ValueError")
        e.message.encode("utf-8")
        e.traceback.encode("utf-8")

    def test_runner_bug_is_reported_not_raised(self):
        saved = app._execute
        app._execute = lambda code, input_json: 1 / 0
        try:
            r = run("1")
        finally:
            app._execute = saved
        self.assertEqual((r[0], r[1].kind), ("RunError_Exception", "ZeroDivisionError"))


class Stdio(Base):
    def test_stdout_and_stderr_are_flushed_after_every_run(self):
        class Recorder(io.StringIO):
            flushed = 0

            def flush(self):
                Recorder.flushed += 1
                super().flush()

        out, err = Recorder(), Recorder()
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        try:
            r = run("print('hello')\nimport sys\nprint('oops', file=sys.stderr)\n1/0")
        finally:
            sys.stdout, sys.stderr = saved
        self.assertEqual(r[0], "RunError_Exception")
        self.assertEqual((out.getvalue(), err.getvalue()), ("hello\n", "oops\n"))
        self.assertGreaterEqual(Recorder.flushed, 2)

    def test_failing_flush_is_swallowed(self):
        class Broken(io.StringIO):
            def flush(self):
                raise BrokenPipeError

        saved = sys.stdout
        sys.stdout = Broken()
        try:
            self.assertEqual(run("1")[0], "ok")
        finally:
            sys.stdout = saved


class InstanceSeeding(unittest.TestCase):
    """The words native/random_state.c must write: the build compares the C code's state
    with _xoshiro256_words, and this holds that to xoshiro256**'s published outputs."""

    def test_the_expansion_is_xoshiro256starstar(self):
        import struct

        words = app._xoshiro256_words(struct.pack("<4Q", 1, 2, 3, 4))
        self.assertEqual(len(words), 624)
        # From the state (1, 2, 3, 4): 11520, 0, 1509978240, ... (the reference
        # implementation's, as rand_xoshiro tests them); the first word is 0x80000000.
        outputs = [words[i] | words[i + 1] << 32 for i in range(0, 12, 2)]
        self.assertEqual(outputs, [0x80000000, 0, 1509978240, 1215971899390074240, 1216172134540287360,
                                   607988272756665600])
        # An all-zero key, on which xoshiro256** would give only zeros, counts as 1.
        self.assertEqual(app._xoshiro256_words(bytes(32)), app._xoshiro256_words(b"\x01" + bytes(31)))


class WriteAll(unittest.TestCase):
    """WASI writes take at most 64 KiB; the guest's stdio must not drop the rest."""

    class ShortRaw(io.RawIOBase):
        def __init__(self, limit):
            super().__init__()
            self.limit, self.data = limit, bytearray()

        def writable(self):
            return True

        def write(self, b):
            taken = bytes(b[:self.limit])
            self.data += taken
            return len(taken)

    def test_long_text_is_written_whole(self):
        raw = self.ShortRaw(65536)
        out = io.TextIOWrapper(app._WriteAll(raw), encoding="utf-8", write_through=True)
        print("é" * 100000, file=out)
        self.assertEqual(raw.data.decode("utf-8"), "é" * 100000 + "\n")

    def test_a_stream_that_takes_nothing_is_a_broken_pipe(self):
        with self.assertRaises(BrokenPipeError):
            app._WriteAll(self.ShortRaw(0)).write(b"x")


@unittest.skipUnless(os.environ.get("WASMBOX_PY_BINDINGS"), "set WASMBOX_PY_BINDINGS to generated bindings")
class FakesMatchGeneratedBindings(unittest.TestCase):
    """The fakes above must have the generated modules' class names and fields."""

    def shapes(self, path):
        tree = ast.parse(open(path).read())
        found = {}
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                found[node.name] = [s.target.id for s in node.body if isinstance(s, ast.AnnAssign)]
            elif isinstance(node, ast.FunctionDef):
                found[node.name] = [a.arg for a in node.args.args]
        return found

    def fake_shapes(self, module):
        found = {}
        for name, value in vars(module).items():
            if isinstance(value, type) and value.__module__ == __name__:
                found[name] = [f.name for f in fields(value)] if hasattr(value, "__dataclass_fields__") else []
        return found

    def test_shapes(self):
        root = os.environ["WASMBOX_PY_BINDINGS"]
        real_tools = self.shapes(os.path.join(root, "wit_world/imports/tools.py"))
        real_runner = self.shapes(os.path.join(root, "wit_world/exports/runner.py"))
        real_exports = self.shapes(os.path.join(root, "wit_world/exports/__init__.py"))
        real_types = self.shapes(os.path.join(root, "componentize_py_types.py"))
        self.assertEqual(real_tools.pop("list_tools"), [])
        self.assertEqual(real_tools.pop("call"), ["name", "args_json"])
        self.assertEqual(real_tools.pop("start_call"), ["name", "args_json"])
        self.assertEqual(real_tools.pop("await_any"), ["timeout_ms"])
        self.assertTrue(callable(tools_mod.list_tools) and callable(tools_mod.call))
        self.assertEqual(real_tools, self.fake_shapes(tools_mod))
        self.assertEqual(real_runner, self.fake_shapes(runner_mod))
        self.assertEqual(list(real_exports), ["Runner"])
        self.assertEqual({k: v for k, v in real_types.items() if k in ("Some", "Ok", "Err")},
                         {"Some": ["value"], "Ok": ["value"], "Err": ["value"]})


class SessionTests(Base):
    """Calls after the first on one instance are a session's steps (app.py, "sessions")."""

    def step(self, code, input_json="null"):
        return run(code, input_json, fresh=False)

    def test_a_session_keeps_its_module_and_pops_the_last_value(self):
        fresh_instance()
        self.assertEqual(self.step("")[:2], ("ok", None))  # the host's opening call
        self.assertEqual(self.step("import math\nx = 2\ndef f(n):\n    return n * x\nf(3)")[:2], ("ok", 6))
        self.assertEqual(self.step("y = math.floor(f(1.5))")[:2], ("ok", None))
        self.assertEqual(self.step("tools = None\n[y, INPUT]", '{"a": 1}')[:2], ("ok", [3, {"a": 1}]))
        self.assertEqual(self.step("tools.add(a=1, b=2)")[:2], ("ok", 3))

    def test_tracebacks_name_the_step_that_defined_the_frame(self):
        fresh_instance()
        self.step("")
        self.step("def f():\n    raise ValueError('one')")
        kind, payload = self.step("\nf()")[:2]
        self.assertEqual(kind, "RunError_Exception")
        self.assertIn('File "<code-2>", line 2', payload.traceback)
        self.assertIn('File "<code-1>", line 2, in f', payload.traceback)
        self.assertIn("raise ValueError('one')", payload.traceback)

    def test_an_earlier_steps_asyncio_import_is_seen_by_the_rewriter(self):
        fresh_instance()
        self.step("")
        self.step("import asyncio as aio\nfrom asyncio import wait_for as wf")
        self.assertEqual(self.step("await aio.wait_for(tools.add(a=1, b=1), 1)")[:2], ("ok", 2))
        self.assertEqual(self.step("await wf(tools.add(a=2, b=2), 1)")[:2], ("ok", 4))

    def test_the_kept_source_is_bounded(self):
        fresh_instance()
        self.step("")
        for _ in range(app._MAX_KEPT_STEPS + 5):
            self.step("pass")
        self.assertEqual(len(app._kept_steps), app._MAX_KEPT_STEPS)
        self.assertNotIn("<code-1>", app.linecache.cache)

    def test_a_repeated_step_runs_its_earlier_code_under_its_own_name(self):
        fresh_instance()
        self.step("")
        code = "def f():\n    return [1 / i for i in (1, 0)]\nx = 1\nf()"
        for n in (1, 2, 3):
            kind, payload = self.step(code)[:2]
            self.assertEqual(kind, "RunError_Exception")
            self.assertIn('File "<code-%d>", line 4, in <module>\n    f()' % n, payload.traceback)
            self.assertIn('File "<code-%d>", line 2, in f' % n, payload.traceback)
        self.assertIn(code, app._COMPILED)
        self.assertEqual([self.step("1 + 1")[:2] for _ in range(3)], [("ok", 2)] * 3)
        self.assertEqual(self.step("import sys\nsys._getframe().f_code.co_filename")[1], "<code-7>")
        self.assertEqual(self.step("import sys\nsys._getframe().f_code.co_filename")[1], "<code-8>")
        for n in range(app._MAX_COMPILED + 5):
            self.step("%d" % n)
        self.assertEqual(len(app._COMPILED), app._MAX_COMPILED)

    def test_a_repeated_step_warns_as_a_compile_would(self):
        import warnings
        code = "x = 1\n1 is 1"
        changes = [
            None, None, lambda: warnings.simplefilter("default"), None, None,
            lambda: warnings.simplefilter("default"),  # the same list, but a change
            None, warnings.resetwarnings, None, None, lambda: warnings.simplefilter("ignore"), None,
            None, lambda: warnings.filters.insert(0, ("always", None, Warning, None, 0)), None,
            lambda: warnings.filters.pop(0), None, lambda: warnings.simplefilter("always"), None, None,
            lambda: warnings.simplefilter("error"), None,
        ]

        def steps():
            fresh_instance()
            self.step("")
            seen = []
            with warnings.catch_warnings(record=True) as got:
                warnings.resetwarnings()
                for change in changes:
                    if change:
                        change()
                    seen.append((len(got), self.step(code)[0]))
            return seen

        class NoCache(dict):
            def __setitem__(self, key, value):
                pass

        cached = steps()
        self.assertIn(code, app._COMPILED)  # it was used
        kept = app._COMPILED
        try:
            app._COMPILED = NoCache()
            self.assertEqual(cached, steps())
        finally:
            app._COMPILED = kept
        # The tree's path (its rewrite depends on the module) is not kept.
        self.step("await tools.add(a=1, b=1)")
        self.assertNotIn("await tools.add(a=1, b=1)", app._COMPILED)

    def test_the_build_warm_up_leaves_a_fresh_instance(self):
        main, hook = sys.modules.get("__main__"), sys.displayhook
        app._warm_up()
        self.assertEqual((app._calls, app._session_module, app._kept_steps, app._kept_chars, app._COMPILED),
                         (0, None, [], 0, {}))
        self.assertEqual([name for name in app.linecache.cache if name.startswith("<code")], [])
        self.assertIs(sys.modules.get("__main__"), main)
        self.assertIs(sys.displayhook, hook)
        self.assertFalse(app._state.has_output)
        # The first call's module, made ahead: what a module made for the run would hold.
        spare = app._spare_module
        self.assertEqual(list(vars(spare).items()), list(vars(app._fresh_module(None)).items()))
        self.assertEqual(run("import sys\nsys._getframe().f_code.co_filename", fresh=False)[1], "<code>")
        self.assertIs(app._session_module, spare)
        self.assertIsNone(app._spare_module)

    def tearDown(self):
        fresh_instance()


if __name__ == "__main__":
    unittest.main()
