"""wasmbox Python guest: runs untrusted, LLM-written Python code for the host.

componentize-py turns this module into the `code-runner` component. The host calls
`Runner.run(code, input_json)`; the code sees `tools`, `output`, `INPUT`, `list_tools`
and the `ToolError` family, and the run's value comes back as strict JSON text.

Everything that can be done once (imports, classes, the event loop policy, stdio)
happens at import time, because componentize-py snapshots the initialised interpreter:
each run starts from that snapshot instead of paying for it again, and so do a few
warm-up runs (_warm_up).

An exception escaping `Runner.run` traps the whole wasm instance, so `run` catches
BaseException everywhere and answers with a typed `Err(RunError_...)` instead.
"""

import ast
import asyncio
import builtins
import functools
import gc
import importlib
import inspect
import io
import json
import linecache
import math
import re
import sys
import time
import traceback
import types
import unicodedata
import warnings

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.runner import (
    GuestException,
    RunError_Contract,
    RunError_Exception,
    RunError_Syntax,
)
from wit_world.imports import tools as _host

# ------------------------------------------------------------------- native module
# guests/python/native, built by `cargo xtask guests` and linked in by componentize-py:
# C code that gives this wasm32 CPython build what a native one has. A native
# interpreter needs none of it (test_app_native.py runs this file on one).
if sys.platform == "wasi":
    import _wasmbox_native

    # componentize-py's CPython has no pymalloc: every object went to the libc's
    # general-purpose malloc. From here on, small blocks come from pools.
    _wasmbox_native.install_small_alloc()

    # A C `long` is 32 bits in wasm32, so the builtin sum() leaves its C fast path once a
    # total of ints passes 2**31 - 1 and makes a new int object per term from there on;
    # native 64-bit builds stay on it to 2**63 - 1. This sum() has a 64-bit total.
    _builtin_sum = _wasmbox_native.builtin_sum
    if (_wasmbox_native.sum.__doc__, _wasmbox_native.sum.__text_signature__) != (
        _builtin_sum.__doc__,
        _builtin_sum.__text_signature__,
    ):
        raise ImportError("native/wide_sum.c's sum() doc string is not this CPython's: update it")
    builtins.sum = _wasmbox_native.sum

# --------------------------------------------------------------------------- stdlib
# componentize-py bundles only the modules imported while the component is built
# (there is no filesystem at run time), so the modules promised to guest code are
# imported here. STDLIB keeps only those that really imported, so it is the truth
# about what `import x` can do inside a run.
_CURATED = (
    "json", "re", "math", "cmath", "datetime", "decimal", "fractions", "collections",
    "collections.abc", "itertools", "functools", "operator", "statistics", "hashlib",
    "hmac", "base64", "binascii", "dataclasses", "typing", "enum", "string", "textwrap",
    "random", "uuid", "heapq", "bisect", "copy", "time", "calendar", "zoneinfo",
    "difflib", "unicodedata", "urllib.parse", "html", "csv", "io", "pprint", "struct",
    "array", "asyncio", "contextlib", "abc", "numbers", "secrets", "traceback", "shlex",
    "fnmatch", "graphlib", "ipaddress",
    # for the data tools hand back: markup, config, archives, mail
    "html.parser", "xml.etree.ElementTree", "tomllib", "configparser", "zlib", "gzip",
    "zipfile", "email", "email.parser", "email.policy", "email.utils", "colorsys",
    # SQLite is linked into componentize-py's CPython; only its Python package was missing
    "sqlite3",
    # files: the run's in-memory /input, /output and /tmp (host/src/vfs). tempfile's
    # gettempdir() caches its answer, so it must not run here, at build time.
    "os", "pathlib", "tempfile", "shutil", "glob",
)


def _importable(name):
    try:
        importlib.import_module(name)
        return True
    except Exception:
        return False


# Modules that promised ones import lazily, on first use, so that nothing above brings
# them in; unbundled, that first use dies with a puzzling ModuleNotFoundError:
# - importlib.resources: guest code that reads a package's resources (zoneinfo does not
#   need it here: see the time-zone database below).
# - _strptime: datetime.strptime and time.strptime.
# - _pylong: int <-> str for ints of thousands of digits, once code lifts the digit limit
#   (sys.set_int_max_str_digits(0)).
# - the codecs the registry finds by name (codecs.lookup, str.encode, bytes.decode and
#   io.TextIOWrapper with an encoding other than UTF-8's few built-in spellings);
#   `encodings` itself brings only UTF-8.
_SUPPORT = (
    "importlib.resources", "_strptime", "_pylong",
    "encodings.ascii", "encodings.latin_1", "encodings.utf_8_sig", "encodings.utf_16",
    "encodings.utf_16_le", "encodings.utf_16_be", "encodings.utf_32", "encodings.utf_32_le",
    "encodings.utf_32_be", "encodings.utf_7", "encodings.cp1252", "encodings.cp1251",
    "encodings.cp437", "encodings.cp850", "encodings.iso8859_1", "encodings.iso8859_2",
    "encodings.iso8859_15", "encodings.mac_roman", "encodings.koi8_r", "encodings.charmap",
    "encodings.idna", "encodings.punycode", "encodings.unicode_escape",
    "encodings.raw_unicode_escape", "encodings.rot_13", "encodings.hex_codec",
    "encodings.base64_codec", "encodings.quopri_codec", "encodings.zlib_codec",
)
SUPPORT_MISSING = tuple(name for name in _SUPPORT if not _importable(name))
STDLIB = tuple(name for name in _CURATED if _importable(name))
STDLIB_MISSING = tuple(name for name in _CURATED if name not in STDLIB)


# ------------------------------------------------------------ time-zone database
# zoneinfo reads a zone's file when code first asks for the zone, and a run has no
# files. The build puts PyPI's `tzdata` on the path (xtask's python_guest.rs, which pins
# it); its zone files are read here, at build time, into one bytes object in the
# snapshot, and zoneinfo's loader is pointed at it. Only the zones a run asks for are
# parsed, and the bytes are the image's pages, shared by every instance until written
# (bytes objects are never written, and the collector skips them).
def _load_tz_database():
    try:
        import tzdata
        import zoneinfo
        import zoneinfo._common
        import zoneinfo._tzpath
    except ImportError:
        return None
    base = tzdata.__path__[0] + "/zoneinfo/"
    # `zones` lists every key, the same list zoneinfo.available_timezones() reads.
    with open(tzdata.__path__[0] + "/zones", encoding="utf-8") as f:
        keys = sorted(line.strip() for line in f if line.strip())
    chunks, index, offset = [], {}, 0
    for key in keys:
        with open(base + key, "rb") as f:
            data = f.read()
        if not data.startswith(b"TZif"):
            raise ImportError("tzdata's %s is not a TZif file" % key)
        chunks.append(data)
        index[key] = (offset, offset + len(data))
        offset += len(data)
    blob = b"".join(chunks)
    zone_names = frozenset(keys)
    not_found = zoneinfo._common.ZoneInfoNotFoundError

    def load_tzdata(key):
        # Both ZoneInfo implementations (C and Python) call this by attribute once the
        # empty TZPATH has found nothing; the key is already validated by then.
        try:
            start, end = index[key]
        except (KeyError, TypeError):
            raise not_found("No time zone found with key %s" % key) from None
        return io.BytesIO(blob[start:end])

    def available_timezones():
        return set(zone_names)

    zoneinfo._common.load_tzdata = load_tzdata
    zoneinfo._tzpath.available_timezones = zoneinfo.available_timezones = available_timezones
    # No search of /usr/share/zoneinfo and friends: the guest's zones are the pinned
    # ones, whatever a filesystem given to the guest holds.
    zoneinfo.reset_tzpath(to=())
    return tzdata.IANA_VERSION


