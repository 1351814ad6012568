//! What Python code sees: values, output(), print, errors, stdlib, input.

use serde_json::json;
use wasmbox::Status;

use crate::support::{run, sandbox, value};

#[tokio::test]
async fn a_trivial_expression_is_the_value() {
    let outcome = run("1 + 1").await;
    assert_eq!(value(&outcome), json!(2));
    assert_eq!(outcome.stats.fuel_used, 0, "the default engine does not meter fuel");
    assert!(outcome.stats.peak_memory_bytes > 0);
}

#[tokio::test]
async fn values_of_every_json_type_round_trip() {
    let code = r#"{"none": None, "t": True, "f": False, "i": -7, "big": 2**53, "x": 1.5, "s": "héllo ☃ 😀", "l": [1, [2, (3, 4)]], "d": {"k": {}}}"#;
    assert_eq!(
        value(&run(code).await),
        json!({"none": null, "t": true, "f": false, "i": -7, "big": 9007199254740992_u64, "x": 1.5, "s": "héllo ☃ 😀", "l": [1, [2, [3, 4]]], "d": {"k": {}}})
    );
}

#[tokio::test]
async fn no_final_expression_means_null() {
    assert_eq!(value(&run("x = 1").await), json!(null));
    assert_eq!(value(&run("").await), json!(null));
}

#[tokio::test]
async fn output_sets_the_value_once() {
    assert_eq!(value(&run("output({'a': 1})\n2 + 2").await), json!({"a": 1}));
    let twice = run("output(1)\noutput(2)").await;
    assert_eq!(twice.status, Status::Error);
    let error = twice.error.unwrap();
    assert_eq!(error.kind, "ContractError");
    assert!(error.message.contains("more than once"), "{}", error.message);
}

#[tokio::test]
async fn print_is_captured() {
    let outcome = run("print('hello')\nimport sys\nprint('oops', file=sys.stderr)\n3").await;
    assert_eq!(value(&outcome), json!(3));
    assert_eq!(outcome.stdout.text, "hello\n");
    assert_eq!(outcome.stderr.text, "oops\n");
    assert!(!outcome.stdout.truncated);
}

#[tokio::test]
async fn input_is_visible_as_input() {
    let outcome = sandbox().run_with_input("INPUT['n'] * 2", &json!({"n": 21})).await;
    assert_eq!(value(&outcome), json!(42));
}

#[tokio::test]
async fn a_syntax_error_is_reported_with_its_line() {
    let outcome = run("x = 1\ny = (").await;
    assert_eq!(outcome.status, Status::Error);
    let error = outcome.error.unwrap();
    assert_eq!(error.kind, "SyntaxError");
    assert!(error.traceback.contains("line 2"), "{}", error.traceback);
}

/// Comments and blank lines before the last line compile to nothing, so the guest does not
/// pay compile()'s fixed cost for them: the bound below is well under that cost and over
/// what each further line still costs (docs/performance.md, "A Python step that starts
/// with a comment"); a NUL in them is refused as before.
#[tokio::test]
async fn comments_before_the_last_line_cost_no_compile_of_their_own() {
    let fuel = async |code: &str| {
        let outcome = wasmbox::Sandbox::new(crate::support::python_fuel(), crate::support::tools()).run(code).await;
        assert_eq!(value(&outcome), json!(2), "{code:?}");
        outcome.stats.fuel_used
    };
    let alone = fuel("1 + 1").await;
    for code in ["# the sum\n1 + 1", "\n# one\n\n   # two\r\n\x0c# three\n1 + 1"] {
        let commented = fuel(code).await;
        assert!(commented < alone + 60_000, "{code:?}: {commented} fuel against {alone} for the line alone");
    }
    let with_code = fuel("# the sum\nx = 1\n1 + 1").await;
    assert!(with_code > alone + 60_000, "a line of code before the last one is compiled: {with_code} against {alone}");
    let outcome = run("# a\0b\n1 + 1").await;
    assert_eq!(outcome.error.map(|error| error.kind), Some("SyntaxError".to_owned()), "a NUL is refused");
    let outcome = run("# setup\n\n1/0").await;
    assert!(outcome.error.unwrap().traceback.contains("line 3"), "the last line keeps its number");
    // Comment lines ended by CRLF before a line of code: the check that they are only
    // comments fails at the code, and must fail in time linear in the lines (a pattern
    // that could read a CRLF two ways tried 2**40 ways here).
    let code = format!("{}x = 1\r\nx", "#\r\n".repeat(40));
    let limits = wasmbox::Limits { timeout_ms: 10_000, ..wasmbox::Limits::default() };
    assert_eq!(value(&crate::support::run_limited(&code, limits).await), json!(1));
}