# The IANA release of the zones, or None where the build had no tzdata (then zoneinfo
# finds no zone: ZoneInfoNotFoundError).
TZDATA_VERSION = _load_tz_database()


# ----------------------------------------------------------------------- sqlite3
def _sqlite_connect_for_the_guest():
    """sqlite3.connect(), which also keeps SQLite's temporary storage in memory and
    gives SQL's random() and randomblob() fresh randomness.

    - SQLite writes temporary tables and indices, and sorts too large for its cache, to
      temporary files by default, which it cannot make in the guest: a big ORDER BY
      failed. In memory they count against the run's memory limit instead.
    - componentize-py builds SQLite without a source of randomness, so its random() and
      randomblob() started from the same state in every fresh instance: every run got
      the same numbers, and the same ids made of randomblob(16). These draw from
      os.urandom, as Python's secrets does.
    """
    sqlite3 = sys.modules.get("sqlite3")
    if sqlite3 is None:
        return
    import os

    connect = sqlite3.connect
    urandom = os.urandom
    from_bytes = int.from_bytes

    def random():
        return from_bytes(urandom(8), "little", signed=True)

    def randomblob(max_length, n):
        # As SQLite's own: the argument as an integer, fewer than one byte is one, and
        # no blob is longer than the connection's length limit.
        try:
            n = max(int(n), 1)
        except (TypeError, ValueError):
            n = 1
        if n > max_length:
            raise OverflowError("string or blob too big")
        return urandom(n)

    @functools.wraps(connect)
    def wrapped(*args, **kwargs):
        connection = connect(*args, **kwargs)
        connection.execute("PRAGMA temp_store = MEMORY")
        connection.create_function("random", 0, random)
        max_length = connection.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)
        connection.create_function("randomblob", 1, functools.partial(randomblob, max_length))
        return connection

    sqlite3.connect = sqlite3.dbapi2.connect = wrapped


_sqlite_connect_for_the_guest()

# ---------------------------------------------------------------- added packages
# `cargo xtask python-guest --with REQUIREMENT` builds this guest with packages from
# PyPI and a generated module beside them that imports each of their modules now, while
# the component is built. The built-in guest has none.
try:
    import _wasmbox_packages
except ModuleNotFoundError as e:
    if e.name != "_wasmbox_packages":
        raise
    PACKAGES = ()
else:
    PACKAGES = _wasmbox_packages.MODULES

# Bound once so that guest code monkeypatching `json` cannot break result encoding.
_dumps = json.dumps
_loads = json.loads
_scan = json.decoder.JSONDecoder().scan_once

# The filename of this module's frames, which tracebacks shown to guest code leave out.
_HERE = inspect.currentframe().f_code.co_filename
# A run's code is `<code>`; a session's steps are `<code-1>`, `<code-2>`, ... (see _execute).
_CODE_NAME = "<code>"
_STEP_NAME = "<code-%d>"

# ------------------------------------------------------------------------- stdio
class _WriteAll(io.RawIOBase):
    """A raw stream whose write() writes everything.

    componentize-py's sys.stdout/stderr are TextIOWrappers straight over an unbuffered
    FileIO. A WASI write takes at most 64 KiB, and TextIOWrapper ignores short writes:
    the rest of a long print() was silently lost. Looping here fixes that, and staying
    unbuffered keeps everything printed before a trap or timeout visible to the host.
    """

    def __init__(self, raw):
        super().__init__()
        self._raw = raw

    def writable(self):
        return True

    def fileno(self):
        return self._raw.fileno()

    def write(self, data):
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            n = self._raw.write(view[done:])
            if not n:  # 0 or None: the host pipe takes no more
                raise BrokenPipeError("the output stream accepts no more data")
            done += n
        return done


# The streams _fix_stdio made, in the order stdout, stderr (None where it made none).
_OWN_STDIO = [None, None]


def _fix_stdio():
    for index, name in enumerate(("stdout", "stderr")):
        stream = getattr(sys, name)
        if isinstance(getattr(stream, "buffer", None), io.FileIO):
            encoding, errors = stream.encoding, stream.errors
            # detach(): otherwise the old wrapper closes the FileIO when it is collected.
            fixed = io.TextIOWrapper(_WriteAll(stream.detach()), encoding=encoding,
                                     errors=errors, write_through=True)
            setattr(sys, name, fixed)
            setattr(sys, "__%s__" % name, fixed)
            _OWN_STDIO[index] = fixed


_fix_stdio()

# ------------------------------------------------------------------- strict JSON
MAX_DEPTH = 200
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _article(noun):
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


def _short_repr(value):
    try:
        text = repr(value)
    except Exception:
        text = "<unprintable>"
    return text if len(text) <= 40 else text[:37] + "..."


def _json_problem(value):
    """Finds the first part of `value` that strict JSON cannot carry.

    Returns None, or (path, what, exc_class), read as "<path> <what>". The stdlib
    encoder would coerce keys, allow NaN and loop on cycles; the host must get exactly
    what the guest meant, so everything questionable is refused with its path.
    """
    on_path = set()  # ids of the containers enclosing the current value: a cycle check

    def walk(v, path, depth):
        if v is None or v is True or v is False:
            return None
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                # A lone surrogate cannot cross the component boundary as a string.
                return path, "is a string with a lone surrogate", ValueError
            return None
        if isinstance(v, int):
            return None
        if isinstance(v, float):
            if v != v:
                return path, "is NaN", ValueError
            if v in (math.inf, -math.inf):
                return path, "is " + ("Infinity" if v > 0 else "-Infinity"), ValueError
            return None
        if not isinstance(v, (list, tuple, dict)):
            noun = "bytes" if isinstance(v, bytes) else _article(type(v).__name__)
            return path, "is " + noun, TypeError
        if depth >= MAX_DEPTH:
            return path, "is nested more than %d levels deep" % MAX_DEPTH, ValueError
        if id(v) in on_path:
            return path, "is a cycle (it contains itself)", ValueError
        on_path.add(id(v))
        if isinstance(v, dict):
            for key, item in v.items():
                if not isinstance(key, str):
                    what = "has a non-string key %s (%s)" % (_short_repr(key), type(key).__name__)
                    return path, what, TypeError
                sub = "%s.%s" % (path, key) if _IDENT.match(key) else "%s[%s]" % (
                    path, _dumps(key, ensure_ascii=False))
                found = walk(key, sub, depth + 1) or walk(item, sub, depth + 1)
                if found:
                    return found
        else:
            for index, item in enumerate(v):
                found = walk(item, "%s[%d]" % (path, index), depth + 1)
                if found:
                    return found
        on_path.discard(id(v))
        return None

    return walk(value, "$", 0)


# The fast path of every tool call and result: a value made only of the exact JSON
# types is checked and encoded in one pass by _plain_json (native/plain_json.c; on a
# native interpreter, _plainly_json's check and one prebuilt encoder). Anything else
# (a subclass, a non-str key, NaN, a lone surrogate, too deep) takes _json_problem's
# walk, which names what is wrong and where. The walk spells out a path per key, and
# json.dumps with options builds a new JSONEncoder per call: each cost several times
# the fast path (docs/performance.md, "Where a tool call goes").
_SCALARS = frozenset((str, int, bool, float, type(None)))


def _plainly_json(v, depth=0):
    """True when `v` is certainly strict JSON; False means "let _json_problem decide"."""
    t = type(v)
    if t is str:
        return v.isascii() or _encodes(v)
    if t is int or t is bool or v is None:
        return True
    if t is float:
        return v - v == 0.0  # false for NaN and the infinities
    if depth >= MAX_DEPTH:
        return False
    # Both loops test each value inline and call themselves only for containers, floats
    # and non-ASCII text: a call per value cost as much as the rest, and one shared loop
    # over keys, then values, was slower than the two loops.
    if t is dict:
        for key, item in v.items():
            if type(key) is not str or not (key.isascii() or _encodes(key)):
                return False
            if type(item) not in _SCALARS or type(item) is float or (type(item) is str and not item.isascii()):
                if not _plainly_json(item, depth + 1):
                    return False
        return True
    if t is list or t is tuple:
        for item in v:
            if type(item) not in _SCALARS or type(item) is float or (type(item) is str and not item.isascii()):
                if not _plainly_json(item, depth + 1):
                    return False
        return True
    return False