#[tokio::test]
async fn an_uncaught_exception_comes_back_with_kind_message_and_traceback() {
    let outcome = run("def f(x):\n    return 1 / x\n\nf(0)").await;
    assert_eq!(outcome.status, Status::Error);
    let error = outcome.error.unwrap();
    assert_eq!(error.kind, "ZeroDivisionError");
    assert_eq!(error.message, "division by zero");
    assert!(error.traceback.contains("<code>"), "{}", error.traceback);
    assert!(error.traceback.contains("line 2, in f"), "{}", error.traceback);
    assert!(error.traceback.contains("return 1 / x"), "source lines are shown: {}", error.traceback);
}

#[tokio::test]
async fn a_non_json_result_names_the_path() {
    let outcome = run("{'items': [1, 2, 3, {4, 5}]}").await;
    assert_eq!(outcome.status, Status::Error);
    let error = outcome.error.unwrap();
    assert_eq!(error.kind, "ContractError");
    assert!(error.message.contains("$.items[3]"), "{}", error.message);
    assert!(error.message.contains("set"), "{}", error.message);
    for code in ["float('nan')", "b'bytes'", "x = []\nx.append(x)\nx", "object()"] {
        let outcome = run(code).await;
        assert_eq!(outcome.status, Status::Error, "{code}");
        assert_eq!(outcome.error.unwrap().kind, "ContractError", "{code}");
    }
}

#[tokio::test]
async fn the_promised_stdlib_imports_and_works() {
    let code = r#"
import json, re, math, datetime, decimal, collections, itertools, statistics, hashlib, base64, dataclasses, typing

@dataclasses.dataclass
class P:
    x: int
    y: typing.Optional[int] = None

output({
    "json": json.loads(json.dumps({"a": [1]})),
    "re": re.findall(r"\d+", "a1b22"),
    "math": math.isqrt(17),
    "date": datetime.date(2026, 11, 29).isoformat(),
    "decimal": str(decimal.Decimal("0.1") + decimal.Decimal("0.2")),
    "counter": collections.Counter("abca").most_common(1),
    "perms": len(list(itertools.permutations(range(4)))),
    "mean": statistics.mean([1, 2, 3, 4]),
    "sha": hashlib.sha256(b"x").hexdigest()[:8],
    "b64": base64.b64encode(b"hi").decode(),
    "dc": dataclasses.asdict(P(1)),
})
"#;
    assert_eq!(
        value(&run(code).await),
        json!({
            "json": {"a": [1]}, "re": ["1", "22"], "math": 4, "date": "2026-11-29",
            "decimal": "0.3", "counter": [["a", 2]], "perms": 24, "mean": 2.5,
            "sha": "2d711642", "b64": "aGk=", "dc": {"x": 1, "y": null},
        })
    );
}

#[tokio::test]
async fn sys_exit_is_an_error_not_a_crash() {
    let outcome = run("import sys\nsys.exit(3)").await;
    assert_eq!(outcome.status, Status::Error);
    assert_eq!(outcome.error.unwrap().kind, "SystemExit");
    assert_eq!(value(&run("'still alive'").await), json!("still alive"));
}

#[tokio::test]
async fn the_collector_skips_the_snapshot_and_still_collects_the_runs_cycles() {
    // app.py makes the snapshot's objects immortal, which CPython's collector drops from
    // its lists, and freezes what is left: a full collection walks only the run's own.
    let code = "import gc\nclass Node:\n    pass\nn = Node()\nn.me = n\ndel n\n\
                [gc.get_freeze_count() + len(gc.get_objects()) < 1000, len(gc.get_objects()) < 1000, gc.collect() >= 1]";
    assert_eq!(value(&run(code).await), json!([true, true, true]));
}