def _encodes(text):
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _make_encoder():
    """An encoder for a value _plainly_json accepted: `_encode(value, 0)[0]` is
    json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":")).

    That odd shape is the C encoder's own: it answers a 1-tuple of the text. Calling it
    directly, where a tool call encodes its arguments, spares a Python frame and a join
    on every call. It skips its cycle check (markers None): _plainly_json's depth bound
    already refused cycles. Should the C encoder be missing
    or answer otherwise, a prebuilt JSONEncoder takes its place, in the same shape."""
    encoder = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is not None:
        try:
            c_encode = make(None, encoder.default, json.encoder.encode_basestring, None,
                            ":", ",", False, False, False)
            sample = {"a": [1, 2.5, None, True, "é", ("t",)], "b": {}}
            if c_encode(sample, 0) == (encoder.encode(sample),):
                return c_encode
        except Exception:
            pass
    return lambda value, _indent: (encoder.encode(value),)


_encode = _make_encoder()


def _plain_json_in_python(value):
    """_plain_json where the guest's C module is not (a native interpreter's tests)."""
    if _plainly_json(value):
        try:
            return _encode(value, 0)[0]
        except (ValueError, TypeError, RecursionError):  # e.g. an int over the digit limit
            pass
    return None


# `_plain_json(value)`: the text `_encode` writes for a value _plainly_json accepts, in
# one pass in C (native/plain_json.c); None for any other value, which _to_json's walk
# then encodes or names the problem of.
_plain_json = (_wasmbox_native.plain_json_encoder(MAX_DEPTH) if sys.platform == "wasi"
               else _plain_json_in_python)


def _to_json(value):
    """Strict JSON text, or (message, exc_class) naming the offending path."""
    text = _plain_json(value)
    if text is not None:
        return text, None
    found = _json_problem(value)
    if found:
        path, what, exc_class = found
        return None, ("%s %s" % (path, what), exc_class)
    try:
        return _encode(value, 0)[0], None
    except (ValueError, TypeError, RecursionError) as e:  # e.g. an int over the digit limit
        return None, ("$ cannot be encoded: %s" % e, ValueError)


# ------------------------------------------------------------------------- tools
class ToolError(Exception):
    """A tool call that did not return a result. `kind` says why (see the subclasses)."""

    kind = "error"

    def __init__(self, message="", tool=None):
        super().__init__(message)
        self.message = message
        self.tool = tool

    def __str__(self):
        # The host's messages already name the tool.
        return str(self.message)


class ToolDenied(ToolError):
    """The tool is unknown or not allowed in this run."""
    kind = "denied"


class ToolBudgetExhausted(ToolError):
    """A budget of this run (number of calls, result bytes) is spent."""
    kind = "budget_exhausted"


class ToolInvalidArgs(ToolError):
    """The host refused the arguments (size, depth, schema)."""
    kind = "invalid_args"


class ToolFailed(ToolError):
    """The tool ran and failed."""
    kind = "failed"


class ToolTimeout(ToolError):
    """The tool did not answer in time."""
    kind = "timeout"


_TOOL_ERRORS = (ToolError, ToolDenied, ToolBudgetExhausted, ToolInvalidArgs, ToolFailed, ToolTimeout)
for _cls in _TOOL_ERRORS:
    _cls.__module__ = "builtins"  # tracebacks then print `ToolDenied: ...`, not `app.ToolDenied`

_CALL_ERRORS = {
    _host.CallError_Denied: ToolDenied,
    _host.CallError_BudgetExhausted: ToolBudgetExhausted,
    _host.CallError_InvalidArgs: ToolInvalidArgs,
    _host.CallError_Failed: ToolFailed,
    _host.CallError_Timeout: ToolTimeout,
}


def _tool_args(name, args, kwargs):
    """Checks and encodes the arguments of `tools.<name>(...)` before the host sees them."""
    if args:
        if kwargs or len(args) > 1 or not isinstance(args[0], dict):
            raise TypeError(
                "tools.%s() takes keyword arguments or a single dict, got %s" % (
                    name, "both" if kwargs else "%d positional argument(s) (%s)" % (
                        len(args), ", ".join(type(a).__name__ for a in args))))
        payload = args[0]
    else:
        payload = kwargs
    text, problem = _to_json(payload)
    if problem:
        message, exc_class = problem
        raise exc_class("tools.%s() arguments are not JSON: %s" % (name, message))
    return text


def _tool_error(error, name):
    """The ToolError for the host's call-error `error`."""
    return _CALL_ERRORS.get(type(error), ToolFailed)(str(getattr(error, "value", error)), name)


def _call_tool(name, args_json, call=_host.call):
    """Calls the host (`call`: a started call's answer, for _tool_later) and decodes."""
    try:
        result = call(name, args_json)
    except Err as e:
        raise _tool_error(e.value, name) from None
    try:
        # The host sends compact JSON: the C scanner alone reads it, without loads()'s
        # two whitespace regexes; anything it does not consume whole goes to loads().
        value, end = _scan(result, 0)
        if end == len(result):
            return value
    except (StopIteration, ValueError):
        pass
    try:
        return _loads(result)
    except ValueError as e:  # the host promises JSON; say so if it ever breaks that
        raise ToolFailed("the host returned invalid JSON: %s" % e, name) from None


def _tool_call(name, /, *args, **kwargs):
    """`tools.<name>(...)`: calls the host synchronously and returns the result."""
    # The usual call, keyword arguments of plain JSON, goes straight to the encoder;
    # _tool_args handles the rest and names any problem (a call and its checks fewer).
    text = None if args else _plain_json(kwargs)
    if text is None:
        text = _tool_args(name, args, kwargs)
    return _call_tool(name, text)


class _Tool(functools.partial):
    """`tools.<name>`: `_tool_call` with the name bound.

    A partial, not a class with `__call__`: CPython calls a partial through its C
    vectorcall, where an instance's Python `__call__` goes through slot_tp_call, which
    packs the arguments into a tuple and a dict and re-enters the interpreter.
    """

    __slots__ = ()

    def __new__(cls, name):
        return super().__new__(cls, _tool_call, name)

    @property
    def name(self):
        return self.args[0]

    def __repr__(self):
        return "<tool %s>" % self.args[0]


class _Tools:
    """The `tools` namespace: any public attribute is a tool; the host decides which exist."""

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError("tools has no attribute %r" % name)
        # Kept in the instance's dict, so the next `tools.<name>` is found by the plain
        # attribute lookup without a Python call to this and a new _Tool each time.
        # Not on the class: since 3.14 a partial is a method descriptor, and would be
        # bound to `tools`. Public names are never the class's own attributes.
        tool = _Tool(name)
        self.__dict__[name] = tool
        return tool

    def __setattr__(self, name, value):
        raise AttributeError("tools is read-only")

    def __delattr__(self, name):
        raise AttributeError("tools is read-only")

    def __getitem__(self, name):  # for tool names that are not valid attributes
        if not isinstance(name, str):
            raise TypeError("tool names are strings, not %s" % type(name).__name__)
        return _Tool(name)

    def __dir__(self):
        return [t["name"] for t in list_tools()]

    def __repr__(self):
        return "<tools>"


TOOLS = _Tools()


def list_tools():
    """The tools this run may call: [{name, description, args_schema}], sorted by name."""
    found = []
    for info in _host.list_tools():
        try:
            schema = _loads(info.args_schema)
        except ValueError:
            schema = info.args_schema
        found.append({"name": info.name, "description": info.description, "args_schema": schema})
    return found