#[tokio::test]
async fn stdlib_helpers_imported_on_first_use_are_bundled() {
    // The guest has no files: what promised modules import lazily (_strptime, the codecs
    // the registry finds by name) must be in the component, not a ModuleNotFoundError.
    let code = r#"
import codecs, datetime, io, time
[
    datetime.datetime.strptime("2026-11-29 08:30", "%Y-%m-%d %H:%M").isoformat(),
    time.strptime("29/11/2026", "%d/%m/%Y").tm_yday,
    io.TextIOWrapper(io.BytesIO("é€".encode("cp1252")), encoding="cp1252").read(),
    "bücher.example".encode("idna").decode(),
    [codecs.lookup(n).name for n in ("latin-1", "utf-16", "utf-8-sig", "ascii", "iso8859-15", "mac-roman")],
    codecs.encode("wasm", "rot13"),
    codecs.encode(b"hi", "hex").decode(),
    codecs.decode(b"aGk=\n", "base64").decode(),
]
"#;
    assert_eq!(
        value(&run(code).await),
        json!([
            "2026-11-29T08:30:00",
            333,
            "é€",
            "xn--bcher-kva.example",
            ["iso8859-1", "utf-16", "utf-8-sig", "ascii", "iso8859-15", "mac-roman"],
            "jnfz",
            "6869",
            "hi"
        ])
    );
}

#[tokio::test]
async fn the_data_format_modules_work() {
    // Markup, config, archives and mail: what tool results often carry.
    let code = r#"
import configparser, email, email.policy, gzip, io, tomllib, zipfile
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs = []
    def handle_starttag(self, tag, attrs):
        self.hrefs += [v for k, v in attrs if k == "href"]

p = Links()
p.feed('<p><a href="/a">a</a> <a href="/b">b</a></p>')
cfg = configparser.ConfigParser()
cfg.read_string("[db]\nport = 5432\n")
buf = io.BytesIO()
with zipfile.ZipFile(buf, "w") as z:
    z.writestr("n.txt", "zipped")
msg = email.message_from_string("Subject: hi\nFrom: a@b.c\n\nbody\n", policy=email.policy.default)
[
    p.hrefs,
    [e.get("id") for e in ET.fromstring('<r><i id="1"/><i id="2"/></r>').iter("i")],
    tomllib.loads('a = [1, 2]\n[t]\nk = "v"')["t"]["k"],
    cfg.getint("db", "port"),
    gzip.decompress(gzip.compress(b"squeezed")).decode(),
    zipfile.ZipFile(io.BytesIO(buf.getvalue())).read("n.txt").decode(),
    [msg["subject"], msg.get_content().strip()],
]
"#;
    assert_eq!(
        value(&run(code).await),
        json!([["/a", "/b"], ["1", "2"], "v", 5432, "squeezed", "zipped", ["hi", "body"]])
    );
}

/// The guest's `sum()` is guests/python/native/wide_sum.c (a 64-bit total in wasm32,
/// where a C `long` is 32 bits): every call answers as the builtin it replaces does —
/// the same value and type, the same exception and message, the same `__radd__` calls —
/// including the totals past 2**31 and 2**63 where the two take different paths.
#[tokio::test]
async fn sum_keeps_a_64_bit_total_and_answers_exactly_as_the_builtin() {
    let code = r#"
import _wasmbox_native, builtins, inspect
from decimal import Decimal
from fractions import Fraction

calls = []

class Loud(int):
    def __radd__(self, other):
        calls.append(("radd", int(self)))
        return int.__radd__(self, other)

class Text:
    def __radd__(self, other):
        return "t" + str(other)

def failing():
    yield 1
    yield 2**40
    raise ValueError("stop here")

B = 2**31
cases = [
    ([], {}), ([[]], {}), ([[1, 2, 3]], {}), ([range(100_000)], {}), ([range(-100_000, 3)], {}),
    ([[B - 1, 1]], {}), ([[B, B, -B]], {}), ([[2**62, 2**62]], {}), ([[2**63 - 1, 1, -1]], {}),
    ([[-2**63, -1, 1]], {}), ([[2**70, 1, -2**70]], {}), ([[1, 2**70, 3]], {}), ([[True, True, 3]], {}),
    ([[1, 2.5, B * B]], {}), ([[B * 4, 0.5]], {}), ([[1.5, 2, 0.1, 0.2]], {}), ([[1, 1j, 2]], {}),
    ([[1, Fraction(1, 3), 2]], {}), ([[Decimal("0.1"), 1]], {}), ([[Loud(5), 2, Loud(2**40), B]], {}),
    ([[1, Text(), "u", "v"]], {}), ([[1, "a"]], {}), ([[1, None]], {}), ([[B, 2], 5], {}),
    ([[1, 2]], {"start": 10}), ([[1]], {"start": 2**64}), ([[1]], {"start": -2**63}), ([[]], {"start": True}),
    ([[1]], {"start": 1.5}), ([["a"]], {"start": ""}), ([[b"a"]], {"start": b""}),
    ([[]], {"start": bytearray()}), ([[[1], [2]]], {"start": []}), ([[1]], {"start": Loud(3)}),
    ([failing()], {}), ([5], {}), ([[1], 2, 3], {}), ([[1]], {"begin": 2}), ([], {"iterable": [1]}),
    ([[1], 2], {"start": 3}),
]
mismatches = []
for args, kwargs in cases:
    answers = []
    for f in (_wasmbox_native.builtin_sum, sum):
        calls.clear()
        given = [failing() if a.__class__.__name__ == "generator" else a for a in args]
        try:
            r = f(*given, **kwargs)
            answers.append(("value", type(r).__name__, repr(r), list(calls)))
        except Exception as e:
            answers.append(("raised", type(e).__name__, str(e), list(calls)))
    if answers[0] != answers[1]:
        mismatches.append([repr(args)[:80], repr(kwargs), answers])

b = _wasmbox_native.builtin_sum
same_face = [
    sum is builtins.sum, sum is not b, repr(sum) == repr(b), sum.__module__ == b.__module__,
    sum.__self__ is b.__self__, sum.__qualname__ == b.__qualname__, sum.__doc__ == b.__doc__,
    inspect.signature(sum) == inspect.signature(b), sum.__reduce__() == b.__reduce__(),
]
{"cases": len(cases), "mismatches": mismatches, "same_face": same_face,
 "w4": sum(i * i for i in range(1_000_000))}
"#;
    let value = value(&run(code).await);
    assert_eq!(value["mismatches"], json!([]), "{value:#}");
    assert_eq!(value["cases"], json!(40));
    assert_eq!(value["same_face"], json!(vec![true; 9]));
    assert_eq!(value["w4"], json!(333_332_833_333_500_000_u64));
}