# ---------------------------------------------------------------- await support
# A plain tool call is synchronous and completes at once; `await` is still accepted
# everywhere by rewriting the code (see _Rewriter) to go through these. Calls handed to
# asyncio (gather, create_task, ...) are started on the host and run at the same time:
# each task starts its call and waits on a future that the loop's selector settles from
# the host's `await-any` (_NoIoSelector.select).

async def _ready(value):
    return value


def _awaitable(value):
    """`await x` on a plain value (e.g. a tool result) yields the value itself."""
    return value if inspect.isawaitable(value) else _ready(value)


def _awaitables(values):
    return [_awaitable(v) for v in values]


# Started calls: host call id -> the future their task awaits.
_STARTED = {}


async def _tool_later(name, args_json):
    try:
        call_id = _host.start_call(name, args_json)
    except Err as e:
        raise _tool_error(e.value, name) from None
    answer = _STARTED[call_id] = asyncio.get_running_loop().create_future()
    return _call_tool(name, await answer, _answered)


def _answered(name, answer):
    """What the host's `call` would have returned or raised: a started call's answer."""
    if type(answer) is Err:
        raise answer
    return answer.value


def _settle_started(timeout):
    """Waits for started calls (at most `timeout` seconds; None: until one ends) and
    settles the futures of those that ended."""
    ms = None if timeout is None else min(math.ceil(timeout * 1000), 0xFFFFFFFF)
    finished = _host.await_any(ms)
    if not finished and timeout is None:
        # The host holds none of them: futures left by an earlier run's loop.
        _STARTED.clear()
        raise RuntimeError("asyncio deadlock: every task is waiting and no timer is pending")
    for f in finished:
        future = _STARTED.pop(f.id, None)
        if future is not None and not future.done():  # its task may have been cancelled
            future.set_result(f.answer)


def _acall(func, /, *args, **kwargs):
    """A call handed to gather/create_task/...: a tool call becomes a coroutine.

    The call then runs, and raises, when the task runs, so gather(...,
    return_exceptions=True) and `try: await task` see tool errors as usual.
    Arguments are still checked now, where the mistake is.
    """
    if type(func) is _Tool:
        return _tool_later(func.name, _tool_args(func.name, args, kwargs))
    return func(*args, **kwargs)


# asyncio functions whose arguments are awaitables: how to treat their positional args.
_TAKES_ANY_RECEIVER = {  # distinctive names: x.gather / loop.create_task / tg.create_task
    "gather": "all", "create_task": "first", "ensure_future": "first",
    "run_until_complete": "first",
}
_TAKES_ASYNCIO_ONLY = {  # generic names: only as asyncio.<name> or imported from asyncio
    "wait_for": "first", "shield": "first", "as_completed": "iter", "wait": "iter",
    "run": "first",
}
_H_AWAIT = "__wasmbox_await__"
_H_AWAITS = "__wasmbox_awaitables__"
_H_ACALL = "__wasmbox_acall__"
_H_LAST = "__wasmbox_last__"
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _helper(name, args, where):
    return ast.copy_location(ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=args, keywords=[]), where)


def _has_top_level_await(tree):
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Await, ast.AsyncFor, ast.AsyncWith)):
            return True
        if isinstance(node, ast.comprehension) and node.is_async:
            return True
        if not isinstance(node, _SCOPES):
            stack.extend(ast.iter_child_nodes(node))
    return False


class _Rewriter(ast.NodeTransformer):
    """Makes synchronous tool calls usable in every asyncio idiom models write.

    - `await E` becomes `await __wasmbox_await__(E)`: a plain value is awaitable.
    - asyncio.gather/create_task/wait_for/...: calls in their awaitable arguments go
      through __wasmbox_acall__ (a tool call becomes a coroutine) and plain values are
      wrapped into coroutines (`coros = [tools.x(...)]; await gather(*coros)` works).
    - in code with top-level await, a module-level `asyncio.run(X)` becomes `await X`,
      since asyncio.run cannot start inside the loop that drives the module.
    All new nodes take the location of the node they wrap, so tracebacks point at the
    user's own text.
    """

    def __init__(self, tree, namespace=None):
        self.module_aliases = set()  # names bound to the asyncio module
        self.imported = {}  # local name -> asyncio function name (from asyncio import run)
        # A session's step also sees what earlier steps imported.
        for name, value in (namespace or {}).items():
            if value is asyncio:
                self.module_aliases.add(name)
            elif type(value) is types.FunctionType and getattr(asyncio, value.__name__, None) is value:
                self.imported[name] = value.__name__
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name == "asyncio":
                        self.module_aliases.add(a.asname or a.name)
            elif isinstance(node, ast.ImportFrom) and node.module == "asyncio":
                for a in node.names:
                    self.imported[a.asname or a.name] = a.name
        self.top_level_await = _has_top_level_await(tree)
        self.depth = 0  # > 0 inside a def, lambda or class body

    def _scoped(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = _scoped

    def visit_Await(self, node):
        self.generic_visit(node)
        node.value = _helper(_H_AWAIT, [node.value], node.value)
        return node

    def _asyncio_name(self, func):
        if isinstance(func, ast.Attribute):
            if func.attr in _TAKES_ANY_RECEIVER:
                return func.attr
            if (func.attr in _TAKES_ASYNCIO_ONLY and isinstance(func.value, ast.Name)
                    and func.value.id in self.module_aliases):
                return func.attr
        elif isinstance(func, ast.Name):
            real = self.imported.get(func.id)
            if real in _TAKES_ANY_RECEIVER or real in _TAKES_ASYNCIO_ONLY:
                return real
        return None

    def _deferred(self, node):
        """Rewrites the calls that produce the awaitables in `node` to __wasmbox_acall__."""
        if isinstance(node, ast.Call):
            return ast.copy_location(ast.Call(
                func=ast.Name(id=_H_ACALL, ctx=ast.Load()),
                args=[node.func] + node.args, keywords=node.keywords), node)
        if isinstance(node, ast.Starred):
            node.value = self._deferred(node.value)
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            node.elts = [self._deferred(e) for e in node.elts]
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            node.elt = self._deferred(node.elt)
        elif isinstance(node, ast.IfExp):
            node.body = self._deferred(node.body)
            node.orelse = self._deferred(node.orelse)
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        name = self._asyncio_name(node.func)
        if name is None or not node.args:
            return node
        if name == "run" and self.top_level_await and self.depth == 0:
            first = self._deferred(node.args[0])
            return ast.copy_location(ast.Await(value=_helper(_H_AWAIT, [first], first)), node)
        mode = _TAKES_ANY_RECEIVER.get(name) or _TAKES_ASYNCIO_ONLY[name]
        wrapped = []
        for i, arg in enumerate(node.args):
            if mode == "all" or i == 0:
                if isinstance(arg, ast.Starred):
                    arg.value = _helper(_H_AWAITS, [self._deferred(arg.value)], arg.value)
                elif mode == "iter":
                    arg = _helper(_H_AWAITS, [self._deferred(arg)], arg)
                else:
                    arg = _helper(_H_AWAIT, [self._deferred(arg)], arg)
            wrapped.append(arg)
        node.args = wrapped
        return node


# -------------------------------------------------------------------- event loop
class _NoIoSelector:
    """The selector of WasiEventLoop. A guest has no sockets or pipes, so waiting for
    I/O can only mean sleeping until the next timer is due."""

    def select(self, timeout=None):
        if _STARTED:  # tool calls in flight: their answers are the I/O to wait for
            _settle_started(timeout)
            return []
        if timeout is None:  # nothing ready, no timer: no task can ever wake up again
            raise RuntimeError("asyncio deadlock: every task is waiting and no timer is pending")
        if timeout > 0:
            time.sleep(timeout)
        return []

    def close(self):
        pass


class WasiEventLoop(asyncio.BaseEventLoop):
    """An asyncio loop for WASI. The default selector loop cannot start there: its
    self-pipe needs socket.socketpair(), which fails (PermissionError)."""

    def __init__(self):
        super().__init__()
        self._selector = _NoIoSelector()

    def _process_events(self, event_list):
        pass

    def _write_to_self(self):
        pass  # only wakes a loop blocked in another thread; there is one thread

    def run_in_executor(self, executor, func, *args):
        # No threads on WASI: run the function now (this serves asyncio.to_thread too).
        future = self.create_future()
        try:
            future.set_result(func(*args))
        except Exception as e:
            future.set_exception(e)
        return future


_PolicyBase = getattr(asyncio.events, "_BaseDefaultEventLoopPolicy", None) or getattr(
    asyncio.events, "BaseDefaultEventLoopPolicy")


class _WasiPolicy(_PolicyBase):
    _loop_factory = WasiEventLoop

    def get_event_loop(self):
        # 3.14 raises when no loop is set; models still write
        # asyncio.get_event_loop().run_until_complete(main()).
        try:
            return super().get_event_loop()
        except RuntimeError:
            loop = self.new_event_loop()
            self.set_event_loop(loop)
            return loop


_POLICY = _WasiPolicy()
# The private setter does not warn on 3.14 (where the public one is deprecated).
(getattr(asyncio.events, "_set_event_loop_policy", None) or asyncio.set_event_loop_policy)(_POLICY)

# ------------------------------------------------------------------------ a run


class _Failure(Exception):
    """Ends a run with the given RunError variant."""

    def __init__(self, variant):
        super().__init__()
        self.variant = variant


class _OutputTwice(BaseException):
    """Raised by a second output() call. A BaseException so `except Exception` in guest
    code does not swallow it; the run is failed anyway (latched in _state)."""


class _RunState:
    __slots__ = ("has_output", "output", "violation", "last")

    def __init__(self):
        self.has_output = False
        self.output = None
        self.violation = None
        self.last = None  # the value of a last line compiled apart (_compile_source)


_state = _RunState()


def output(value):
    """Sets the run's value. May be called at most once."""
    if _state.has_output:
        _state.violation = "output() called more than once"
        raise _OutputTwice(_state.violation)
    _state.has_output = True
    _state.output = value


def _reject_constant(name):
    raise ValueError("%s is not JSON" % name)


def _clean(text):
    """A str that can cross the component boundary (no lone surrogates)."""
    try:
        text = str(text)
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    except Exception:
        return "<unprintable>"


# An error's text is the guest code's choice: a 100 MB message must not be copied into a
# traceback or across the boundary. The host caps kind, message and traceback by bytes
# (MAX_ERROR_*_BYTES in host/src/outcome.rs); the guest cuts them first, by characters,
# saying how many it left out, so the host's byte cap rarely has anything left to do.
_MAX_KIND_CHARS = 256
_MAX_MESSAGE_CHARS = 8 << 10
_MAX_TRACEBACK_CHARS = 32 << 10


def _cut_end(text, limit):
    """The start of `text`, at most `limit` characters with the marker."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - 40)
    return "%s [… %d characters cut]" % (text[:keep], len(text) - keep)


def _cut_start(text, limit):
    """The end of `text` (a traceback's innermost frames), at most `limit` characters."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - 40)
    return "[… %d characters cut]\n%s" % (len(text) - keep, text[len(text) - keep:])


def _message(exc):
    try:
        return _clean(_cut_end(str(exc), _MAX_MESSAGE_CHARS))
    except BaseException:
        return "<unprintable %s>" % type(exc).__name__


def _trim(te, seen):
    """Drops the runner's frames: a traceback starts at the user's code."""
    if te is None or id(te) in seen:
        return
    seen.add(id(te))
    frames = [f for f in te.stack if f.filename != _HERE]
    for i, frame in enumerate(frames):
        if frame.filename == _CODE_NAME or frame.filename.startswith("<code-"):
            frames = frames[i:]
            break
    te.stack = traceback.StackSummary.from_list(frames)
    # The exception line repeats the message: cut it before format() copies it.
    if isinstance(getattr(te, "_str", None), str):
        te._str = _cut_end(te._str, _MAX_MESSAGE_CHARS)
    _trim(te.__cause__, seen)
    _trim(te.__context__, seen)
    for sub in getattr(te, "exceptions", None) or ():
        _trim(sub, seen)


def _guest_exception(exc):
    try:
        te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
        _trim(te, set())
        text = _cut_start("".join(te.format()), _MAX_TRACEBACK_CHARS)
    except BaseException:
        text = ""
    kind = _cut_end(type(exc).__name__, _MAX_KIND_CHARS)
    return GuestException(kind=_clean(kind), message=_message(exc), traceback=_clean(text))


def _syntax_error(exc, lines):
    # compile() of an AST has no source text; put the line back for the caret display.
    if isinstance(exc, SyntaxError) and exc.text is None and exc.lineno and 0 < exc.lineno <= len(lines):
        exc.text = lines[exc.lineno - 1]
    try:
        text = _cut_start("".join(traceback.format_exception_only(type(exc), exc)), _MAX_TRACEBACK_CHARS)
    except BaseException:
        text = ""
    kind = _cut_end(type(exc).__name__, _MAX_KIND_CHARS)
    return GuestException(kind=_clean(kind), message=_message(exc), traceback=_clean(text))


# The rewriter changes nothing in code that names none of these: it acts on `await`, on
# the distinctive asyncio names whatever their receiver, and on the others only through
# an `import asyncio` / `from asyncio import`. Skipping it skips three walks over the
# tree in Python (its scan of the imports, its visit, and fix_missing_locations for the
# nodes it adds): on a realistic script those took longer than parsing and compiling it
# together (docs/performance.md, "Compiling the run's code").
_REWRITER_WORDS = re.compile("|".join(["await", "asyncio", *_TAKES_ANY_RECEIVER]))


# Code that needs no rewriting is compiled from its source, without the tree: turning
# the parser's tree into Python objects (ast.parse) and back (compile of a tree) cost far
# more than compiling the text (docs/performance.md, "Session steps"). What the tree gave
# besides the rewrite, the final expression's value, comes from compiling the last line
# apart in "single" (interactive) mode, where an expression statement hands its value to
# sys.displayhook. That needs the last line to be the whole last statement, which holds
# when it starts a line at column 0 and the lines before it compile on their own: they
# then leave no bracket, string, continuation or block open. Code that ends in a block
# (its last line indented) has no value when its last line at column 0 opens the block:
# that statement, from there on, is compiled apart in the same way, and run after the
# lines before it. Anything else, and code with words the source path cannot honour,
# takes the tree.
# - `async`: top-level `async for`/`async with` make the module a coroutine.
# - `__future__`: its flags would apply to the lines before the last one only.
# - `displayhook`: the last line runs with the capturing hook in place.
_TREE_WORDS = re.compile("|".join(["async", "__future__", "displayhook", _REWRITER_WORDS.pattern]))
# Statements that open a block: as the last line they cannot hold the value, and
# "single" mode would call the hook for expressions in their body.
_COMPOUND = frozenset(("if", "elif", "else", "while", "for", "try", "except", "finally",
                       "with", "def", "class", "async", "match", "case"))
# Keywords that can only start a compound statement (`match` is a name elsewhere).
_BLOCKS = frozenset(("if", "while", "for", "try", "with", "def", "class"))
_LAST_LINE = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*|[0-9(\[{'\"])")
_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
# Statements whose first word is a keyword and that need no `=`, `:` or `,` outside
# brackets (compound statements are _COMPOUND's).
_SIMPLE_STATEMENTS = frozenset(("import", "from", "del", "pass", "return", "raise", "global",
                                "nonlocal", "assert", "break", "continue", "yield", "await",
                                "lambda"))
_BLANK = " \t\f\r\n"  # what the tokenizer skips: str.strip() would take U+00A0 and more
_CO_COROUTINE = inspect.CO_COROUTINE


def _compile(code, filename=_CODE_NAME, namespace=None):
    """The run's code as (body, more, last, value), each a code object or None: `body`
    and then `more` are run with exec, then `last` with the capturing displayhook
    (_run_last) or `value` with eval, which returns the code's value. Raises SyntaxError
    or ValueError. `namespace` is a session's module dict (None in a run)."""
    keep = namespace is not None and code != ""  # a session's step with code
    if keep:
        entry = _COMPILED.get(code)
        if (entry is not None and entry[1] == _filter_changes[0] and entry[0] == tuple(_WARNINGS.filters)
                and getattr(_WARNINGS, _MUTATED) is _count_mutation):
            body, more, last, value = entry[2]
            return (body and _renamed(body, filename), more and _renamed(more, filename),
                    last and _renamed(last, filename), value and _renamed(value, filename))
        shown = _shown[0]
    # The parser reads identifiers NFKC-normalised (`ｇather` is `gather`); so does the test.
    text = code if code.isascii() else unicodedata.normalize("NFKC", code)
    if _TREE_WORDS.search(text) is None:
        try:
            compiled = _compile_source(code, filename)
        except (SyntaxError, ValueError):
            compiled = None  # the tree's path reports it as before
        if compiled is not None:
            if keep and shown == _shown[0] and _WARNINGS._showwarnmsg is _count_shown:
                if len(_COMPILED) >= _MAX_COMPILED:
                    del _COMPILED[next(iter(_COMPILED))]
                _COMPILED[code] = (tuple(_WARNINGS.filters), _filter_changes[0], compiled)
            return compiled
    tree = ast.parse(code, filename, "exec")
    rewrite = _REWRITER_WORDS.search(text) is not None
    if rewrite:
        tree = _Rewriter(tree, namespace).visit(tree)
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        # REPL style: the value of a final expression statement is the run's value.
        last = tree.body[-1]
        target = ast.copy_location(ast.Name(id=_H_LAST, ctx=ast.Store()), last)
        tree.body[-1] = ast.copy_location(ast.Assign(targets=[target], value=last.value), last)
    if rewrite:
        ast.fix_missing_locations(tree)  # the rewriter's new nodes; the two above have theirs
    return compile(tree, filename, "exec", flags=_FLAGS, dont_inherit=True), None, None, None


# A session's steps compiled from their source, by source text: a step whose text an
# earlier step had runs that step's code objects, under its own filename, instead of
# compiling the text again (compile() is most of a step: docs/performance.md, "Session
# steps"). Code objects are immutable and exec'd any number of times; what compile()
# did besides returning them is warn (SyntaxWarning). So an entry is made only when the
# compile showed no warning, and used only while the warning filters are those it was
# compiled under and unchanged since: no call that changed them (which also makes a
# warning once suppressed as already shown show again) and no edit of the list. The
# tree's path, whose rewrite depends on what earlier steps bound, is not kept; neither
# is anything of a run (a fresh instance compiles each text once anyway).
_COMPILED = {}
_MAX_COMPILED = 32
_CodeType = types.CodeType
_WARNINGS = warnings
_shown = [0]  # warnings shown so far (the C warnings machinery calls _showwarnmsg)
_filter_changes = [0]  # calls that changed the filters (simplefilter, catch_warnings, ...)


def _count_shown(msg, _show=warnings._showwarnmsg):
    _shown[0] += 1
    _show(msg)


# What the warnings module's functions call when they change the filters: named so
# since 3.13 (_filters_mutated before).
_MUTATED = "_filters_mutated_lock_held" if hasattr(warnings, "_filters_mutated_lock_held") else "_filters_mutated"


def _count_mutation(_mutated=getattr(warnings, _MUTATED)):
    _filter_changes[0] += 1
    _mutated()


warnings._showwarnmsg = _count_shown
setattr(warnings, _MUTATED, _count_mutation)


def _renamed(code, filename):
    """`code` (and the code objects in it: functions, classes, comprehensions) with the
    filename of the step that runs it, for its tracebacks and the source they show."""
    consts = code.co_consts
    if _CodeType in map(type, consts):
        consts = tuple(_renamed(c, filename) if type(c) is _CodeType else c for c in consts)
        return code.replace(co_filename=filename, co_consts=consts)
    return code.replace(co_filename=filename)


def _compile_source(code, filename):
    """_compile's answer from the source alone, or None where the tree is needed."""
    if not code:  # a session's opening call, for one
        return None, None, None, None
    body = code.rstrip(_BLANK)
    start = body.rfind("\n") + 1
    last = body[start:]
    if last[:1] in (" ", "\t", "#"):
        return _compile_block_end(body, start, filename)
    word = _LAST_LINE.match(last)
    first = word and word.group()
    if word is None or first in _COMPOUND or ";" in last or last.endswith("\\"):
        if not body:
            return compile(code, filename, "exec", flags=_FLAGS, dont_inherit=True), None, None, None
        return None
    # An expression is compiled in "eval" mode, whose code returns its value: compile()
    # costs less than in "single" mode, and no displayhook is swapped. These checks are
    # cheap (a regular expression that followed brackets cost more than it saved) and
    # never take a statement: no statement keyword first, and no `=`, `:` or `,` outside
    # brackets (no assignment, annotation, walrus, lambda, or bare tuple, whose starred
    # items "eval" mode refuses); either none anywhere, or the line is a call `a.b(...)`
    # holding the line's only brackets. A line that fails to compile as an expression
    # then is not a valid statement either, and the tree's path reports it, as it did
    # when "single" mode failed.
    value = first not in _SIMPLE_STATEMENTS and (
        ("=" not in last and ":" not in last and "," not in last)
        or (last[-1] == ")" and last[:last.find("(")].replace(".", "_").isidentifier()
            and last.count("(") == 1 and last.count(")") == 1))
    # The last line keeps its line number; it starts at column 0, so its columns are right.
    text = "\n" * body.count("\n", 0, start) + last if start else last
    if value:
        try:
            last_code = compile(text, filename, "eval", flags=_FLAGS, dont_inherit=True)
        except (SyntaxError, ValueError):
            return None
    else:
        last_code = compile(text, filename, "single", flags=_FLAGS, dont_inherit=True)
    if start and "__annotate__" in last_code.co_names:
        return None  # its annotations would replace, not join, those of the lines before
    head = body[:start]
    head_code = (compile(head, filename, "exec", flags=_FLAGS, dont_inherit=True)
                 if start and not _nothing_to_run(head) else None)
    if value:
        return head_code, None, None, last_code
    return head_code, None, last_code, None


# Lines that are blank or comments, to the end. A line ends at one `\r` or `\n` (a
# `\r\n` is then a line and an empty one): with `\r\n` as an alternative, each CRLF line
# could match two ways, and a head of comments before code backtracked through 2**lines.
# (A NUL is left to compile(), which refuses it.)
_COMMENTS_ONLY = re.compile(r"(?:[ \t\f]*(?:#[^\r\n\0]*)?[\r\n])*[ \t\f]*(?:#[^\r\n\0]*)?\Z")


def _nothing_to_run(head):
    """Whether the lines before a last line hold no code: blank lines and comments only,
    which compile() would turn into code that does nothing, at its full fixed cost (a
    step that starts with a comment line has such a head; docs/performance.md, "A Python
    step that starts with a comment")."""
    text = head.lstrip(_BLANK)
    return not text or (text[0] == "#" and _COMMENTS_ONLY.match(text) is not None)


def _compile_block_end(body, start, filename):
    """_compile_source for code whose last line (starting at `start`) is indented or a
    comment."""
    while True:  # back to the last line at column 0 that is not blank or a comment
        if start == 0:
            return None  # nothing at column 0: the tree reports the error
        start = body.rfind("\n", 0, start - 1) + 1
        if body[start] not in " \t\f\r\n#":
            break
    word = _LAST_LINE.match(body, start)
    if word is None or word.group() not in _BLOCKS:
        return None
    rest = compile("\n" * body.count("\n", 0, start) + body[start:], filename, "exec",
                   flags=_FLAGS, dont_inherit=True)
    if "__annotate__" in rest.co_names:
        return None  # as for a last line
    head = body[:start]
    if _nothing_to_run(head):
        return rest, None, None, None
    return compile(head, filename, "exec", flags=_FLAGS, dont_inherit=True), rest, None, None


def _capture_last(value):
    _state.last = value


def _run_last(code, namespace):
    """Runs a last line compiled in "single" mode: the value of an expression statement
    reaches sys.displayhook, which keeps it instead of printing it."""
    saved = sys.displayhook
    sys.displayhook = _capture_last
    try:
        exec(code, namespace)
    finally:
        sys.displayhook = saved


def _fresh_module(input_value):
    module = types.ModuleType("__main__")
    _give_names(module, input_value)
    return module


# The names a run's code sees, in this order; INPUT is each run's own.
_NAMES = {
    "__builtins__": builtins,
    "tools": TOOLS,
    "output": output,
    "INPUT": None,
    "list_tools": list_tools,
    _H_AWAIT: _awaitable,
    _H_AWAITS: _awaitables,
    _H_ACALL: _acall,
    **{cls.__name__: cls for cls in _TOOL_ERRORS},
}


def _give_names(module, input_value):
    """Puts the names a run's code sees into `module`: every step of a session again,
    since code may have rebound them."""
    namespace = module.__dict__
    namespace.update(_NAMES)
    namespace["INPUT"] = input_value


# ---------------------------------------------------------------------- sessions
# A run is one call of `run` on a fresh instance. The host calls an instance again only
# in a session (host/src/session), which it opens with an empty call, so every call after
# the first is a step of a session: its code runs in the module of the calls before it,
# and its filename is `<code-N>` (step N) so that a traceback through a function an
# earlier step defined shows that step's lines. Nothing in the code or the input can
# choose this: only the host calling the same instance again.
_calls = 0
_session_module = None
_spare_module = None  # the first call's module, made ahead (_warm_up)
# Source of the steps whose functions may still raise, for tracebacks: the most recent
# ones, at most this many and this many characters in all (older frames show no line).
_MAX_KEPT_STEPS = 100
_MAX_KEPT_CHARS = 4 << 20
_kept_steps = []
_kept_chars = 0  # the sizes in _kept_steps, summed


def _drop_current_loop():
    # A loop left by asyncio.get_event_loop()/new_event_loop() must not outlive its run.
    # Most runs leave none, and then there is nothing to do.
    loop = getattr(getattr(_POLICY, "_local", None), "_loop", None)
    if loop is not None:
        try:
            if not loop.is_running() and not loop.is_closed():
                loop.close()
        finally:
            _POLICY.set_event_loop(None)  # so the next run starts without it


def _execute(code, input_json):
    """One run. Returns the JSON text of its value or raises _Failure(variant)."""
    global _state, _calls, _session_module, _kept_chars, _spare_module
    _state = _RunState()
    if _STARTED:  # an earlier step's calls, which its loop never awaited
        _STARTED.clear()
    _calls += 1
    step = _calls - 1  # 0 for a run (or a session's opening call)

    if input_json == "null" or input_json.strip() in ("", "null"):
        input_value = None
    else:
        try:
            input_value = _loads(input_json, parse_constant=_reject_constant)
        except ValueError as e:
            raise _Failure(RunError_Contract(_clean("input is not valid JSON: %s" % e)))

    lines = code.splitlines(True)
    module = _session_module
    filename = _STEP_NAME % step if step else _CODE_NAME
    try:
        body, more, last, value_code = _compile(code, filename, module and module.__dict__)
    except (SyntaxError, ValueError) as e:  # ValueError: e.g. NUL bytes on older Pythons
        raise _Failure(RunError_Syntax(_syntax_error(e, lines)))

    if module is None:
        # Source lines for tracebacks; mtime None keeps linecache.checkcache from dropping it.
        linecache.cache[_CODE_NAME] = (len(code), None, lines, _CODE_NAME)
        # The instance's first call: its module is the one the build made (_warm_up), as
        # every instance has it in the snapshot, untouched until now; making it here was
        # a large share of a fresh run (docs/performance.md, "The first call of a fresh
        # instance").
        module = _spare_module
        if module is None:
            module = _fresh_module(input_value)
        else:
            _spare_module = None
            module.__dict__["INPUT"] = input_value
        _session_module = module
    else:
        # The step's source, kept for tracebacks (each of these is a call fewer per step
        # inline: docs/performance.md, "Session steps"); mtime None keeps
        # linecache.checkcache from dropping it.
        size = len(code)
        linecache.cache[filename] = (size, None, lines, filename)
        _kept_steps.append((filename, size))
        _kept_chars += size
        if len(_kept_steps) > _MAX_KEPT_STEPS or _kept_chars > _MAX_KEPT_CHARS:
            while len(_kept_steps) > 1 and (len(_kept_steps) > _MAX_KEPT_STEPS or _kept_chars > _MAX_KEPT_CHARS):
                old, size = _kept_steps.pop(0)
                linecache.cache.pop(old, None)
                _kept_chars -= size
        # The names the code sees, again (code may have rebound them), as _give_names.
        namespace = module.__dict__
        namespace.update(_NAMES)
        namespace["INPUT"] = input_value
        # The value of this step's final expression, not an earlier step's.
        namespace.pop(_H_LAST, None)
    # A real __main__ module: dataclasses, typing and enum look classes' modules up there.
    saved_main = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    try:
        if body is None:
            pass
        elif body.co_flags & _CO_COROUTINE:  # top-level await
            asyncio.run(eval(body, module.__dict__))
        else:
            exec(body, module.__dict__)
        if more is not None:
            exec(more, module.__dict__)
        if last is not None:
            _run_last(last, module.__dict__)
        elif value_code is not None:
            _state.last = eval(value_code, module.__dict__)
    except BaseException as e:
        if _state.violation is None:
            raise _Failure(RunError_Exception(_guest_exception(e)))
    finally:
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
        else:
            sys.modules.pop("__main__", None)
        if getattr(getattr(_POLICY, "_local", None), "_loop", None) is not None:
            _drop_current_loop()
    if _state.violation is not None:  # latched: guest code may have swallowed it
        raise _Failure(RunError_Contract(_state.violation))

    if _state.has_output:
        value = _state.output
    elif last is not None or value_code is not None:
        value = _state.last
    else:
        value = module.__dict__.get(_H_LAST)
    if value is None:
        return "null"
    kind = type(value)
    if kind is int or kind is str and value.isascii():  # what _to_json would do, less its checks
        try:
            return _encode(value, 0)[0]
        except ValueError:
            pass  # an int over the digit limit: _to_json says so
    text, problem = _to_json(value)
    if problem:
        raise _Failure(RunError_Contract(_clean("result is not JSON: %s" % problem[0])))
    return text


def _flush_stdio():
    out, err, out0, err0 = sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__
    _flush(out)
    if err is not out:
        _flush(err)
    if out0 is not out and out0 is not err:
        _flush(out0)
    if err0 is not out and err0 is not err and err0 is not out0:
        _flush(err0)


def _flush(stream):
    if stream is not None:
        try:
            stream.flush()
        except BaseException:
            pass  # e.g. BrokenPipeError from a full pipe: the host latches its own limits


# Prebuilt, so reporting cannot fail even when there is no memory left to build one.
_FALLBACK = RunError_Exception(GuestException(
    kind="MemoryError", message="the guest failed while reporting an error", traceback=""))


class Runner(exports.Runner):
    def run(self, code, input_json):
        failure = _FALLBACK
        try:
            try:
                # No random.seed() here: componentize-py reseeds `random` in every fresh
                # instance (its PR #42; _install_instance_seeding makes that cheap), so the
                # snapshot's random state is not shared by runs; a second reseed would be a
                # cost to every run. The tests runs_do_not_share_random_state and
                # python_instances_seed_random_* hold both to it.
                return_value = _execute(code, input_json)
                failure = None
            except _Failure as f:
                failure = f.variant
            except BaseException as e:  # a bug in the runner itself: report, never trap
                failure = RunError_Exception(GuestException(
                    kind=type(e).__name__, message=_message(e),
                    traceback=_clean("".join(traceback.format_exception(e)))))
        except BaseException:
            pass
        finally:
            # The host reads stdout/stderr from pipes after the run: buffered text must be
            # out. The streams _fix_stdio made hold nothing back (write-through over a raw
            # stream that writes everything), so while they are in place, unchanged, there
            # is nothing to flush (reconfigure() could change write_through).
            out, err = sys.stdout, sys.stderr
            if not (out is _OWN_STDIO[0] and err is _OWN_STDIO[1] and sys.__stdout__ is out
                    and sys.__stderr__ is err and out.write_through and err.write_through):
                _flush_stdio()
        if failure is not None:
            raise Err(failure)
        return return_value


# ------------------------------------------------------ each instance's own random state
# componentize-py calls `random.seed()` once in every fresh instance, at its first call,
# so that instances do not share the snapshot's random state: the function it calls is
# the one `random.seed` names once this module has been imported. CPython's seed() reads
# 2,496 bytes of entropy and mixes them into MT19937's state in ~1,900 rounds of
# init_by_array: a large share of a fresh `1 + 1` run (docs/performance.md, "The
# first call of a fresh instance"). The function it finds here puts the genuine
# random.seed back first, then gives random._inst a state expanded from 32 bytes of
# os.urandom (native/random_state.c says how, and why that seeds as well). Nothing in the
# snapshot holds random._inst's state apart from random._inst: random.random,
# random.choice, ... are its bound methods, so they all draw from the new state.
def _xoshiro256_words(key):
    """The 624 words native/random_state.c makes of `key`, for the build's check."""
    import struct

    mask = (1 << 64) - 1
    s = list(struct.unpack("<4Q", key)) if any(key) else [1, 0, 0, 0]
    words = []
    for _ in range(312):
        out = ((((s[1] * 5) & mask) << 7 | ((s[1] * 5) & mask) >> 57) & mask) * 9 & mask
        t = (s[1] << 17) & mask
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = (s[3] << 45 | s[3] >> 19) & mask
        words += (out & 0xFFFFFFFF, out >> 32)
    return (0x80000000,) + tuple(words[1:])


def _install_instance_seeding():
    import os
    import random

    inst = random._inst
    genuine = random.seed
    if getattr(genuine, "__self__", None) is not inst or genuine.__func__ is not random.Random.seed:
        raise ImportError("random.seed is not random._inst.seed at build time")
    seed_random = _wasmbox_native.seed_random
    # The C code writes CPython's RandomObject in place: the state getstate() reads back
    # must be the one it was to write, or the build fails here.
    for key in (bytes(range(1, 33)), bytes(32)):
        probe = random.Random()
        seed_random(probe, key)
        if probe.getstate() != (3, _xoshiro256_words(key) + (624,), None):
            raise ImportError("native/random_state.c does not write this CPython's random state")

    def seed_instance(_random=random, _inst=inst, _genuine=genuine, _urandom=os.urandom, _seed=seed_random):
        _random.seed = _genuine
        try:
            _seed(_inst, _urandom(32))
            _inst.gauss_next = None  # as seed() leaves it
        except BaseException:  # an exception here would trap the instance
            _genuine()  # CPython's: falls back on the time and process id by itself

    random.seed = seed_instance


if sys.platform == "wasi":
    _install_instance_seeding()


# ------------------------------------------------------------- an immortal snapshot
# Counting references writes: a run that only calls a function increments and
# decrements the counts of the function, its code, globals and builtins, and the pages
# those counts sit on are then copied back by the slot's reset after every run, and stay
# resident in the slot (docs/performance.md, "What a Python run writes of the
# snapshot"). CPython skips those writes for immortal objects (PEP 683), and the
# snapshot's objects live as long as the instance anyway, so they are made immortal:
# everything the cyclic collector tracks, what those refer to, and the constants of code
# objects (which the collector does not traverse); their hashes are computed on the way,
# for the same reason. What a run makes stays mortal and is freed as before.
def _immortal_snapshot():
    _wasmbox_native.immortalize(gc.get_objects(), types.CodeType)
    # CPython must agree that they are immortal: references taken and dropped leave the
    # count alone, and what a run makes is still mortal. Otherwise the C code does not
    # match this CPython: fail the build.
    probe = _IMMORTAL_PROBE
    before = sys.getrefcount(probe)
    held = [probe] * 8
    if sys.getrefcount(probe) != before or not sys._is_immortal(probe) or sys._is_immortal(held):
        raise ImportError("native/immortal.c does not make this CPython's objects immortal")


# Reached only through this module's dict, which the collector tracks: not interned, not
# tracked itself.
_IMMORTAL_PROBE = " ".join(["a", "string", "made", "at", "build", "time"])


# A few runs at build time, so that the snapshot holds the runner's code as running made
# it (CPython specialises bytecode as it runs it, and fills its caches) instead of every
# fresh instance doing that again: 9% of a W1 run's fuel (docs/performance.md, "Session
# steps"). What a run leaves behind is then put back as a fresh instance has it.
def _warm_up():
    global _calls, _session_module, _state, _kept_chars, _spare_module
    _spare_module = _fresh_module(None)  # so that the first run takes the path runs take
    for code in ("", "1 + 1", "x = 1", "x = 2\nx"):  # a run, then steps of a session
        try:
            Runner().run(code, "null")
        except Err as e:
            raise ImportError("the build's warm-up run of %r failed: %r" % (code, e.value)) from None
    for name in [_CODE_NAME] + [name for name, _ in _kept_steps]:
        linecache.cache.pop(name, None)
    _kept_steps.clear()
    _kept_chars = 0
    _COMPILED.clear()
    _calls = 0
    _session_module = None
    _spare_module = _fresh_module(None)
    _state = _RunState()


# The snapshot is made immortal before the warm-up too, so that the bytecode it
# specialises loads the constants as immortal ones ("an immortal snapshot", above).
gc.collect()
if sys.platform == "wasi":
    _immortal_snapshot()
_warm_up()


# Last, after every import and the warm-up: collect what the build left behind, then make
# the rest of the snapshot immortal and move it out of the cyclic collector's way. Its
# objects live as long as the instance anyway, but a full collection in a run walked all
# of them (the stdlib's modules, classes and functions) and wrote to each one's header,
# which took far longer than the run's own objects need and left pages dirty for the
# slot reset to copy back (docs/performance.md, "The cyclic collector and the snapshot").
# CPython's collector drops immortal objects from its lists when it meets them (this
# collection does so for the first pass's), and gc.freeze() moves what it still tracks
# to the permanent generation. The run's own objects are collected as before.
gc.collect()
if sys.platform == "wasi":
    _immortal_snapshot()
gc.freeze()
if sys.platform == "wasi":
    # A run's small blocks from empty pools, on as few pages as they fill (native/small_alloc.c).
    _wasmbox_native.small_alloc_fresh_pools()