/// Tool arguments and run values of plain JSON are encoded by
/// guests/python/native/plain_json.c in one pass: on generated values it answers exactly
/// json.dumps' strict, compact text where app.py's own check accepts the value, and
/// None (the walk's turn) everywhere else: subclasses, NaN, lone surrogates, non-str
/// keys, cycles, nesting at the limit, ints past 64 bits.
#[tokio::test]
async fn plain_json_writes_what_json_dumps_writes_and_refuses_the_rest() {
    let code = r#"
import _wasmbox_native, app, json, random, sys

encode = _wasmbox_native.plain_json_encoder(app.MAX_DEPTH)
rng = random.Random(20261204)

class Int(int): pass
class Str(str): pass
class Dict(dict): pass

PIECES = ["a", "Z", "é", "ß", '"', "\\", "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "\x7f",
          "\u2028", "😀", "\ud800", "\udfff", " ", "/", "u", "\\u"]

def text():
    return "".join(rng.choice(PIECES) for _ in range(rng.randrange(8)))

def scalar():
    return rng.choice([
        lambda: None, lambda: True, lambda: False, lambda: rng.randint(-100, 100),
        lambda: rng.randint(-2**70, 2**70), lambda: 2**63, lambda: -2**63 - 1,
        lambda: rng.random() * 10.0 ** rng.randint(-30, 30), lambda: -0.0, lambda: 1e16,
        lambda: float("nan"), lambda: float("-inf"), text, text, text,
        lambda: Int(3), lambda: Str("s"), lambda: b"x", lambda: {1, 2},
    ])()

def value(depth):
    kind = rng.randrange(10)
    if depth > 3 or kind < 5:
        return scalar()
    n = rng.randrange(5)
    if kind < 7:
        keys = [text() if rng.random() < 0.95 else rng.choice([1, None, 2.5]) for _ in range(n)]
        made = {k: value(depth + 1) for k in keys}
        return Dict(made) if rng.random() < 0.05 else made
    items = [value(depth + 1) for _ in range(n)]
    return tuple(items) if kind == 7 else items

def wide(v):
    """an int past 64 bits anywhere in v: left to app.py's path"""
    if type(v) is int:
        return not -2**63 <= v < 2**63
    if type(v) in (list, tuple):
        return any(wide(x) for x in v)
    if type(v) is dict:
        return any(wide(x) for x in v.values())
    return False

def expected(v):
    if not app._plainly_json(v) or wide(v):
        return None
    try:
        return json.dumps(v, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except ValueError:
        return None

def nested(levels):
    v = 1
    for _ in range(levels):
        v = [v]
    return v

cycle = []
cycle.append(cycle)
long_text = "x\n\"" * 5000 + "é" * 3000
values = [value(0) for _ in range(3000)] + [
    {"a": 1, "b": 2}, {}, [], "", nested(app.MAX_DEPTH), nested(app.MAX_DEPTH + 1), cycle,
    10 ** 5000, {"big": -10 ** 4299}, 2 ** 63 - 1, -2 ** 63, [2 ** 63], -2 ** 63 - 1, long_text, {long_text: [long_text] * 3},
    [0.1, 1e-7, 1e22, 123456789.0, -2.5e-300, 5e-324], {"k": {"k": {"k": [None, True]}}},
]
mismatches = []
plain = 0
for v in values:
    want = expected(v)
    got = encode(v)
    plain += got is not None
    if got != want:
        mismatches.append([repr(v)[:120], got and got[:120], want and want[:120]])
{"mismatches": mismatches[:5], "count": len(mismatches), "values": len(values), "plain": plain,
 "in_use": app._plain_json is not app._plain_json_in_python}
"#;
    let value = value(&run(code).await);
    assert_eq!(value["count"], json!(0), "{value:#}");
    assert_eq!(value["values"], json!(3017));
    // both paths are exercised: many generated values are plain, many are not
    let plain = value["plain"].as_u64().unwrap();
    assert!(plain > 500 && plain < 2800, "{value:#}");
    assert_eq!(value["in_use"], json!(true));
}

/// plain_json.c walks the value with borrowed references, so no Python code may run
/// during the walk: an int past 64 bits is left to app.py's path, because its repr can
/// import `_pylong` (through `builtins.__import__`, which guest code can replace) once
/// the code lifts the digit limit, and that code could empty a list being walked.
#[tokio::test]
async fn plain_json_runs_no_python_code_during_its_walk() {
    let code = r#"
import app, builtins, json, sys
sys.set_int_max_str_digits(0)
imported = []
outer = [[10 ** 10000], "tail"]
original = builtins.__import__
def hook(*args, **kwargs):
    imported.append(args[0])
    outer.clear()
    return original(*args, **kwargs)
builtins.__import__ = hook
try:
    answer = app._plain_json(outer)
finally:
    builtins.__import__ = original
# the walk's fallback, json's own encoder, still writes it whole
text = app._to_json([[10 ** 10000], "tail"])[0]
{"answer": answer, "imported": imported, "left": len(outer),
 "fallback": text == json.dumps([[10 ** 10000], "tail"], separators=(",", ":"))}
"#;
    let value = value(&run(code).await);
    assert_eq!(value, json!({"answer": null, "imported": [], "left": 2, "fallback": true}));
}

/// Small blocks come from the pools of guests/python/native/small_alloc.c, which wrap
/// CPython's allocator: objects of every size class, made, grown, shrunk and freed in a
/// shuffled order, keep their contents, alongside objects from before the pools (the
/// snapshot's) and blocks too large for them.
#[tokio::test]
async fn objects_of_every_size_keep_their_contents_through_the_pools() {
    let code = r#"
import _wasmbox_native, random, zlib
rng = random.Random(6)
live = {}
def make(n):
    kind = n % 4
    if kind == 0:
        return rng.randbytes(n)
    if kind == 1:
        return rng.randbytes(n).decode("latin-1")
    if kind == 2:
        return list(range(n))
    return {i: str(i) for i in range(n // 8)}
def check(v):
    return zlib.crc32(repr(v).encode())
for step in range(20_000):
    key = rng.randrange(2_000)
    if key in live and rng.random() < 0.5:
        del live[key]
    else:
        v = make(rng.randrange(0, 700))
        live[key] = (v, check(v))
    if step % 97 == 0:
        grown = bytearray()
        for i in range(rng.randrange(1, 900)):
            grown.append(i & 255)
        del grown[len(grown) // 8:]
        assert bytes(grown) == bytes(i & 255 for i in range(len(grown)))
bad = [k for k, (v, c) in live.items() if check(v) != c]
old = [m.__name__ for m in (zlib, random)]
{"bad": bad, "live": len(live) > 500, "old": old, "arenas": _wasmbox_native.small_alloc_arenas() > 0,
 "again": _wasmbox_native.install_small_alloc()}
"#;
    let value = value(&run(code).await);
    assert_eq!(
        value,
        json!({"bad": [], "live": true, "old": ["zlib", "random"], "arenas": true, "again": null}),
        "{value:#}"
    );
}
