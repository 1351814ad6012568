// wasmbox JavaScript guest: the logic, with no wasm imports.
//
// runner.js binds this to the `wasmbox:sandbox/tools` import and exports it as the
// component's `runner`; test_runner_native.mjs drives the same code under node with a
// fake host. Semantics follow the Python guest (guests/python/app.py): same contract
// errors, same JSON-path messages, same ToolError family, so one conformance suite can
// run against both.
//
// A run never throws out of `run()`: componentize-js traps the whole instance on an
// uncaught exception (or a returned `undefined`), so every outcome is a result object
// `{tag: 'ok', val: text}` or `{tag: 'err', val: <run-error variant>}`, which the
// generated bindings lower as-is.

// Bound once, so that code which patches JSON, Object or Promise cannot break how the
// run's value is encoded or driven (as the Python guest binds json.dumps once).
const { stringify, parse } = JSON;
const {
  keys: objectKeys, getPrototypeOf, getOwnPropertySymbols, getOwnPropertyDescriptor, defineProperty,
} = Object;
const { isArray } = Array;
// Reflect's, not Object's: SpiderMonkey's Object.getPrototypeOf is self-hosted JS around
// it, several times its cost in this interpreter, and the checks below pass it only
// objects, for which the two answer alike.
const reflectGetPrototypeOf = Reflect.getPrototypeOf;
const promiseThen = Promise.prototype.then;
// A settled promise to queue a microtask on (the run's end: createRunner). Its own
// `constructor`, undefined, makes `then` create a plain promise without reading
// Promise.prototype.constructor or Promise[Symbol.species], which code may have replaced
// with a getter that throws (ECMA-262 SpeciesConstructor, step 2).
const RESOLVED = Promise.resolve();
Object.defineProperty(RESOLVED, 'constructor', { value: undefined });
const promiseResolve = Promise.resolve.bind(Promise);
const promiseReject = Promise.reject.bind(Promise);
const withResolvers = typeof Promise.withResolvers === 'function'
  ? Promise.withResolvers.bind(Promise)
  : () => { // node before 22, for test_runner_native.mjs
    let resolve;
    let reject;
    const promise = new Promise((yes, no) => {
      resolve = yes;
      reject = no;
    });
    return { promise, resolve, reject };
  };
const propertyIsEnumerable = Function.prototype.call.bind(Object.prototype.propertyIsEnumerable);

// ------------------------------------------------------------------ strict JSON
export const MAX_DEPTH = 200;
const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;
const objectProto = Object.prototype;
const arrayProto = Array.prototype;
const isWellFormed = typeof ''.isWellFormed === 'function'
  ? (s) => s.isWellFormed()
  : (s) => !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);

function article(noun) {
  return ('aeiou'.includes(noun[0].toLowerCase()) ? 'an ' : 'a ') + noun;
}

/** A short type name for messages: `Map`, `Array`, `number`, `null`, ... */
export function typeName(v) {
  if (v === null) return 'null';
  if (typeof v !== 'object' && typeof v !== 'function') return typeof v;
  try {
    const proto = getPrototypeOf(v);
    if (proto === null) return 'Object';
    const ctor = getOwnPropertyDescriptor(proto, 'constructor');
    const name = ctor && typeof ctor.value === 'function' ? ctor.value.name : '';
    return name || (typeof v === 'function' ? 'function' : 'object');
  } catch {
    return typeof v; // a hostile Proxy
  }
}

function isPlainObject(v) {
  if (v === null || typeof v !== 'object' || isArray(v)) return false;
  const proto = getPrototypeOf(v);
  return proto === objectProto || proto === null;
}

// What a non-JSON value "is", worded like the Python guest (`is a Set`, `is NaN`).
function describeNonJson(v) {
  switch (typeof v) {
    case 'undefined': return 'is undefined';
    case 'bigint': return 'is a BigInt';
    case 'symbol': return 'is a Symbol';
    case 'function': return 'is a function';
    default: return 'is ' + article(typeName(v));
  }
}

/**
 * Encodes `value` as strict JSON text, or names the first part JSON cannot carry.
 *
 * Returns {text} or {problem: "<path> <what>"}. JSON.stringify would drop undefined
 * and functions, write NaN as null, call toJSON (Date), unbox String objects and throw
 * on cycles without a path; the host must get exactly what the code meant. Values made
 * of plain JSON alone (the common case) are written by JSON.stringify, which writes them
 * exactly; anything else goes to writeJson, which names the problem.
 */
export function toJson(value) {
  // A finite number, a boolean or null (W1's value): JSON.stringify's text, which for
  // these is String's (stringify calls toJSON on objects and BigInts only), without the
  // checks a container needs.
  if (typeof value === 'number' ? value - value === 0 : value === null || typeof value === 'boolean') {
    return { text: String(value) };
  }
  const text = plainJsonText(value);
  return text !== undefined ? { text } : writeJson(value);
}

/**
 * JSON.stringify's text for a value plainlyJson accepts, unless the text holds a `\u`
 * escape; undefined for any other (exported for the tests: which values take this path).
 */
export function plainJsonText(value) {
  try {
    // A toJSON on the prototypes would make JSON.stringify call it for every plain
    // object or array; `in` reads no getter.
    if (!('toJSON' in objectProto) && !('toJSON' in arrayProto) && plainlyJson(value, 0)) {
      // stringify reads a getter or Proxy trap again. Should it answer differently the
      // second time, the text is still strict JSON (stringify writes nothing else), only
      // not what the first read said.
      const text = stringify(value);
      // Lone surrogates, in strings or keys, are the one thing plainlyJson leaves to the
      // text: stringify writes each as a \uXXXX escape, which the host would refuse. One
      // search of the text costs less than a check of every string (two calls each);
      // text with any `\u` (also a control character, or a backslash before a `u`) goes
      // to writeJson, which names a lone surrogate by its path.
      if (text.indexOf('\\u') === -1) return text;
    }
  } catch {
    // a getter or Proxy trap threw: writeJson names where
  }
  return undefined;
}

/**
 * plainJsonText for a tool call's usual argument, a non-null object that is not an
 * array: the same answer (exported for the tests, which compare them), with the checks of
 * plainJsonText and plainlyJson's object branch in one function. Each call saved is a
 * noticeable part of a tool call in this interpreter (docs/performance.md, "A tool
 * call's arguments (session 31)").
 */
export function plainArgsText(value) {
  try {
    if ('toJSON' in objectProto || 'toJSON' in arrayProto) return undefined;
    const proto = reflectGetPrototypeOf(value);
    if ((proto !== objectProto && proto !== null) || getOwnPropertySymbols(value).length !== 0) return undefined;
    for (const key in value) {
      const item = value[key];
      if (typeof item === 'number' ? item - item !== 0 : !(typeof item === 'string' || typeof item === 'boolean'
        || item === null || plainlyJson(item, 1))) return undefined;
    }
    const text = stringify(value);
    if (text.indexOf('\\u') === -1) return text;
  } catch {
    // a getter or Proxy trap threw: writeJson names where
  }
  return undefined;
}

/**
 * True when `value` holds only what JSON.stringify writes as the same value: strings,
 * finite numbers, booleans, null, arrays and plain objects with string keys, nested at
 * most MAX_DEPTH deep (which also ends a cycle). Strings and keys are not checked for
 * lone surrogates here: plainJsonText finds those in the text. It checks without
 * building a path or any text, so this check plus the native stringify cost a fraction
 * of writeJson's interpreted walk. The answer only picks the writer; writeJson is the
 * one that explains.
 */
function plainlyJson(v, depth) {
  switch (typeof v) {
    case 'number':
      return v - v === 0; // false for NaN and the infinities, without a call
    case 'string':
    case 'boolean':
      return true;
    case 'object':
      break;
    default:
      return false;
  }
  if (v === null) return true;
  if (depth >= MAX_DEPTH) return false;
  // Both loops pass strings, numbers, booleans and null inline and call themselves for
  // the rest: in this interpreter a call per value costs as much as the test itself.
  if (isArray(v)) {
    // an array whose prototype code replaced may bring a toJSON, which stringify would call
    if (reflectGetPrototypeOf(v) !== arrayProto) return false;
    for (let i = 0; i < v.length; i++) {
      const item = v[i];
      if (typeof item === 'number' ? item - item !== 0 : !(typeof item === 'string' || typeof item === 'boolean'
        || item === null || plainlyJson(item, depth + 1))) return false;
    }
    return true;
  }
  const proto = reflectGetPrototypeOf(v);
  if ((proto !== objectProto && proto !== null) || getOwnPropertySymbols(v).length !== 0) return false;
  // for-in, not objectKeys: no array of the keys. It also visits enumerable names that
  // code put on Object.prototype, which stringify skips: their values are checked too,
  // needlessly but harmlessly.
  for (const key in v) {
    const item = v[key];
    if (typeof item === 'number' ? item - item !== 0 : !(typeof item === 'string' || typeof item === 'boolean'
      || item === null || plainlyJson(item, depth + 1))) return false;
  }
  return true;
}

/**
 * toJson for any value: walks it once, writing the text in the same pass (a getter read
 * twice could answer differently the second time), and stops at the first part JSON
 * cannot carry, naming it by its path.
 */
export function writeJson(value) {
  const onPath = new Set(); // the containers enclosing the current value: a cycle check
  const out = [];
  // The keys and indices from the root to the value being read. The path text is only
  // built for a problem: building it for every key (a template and a regex test each)
  // was most of a tool call's cost in the guest.
  const trail = [];

  function pathOf() {
    let path = '$';
    for (const k of trail) {
      path += typeof k === 'number' ? `[${k}]` : IDENT.test(k) ? `.${k}` : `[${stringify(k)}]`;
    }
    return path;
  }

  function walk(v, depth) {
    switch (typeof v) {
      case 'string':
        if (!isWellFormed(v)) return pathOf() + ' is a string with a lone surrogate';
        out.push(stringify(v));
        return null;
      case 'number':
        if (v !== v) return pathOf() + ' is NaN';
        if (v === Infinity || v === -Infinity) return pathOf() + ' is ' + (v > 0 ? 'Infinity' : '-Infinity');
        out.push(stringify(v));
        return null;
      case 'boolean':
        out.push(v ? 'true' : 'false');
        return null;
      case 'object':
        if (v === null) {
          out.push('null');
          return null;
        }
        break;
      default:
        return pathOf() + ' ' + describeNonJson(v);
    }
    const isList = isArray(v);
    if (!isList && !isPlainObject(v)) return pathOf() + ' ' + describeNonJson(v);
    if (depth >= MAX_DEPTH) return `${pathOf()} is nested more than ${MAX_DEPTH} levels deep`;
    if (onPath.has(v)) return pathOf() + ' is a cycle (it contains itself)';
    onPath.add(v);
    if (isList) {
      out.push('[');
      const n = v.length;
      for (let i = 0; i < n; i++) {
        if (i) out.push(',');
        trail.push(i);
        const found = walk(v[i], depth + 1);
        if (found) return found;
        trail.pop();
      }
      out.push(']');
    } else {
      // Indexed loops, not for-of: the array iterator protocol runs as interpreted
      // self-hosted code here, costly even over an empty array.
      const symbols = getOwnPropertySymbols(v);
      for (let i = 0; i < symbols.length; i++) {
        if (propertyIsEnumerable(v, symbols[i])) {
          return `${pathOf()} has a non-string key ${String(symbols[i])} (symbol)`;
        }
      }
      out.push('{');
      const keys = objectKeys(v);
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i];
        trail.push(key);
        if (!isWellFormed(key)) return pathOf() + ' is a string with a lone surrogate';
        if (i) out.push(',');
        out.push(stringify(key), ':');
        const found = walk(v[key], depth + 1);
        if (found) return found;
        trail.pop();
      }
      out.push('}');
    }
    onPath.delete(v);
    return null;
  }

  try {
    const problem = walk(value, 0);
    return problem ? { problem } : { text: out.join('') };
  } catch (e) {
    // a getter or Proxy trap threw, or the value is too big for memory; the trail
    // still leads to the value being read
    return { problem: `${pathOf()} cannot be encoded: ${errorText(e)}` };
  }
}

// ------------------------------------------------------------------------ tools
/** A tool call that did not return a result. `kind` says why (see the subclasses). */
export class ToolError extends Error {
  constructor(message = '', tool = null) {
    super(message);
    this.tool = tool;
  }

  // The host's messages already name the tool: no `ToolDenied: ` prefix (as in Python,
  // where str(e) is the message). Tracebacks and console output still show the kind.
  toString() {
    return this.message;
  }
}
/** The tool is unknown or not allowed in this run. */
export class ToolDenied extends ToolError {}
/** A budget of this run (number of calls, result bytes) is spent. */
export class ToolBudgetExhausted extends ToolError {}
/** The host refused the arguments (size, depth, schema). */
export class ToolInvalidArgs extends ToolError {}
/** The tool ran and failed. */
export class ToolFailed extends ToolError {}
/** The tool did not answer in time. */
export class ToolTimeout extends ToolError {}

export const TOOL_ERRORS = [ToolError, ToolDenied, ToolBudgetExhausted, ToolInvalidArgs, ToolFailed, ToolTimeout];
const KINDS = ['error', 'denied', 'budget_exhausted', 'invalid_args', 'failed', 'timeout'];
TOOL_ERRORS.forEach((cls, i) => {
  // On the prototype, like the built-in errors' `name`: `e.name` is the kind of the
  // exception the host reports, and `e.kind` is the call-error case.
  Object.defineProperty(cls.prototype, 'name', { value: cls.name, writable: true, configurable: true });
  Object.defineProperty(cls.prototype, 'kind', { value: KINDS[i], writable: true, configurable: true });
});

// call-error tags as the generated bindings spell them
const CALL_ERRORS = {
  denied: ToolDenied,
  'budget-exhausted': ToolBudgetExhausted,
  'invalid-args': ToolInvalidArgs,
  failed: ToolFailed,
  timeout: ToolTimeout,
};

/**
 * The JSON text of the arguments of `tools.<name>(value, extra)`, or a TypeError saying
 * what is wrong with them. The tool function sends the usual call, one plain object of
 * plain JSON, to plainArgsText itself and comes here for everything else.
 */
export function toolArgs(name, value, extra) {
  if (extra !== undefined) {
    throw new TypeError(`tools.${name}() takes one plain object of arguments, got more than one (${
      typeName(value)}, ${typeName(extra)}, ...)`);
  }
  if (value === undefined) return '{}';
  if (!isPlainObject(value)) {
    throw new TypeError(`tools.${name}() takes one plain object of arguments, got ${typeName(value)}`);
  }
  // writeJson, not toJson: the tool function has already tried plainArgsText on a plain
  // object, so toJson would check it a second time.
  const { text, problem } = writeJson(value);
  if (problem) throw new TypeError(`tools.${name}() arguments are not JSON: ${problem}`);
  return text;
}

// Tool names a Proxy must not answer with a tool: `then` would make `tools` a thenable
// (await / return tools would call the host), `toJSON` would be called by JSON.stringify,
// and the Object.prototype methods keep String(tools) and friends working.
const NOT_TOOLS = new Set(['then', 'toJSON']);
const OBJECT_METHODS = new Set(Object.getOwnPropertyNames(objectProto));

/**
 * The function behind `tools.<name>`: an async function in all but name. The host import
 * is synchronous, so the call happens now (in program order) and the promise is already
 * settled; but while the argument of `Promise.all(...)` (allSettled, race, any) is
 * evaluated, calls are started instead, to run at the same time (see makeCalls).
 *
 * Shaped by what costs in this interpreter (no JIT; docs/performance.md has the
 * figures), where every call and return is a noticeable part of a tool call and every
 * return walks the frame's scopes:
 * - one function makes the whole call, and the usual arguments go straight to
 *   plainArgsText, without the frame of toolArgs: a frame fewer per call;
 * - two parameters, not `...args`: a rest array is an allocation per call. The
 *   cost: a second argument that is `undefined` goes unnoticed, as it would by a
 *   function with one parameter;
 * - the promise functions are bound once, so code that replaces `Promise` cannot change
 *   what a tool returns.
 */
function toolFunction(host, name, calls) {
  return { [name](value, extra) {
    let argsJson;
    if (extra === undefined && typeof value === 'object' && value !== null && !isArray(value)) {
      argsJson = plainArgsText(value);
    }
    if (argsJson === undefined) {
      try {
        argsJson = toolArgs(name, value, extra);
      } catch (e) {
        return promiseReject(e);
      }
    }
    if (calls.deferring !== 0) return calls.start(name, argsJson);
    let result;
    try {
      result = host.call(name, argsJson);
    } catch (e) {
      return promiseReject(toolError(e, name));
    }
    try {
      return promiseResolve(parse(result));
    } catch (e) { // the host promises JSON; say so if it ever breaks that
      return promiseReject(new ToolFailed(`the host returned invalid JSON: ${e.message}`, name));
    }
  } }[name];
}

/** The ToolError for a thrown host error `e` (a ComponentError whose `payload` is the
 * call-error variant, {tag: 'denied', val: message}), or `e` itself. */
function toolError(e, name) {
  const payload = e !== null && typeof e === 'object' ? e.payload : undefined;
  return payload && typeof payload.tag === 'string'
    ? new (CALL_ERRORS[payload.tag] || ToolFailed)(String(payload.val), name)
    : e;
}

/** Settles a call's promise with the host's result text. */
function answer(text, name, resolve, reject) {
  let value;
  try {
    value = parse(text);
  } catch (e) { // the host promises JSON; say so if it ever breaks that
    return reject(new ToolFailed(`the host returned invalid JSON: ${e.message}`, name));
  }
  return resolve(value);
}

/**
 * A run's tool calls that overlap. Code that hands calls to `Promise.all` (allSettled,
 * race, any) has the combinator's argument evaluated through `defer` (deferToolCalls
 * rewrites the code so): the calls made meanwhile, `tools.get({url})` in a `.map(...)`
 * included, are started on the host (`startCall`) and run at the same time, and their
 * promises settle when the run's driver collects the answers (`wait`, over `awaitAny`).
 * Every other call is synchronous, as before. `wake` rouses the driver, which sleeps
 * while only a timer is pending: a call can start from code that an event of the engine's
 * own resumed (a blob read), and would otherwise wait for that timer.
 */
function makeCalls(host, wake) {
  const inFlight = new Map(); // host call id -> [name, resolve, reject]
  const calls = {
    deferring: 0,
    inFlight,
    /** Evaluates `thunk`, starting the tool calls it makes. */
    defer(thunk) {
      calls.deferring++;
      try {
        return thunk();
      } finally {
        calls.deferring--;
      }
    },
    start(name, argsJson) {
      let id;
      try {
        id = host.startCall(name, argsJson);
      } catch (e) { // refused before it started, as `call` would have refused it
        return promiseReject(toolError(e, name));
      }
      const { promise, resolve, reject } = withResolvers();
      inFlight.set(id, [name, resolve, reject]);
      wake();
      return promise;
    },
    /** Waits (at most `timeoutMs`; undefined: until one ends) and settles what ended. */
    wait(timeoutMs) {
      const finished = host.awaitAny(timeoutMs);
      for (let i = 0; i < finished.length; i++) {
        const { id, answer: result } = finished[i];
        const call = inFlight.get(id);
        if (call === undefined) continue;
        inFlight.delete(id);
        if (result.tag === 'ok') answer(result.val, call[0], call[1], call[2]);
        else call[2](toolError({ payload: result.val }, call[0]));
      }
      // A host that holds none of them (it answered at once, with nothing): forget them,
      // or the driver would wait on them for ever.
      if (!finished.length && timeoutMs === undefined) inFlight.clear();
    },
  };
  return calls;
}

/** The hidden global through which rewritten code evaluates a combinator's argument. */
export const DEFER = '__wasmbox_defer__';
const COMBINATORS = new Set(['all', 'allSettled', 'race', 'any']);

/**
 * Past the ASCII white space of `code` from `i`: the index of the next unit, which may
 * still be white space beyond ASCII (the callers take any such unit as a maybe).
 */
function skipAsciiSpace(code, i) {
  for (;;) {
    const c = code.charCodeAt(i);
    if (c === 32 || (c >= 9 && c <= 13)) i++;
    else return i;
  }
}

/**
 * False only when no `Promise . all|allSettled|race|any` is in the text, with white space
 * or comments between (a comment, or a unit beyond ASCII, answers true): then
 * deferToolCalls' tokens hold no combinator call. A few native searches, where a regular
 * expression's first use in a fresh instance cost more than the tokens.
 */
function mayCallCombinator(code) {
  for (let at = code.indexOf('Promise'); at !== -1; at = code.indexOf('Promise', at + 7)) {
    let i = skipAsciiSpace(code, at + 7);
    let c = code.charCodeAt(i);
    if (c === 47 || c >= 0x80) return true; // a comment, or maybe white space
    if (c !== 46) continue; // .
    i = skipAsciiSpace(code, i + 1);
    c = code.charCodeAt(i);
    if (c === 47 || c >= 0x80 || code.startsWith('all', i) || code.startsWith('race', i) || code.startsWith('any', i)) {
      return true;
    }
  }
  return false;
}

/**
 * `code` (a function body) with the argument of each `Promise.all(...)`, `allSettled`,
 * `race` and `any` evaluated through DEFER: `Promise.all(__wasmbox_defer__(() => (X)))`,
 * so the tool calls X makes start together. Lines keep their numbers. An argument that
 * an arrow function cannot hold as it is (`await`, `yield`, a spread, several
 * arguments) is left alone: its calls run one after another, as before.
 */
export function deferToolCalls(code) {
  // Tokenizing costs thousands of fuel a character in this interpreter, a native search
  // of the text far less: code with no combinator call in its text has none in its tokens
  // (docs/performance.md, "One frame fewer, no decoder for `null`, and code that names
  // Promise or import").
  if (!mayCallCombinator(code)) return code;
  return deferToolCallsScan(code);
}

/** deferToolCalls without its search of the text (exported for the tests). */
export function deferToolCallsScan(code) {
  const t = tokenize(code);
  const edits = []; // [position, text], in order
  for (let i = 0; i + 4 < t.length; i++) {
    if (t[i].v !== 'Promise' || t[i].k !== 'name' || t[i + 1].v !== '.' || !COMBINATORS.has(t[i + 2].v)
      || t[i + 3].v !== '(' || (i > 0 && (t[i - 1].v === '.' || t[i - 1].v === '?.'))) continue;
    let depth = 0;
    let j = i + 3;
    let plain = t[i + 4].v !== '...' && t[i + 4].v !== ')';
    for (; j < t.length; j++) {
      const { k, v } = t[j];
      if (k === 'p') {
        if (v === '(' || v === '[' || v === '{' || v === '${') depth++;
        else if ((v === ')' || v === ']' || v === '}' || v === '}`') && --depth === 0) break;
        else if (v === ',' && depth === 1) plain = false;
      } else if (k === 'name' && (v === 'await' || v === 'yield')) plain = false;
    }
    if (j < t.length && plain) edits.push([t[i + 3].end, `${DEFER}(() => (`], [t[j].end - 1, '))']);
  }
  if (!edits.length) return code;
  edits.sort((a, b) => a[0] - b[0]);
  let out = '';
  let at = 0;
  for (const [position, text] of edits) {
    out += code.slice(at, position) + text;
    at = position;
  }
  return out + code.slice(at);
}

/**
 * The `tools` object: any public name is a tool; the host decides which exist (and
 * denies the rest). Read-only: nothing can be set, defined or deleted on it.
 *
 * Two layers, so that reading a tool already made runs no JavaScript. `tools` is a Proxy
 * with no `get` trap, so a read goes straight to its target, where each tool's function
 * is an own property once made. A name the target does not have reaches the target's
 * prototype, a second Proxy whose `get` trap makes the tool and puts it on the target.
 * A `get` trap on `tools` itself would be one JS call per `tools.x`, on every tool call.
 */
function makeTools(host, calls) {
  const isToolName = (name) => typeof name === 'string' && !name.startsWith('_')
    && !NOT_TOOLS.has(name) && !OBJECT_METHODS.has(name);
  const made = Object.create(new Proxy(Object.create(null), {
    get(_, name) {
      if (isToolName(name)) {
        const fn = toolFunction(host, name, calls);
        // An assignment, not defineProperty, which reads its descriptor field by field
        // (docs/performance.md, "A tool call's arguments (session 31)"): it makes a plain data
        // property (configurable, as `tools`'s getOwnPropertyDescriptor trap reports every
        // tool; writable, which only this code could use: `made` and this prototype are
        // out of the code's reach, and `tools` refuses every write). Nothing on the way
        // can intercept it: this Proxy has no `set` trap and its target no prototype.
        made[name] = fn;
        return fn;
      }
      return typeof name === 'string' && OBJECT_METHODS.has(name) ? objectProto[name] : undefined;
    },
  }));
  return new Proxy(made, {
    has: (_, name) => isToolName(name),
    ownKeys: () => listTools(host).map((t) => t.name).filter(isToolName),
    // `made[name]` makes the tool if it is not yet: the same descriptor either way.
    getOwnPropertyDescriptor: (_, name) => (isToolName(name)
      ? { value: made[name], writable: false, enumerable: true, configurable: true }
      : undefined),
    // the prototype Proxy is how tools are made, not something to hand out
    getPrototypeOf: () => null,
    set: () => false,
    defineProperty: () => false,
    deleteProperty: () => false,
    setPrototypeOf: () => false,
    preventExtensions: () => false,
  });
}

/** The tools this run may call: [{name, description, args_schema}], sorted by name. */
export function listTools(host) {
  return host.listTools().map((info) => {
    let schema;
    try {
      schema = parse(info.argsSchema);
    } catch {
      schema = info.argsSchema;
    }
    return { name: info.name, description: info.description, args_schema: schema };
  });
}

// ------------------------------------------------------------- errors and stacks
/** A string that can cross the component boundary (no lone surrogates). */
function clean(s) {
  s = String(s);
  return isWellFormed(s) ? s : (typeof s.toWellFormed === 'function' ? s.toWellFormed() : s);
}

function safe(f, fallback) {
  try {
    return f();
  } catch {
    return fallback;
  }
}

// An error's text is the guest code's choice: a 50 MB message must not be copied into a
// traceback or across the boundary. The host caps kind, message and traceback by bytes
// (MAX_ERROR_*_BYTES in host/src/outcome.rs); the guest cuts them first, by UTF-16 code
// units, saying how many it left out, so the host's byte cap rarely has anything to do.
export const MAX_KIND_CHARS = 256;
export const MAX_MESSAGE_CHARS = 8 << 10;
export const MAX_TRACEBACK_CHARS = 32 << 10;

/** The start of `s`, at most `limit` code units with the marker. */
export function cutEnd(s, limit) {
  if (s.length <= limit) return s;
  const keep = Math.max(0, limit - 40);
  return `${s.slice(0, keep)} [… ${s.length - keep} characters cut]`;
}

/** The end of `s` (a traceback's innermost part), at most `limit` code units. */
export function cutStart(s, limit) {
  if (s.length <= limit) return s;
  const keep = Math.max(0, limit - 40);
  return `[… ${s.length - keep} characters cut]\n${s.slice(s.length - keep)}`;
}

function errorKind(e) {
  return safe(() => {
    // `throw "x"`, `throw {code: 1}`: JS allows any value; without a name it is an Error
    if (e !== null && typeof e === 'object' && typeof e.name === 'string' && e.name) {
      return cutEnd(e.name, MAX_KIND_CHARS);
    }
    return 'Error';
  }, 'Error');
}

function errorMessage(e) {
  return safe(() => {
    let message;
    if (e !== null && typeof e === 'object' && 'message' in e) message = String(e.message);
    else if (typeof e === 'string') message = e;
    else message = inspect(e, 1);
    return cutEnd(message, MAX_MESSAGE_CHARS);
  }, '<unprintable>');
}

// Stack frames of user code. SpiderMonkey names code compiled by `new AsyncFunction` (or
// `new Function`, for code without `await`) after the place that compiled it ("core.js
// line 412 > AsyncFunction:3:5") and puts two header lines before the body ("async
// function anonymous(\n) {\n"). SITE is measured once with the same compile() call, so
// it is right whatever path the build used.
const AsyncFunction = (async function () {}).constructor;
const HEADER_LINES = 2;
// The steps whose compiled function a session keeps for a step with the same text, and
// the longest text kept: the guest's memory cap bounds the rest.
const MAX_REUSED_STEPS = 32;
const MAX_REUSED_CHARS = 64 * 1024;
// The header lines of the function being run: one more in a session's step (KEEP_PARAM).
let headerLines = HEADER_LINES;
function compile(Ctor, code, param) { return param === undefined ? new Ctor(code) : new Ctor(param, code); }
const SITE = safe(() => {
  const stack = compile(Function, 'return new Error().stack')();
  const m = /@(.* line \d+ > )Function:\d+:\d+/.exec(stack);
  return m ? m[1] : null;
}, null);

/**
 * The user-code part of `e.stack`, as node-style "    at f (<code>:3:5)" lines.
 *
 * The runner's own frames and the engine's self-hosted ones are dropped (as the Python
 * guest drops its own): a traceback starts and ends in the code the model wrote.
 */
export function userFrames(stack) {
  if (typeof stack !== 'string' || !SITE) return [];
  const site = '@' + SITE;
  const lines = [];
  for (const frame of stack.split('\n')) {
    const at = frame.indexOf(site);
    if (at < 0) continue;
    const kind = frame.startsWith('AsyncFunction', at + site.length) ? 'AsyncFunction'
      : frame.startsWith('Function', at + site.length) ? 'Function' : null;
    if (kind === null) continue;
    const mark = site + kind;
    let name = frame.slice(0, at);
    const isAsync = name.startsWith('async*');
    if (isAsync) name = name.slice(6);
    const rest = frame.slice(at + mark.length);
    // ":L:C" for the code itself; " line L > eval:1:1" for code it eval'd
    let m = /^:(\d+):(\d+)$/.exec(rest);
    let where;
    if (m) {
      where = `<code>:${m[1] - headerLines}:${m[2]}`;
    } else if ((m = /^ line (\d+) > (.*)$/.exec(rest))) {
      where = `<code>:${m[1] - headerLines} > ${m[2]}`;
    } else {
      continue;
    }
    const shown = name && name !== 'anonymous' ? `${name} (${where})` : where;
    lines.push(`    at ${isAsync ? 'async ' : ''}${shown}`);
  }
  return lines;
}

/** "Kind: message" and the user frames; causes and aggregated errors follow. */
export function formatError(e, depth = 0) {
  const head = `${errorKind(e)}: ${errorMessage(e)}`;
  if (e === null || typeof e !== 'object') return head;
  const parts = [head, ...safe(() => userFrames(e.stack), [])];
  if (depth < 5) {
    safe(() => {
      if (isArray(e.errors)) {
        e.errors.slice(0, 10).forEach((sub, i) => {
          parts.push(`  [${i}] ` + formatError(sub, depth + 1).split('\n').join('\n  '));
        });
      }
      if (e.cause !== undefined) parts.push('Caused by: ' + formatError(e.cause, depth + 1));
    });
  }
  return parts.join('\n');
}

function errorText(e) {
  return `${errorKind(e)}: ${errorMessage(e)}`;
}

function guestException(e) {
  return {
    kind: clean(errorKind(e)),
    message: clean(errorMessage(e)),
    traceback: clean(cutStart(safe(() => formatError(e), ''), MAX_TRACEBACK_CHARS)),
  };
}

function syntaxError(e, code) {
  const message = clean(errorMessage(e));
  let traceback = `SyntaxError: ${message}`;
  safe(() => {
    const line = e.lineNumber - headerLines;
    const lines = code.split(/\r\n|[\n\r\u2028\u2029]/);
    if (line >= 1 && line <= lines.length) {
      const col = Math.max(1, e.columnNumber | 0);
      traceback = `<code>:${line}:${col}\n${lines[line - 1]}\n${' '.repeat(col - 1)}^\n` + traceback;
    }
  });
  return { kind: clean(errorKind(e)), message, traceback: clean(cutStart(traceback, MAX_TRACEBACK_CHARS)) };
}

// ------------------------------------------------------------ dynamic import()
// StarlingMonkey resolves `import("./x")` through a filesystem the component does not
// have, and that traps the instance instead of rejecting. The code is scanned for the
// `import` keyword followed by `(` and that keyword is replaced by IMPORT_STANDIN, a
// same-length identifier (line and column numbers stay right) bound to a function that
// rejects. `import` hidden in a string given to eval/new Function still traps: the host
// reports the trap; nothing escapes.
export const IMPORT_STANDIN = '\u026Amport'; // "ɪmport": 6 UTF-16 units, like "import"

/** As mayCallCombinator, for hideDynamicImport: false only when no `import` is before a `(`. */
function mayCallImport(code) {
  for (let at = code.indexOf('import'); at !== -1; at = code.indexOf('import', at + 6)) {
    const c = code.charCodeAt(skipAsciiSpace(code, at + 6));
    if (c === 40 || c === 47 || c >= 0x80) return true; // ( or a comment, or maybe white space
  }
  return false;
}
const REGEX_AFTER_WORD = new Set(['return', 'typeof', 'instanceof', 'in', 'of', 'new', 'delete',
  'void', 'throw', 'case', 'do', 'else', 'yield', 'await']);

/** The code with every dynamic `import(` keyword replaced by IMPORT_STANDIN. */
export function hideDynamicImport(code) {
  // As in deferToolCalls: the scan costs thousands of fuel a character.
  if (!mayCallImport(code)) return code;
  return hideDynamicImportScan(code);
}

/** hideDynamicImport without its search of the text (exported for the tests). */
export function hideDynamicImportScan(code) {
  const n = code.length;
  const hits = [];
  const braces = []; // '{' for a block or object, '`' for a template's ${ }
  let i = 0;
  let prev = ''; // the last significant token: '' (start), 'x' (value), a word, or punctuation

  const skipSpace = (j) => {
    for (;;) {
      while (j < n && /\s/.test(code[j])) j++;
      if (code.startsWith('//', j)) {
        while (j < n && code[j] !== '\n') j++;
      } else if (code.startsWith('/*', j)) {
        const end = code.indexOf('*/', j + 2);
        j = end < 0 ? n : end + 2;
      } else {
        return j;
      }
    }
  };
  const template = () => { // i is just inside a template; stop after '`' or '${'
    while (i < n) {
      const c = code[i];
      if (c === '\\') i += 2;
      else if (c === '`') { i++; prev = 'x'; return; }
      else if (c === '$' && code[i + 1] === '{') { i += 2; braces.push('`'); prev = '{'; return; }
      else i++;
    }
  };

  while (i < n) {
    const j = skipSpace(i);
    if (j !== i) { i = j; continue; }
    const c = code[i];
    if (c === '"' || c === "'") {
      i++;
      while (i < n && code[i] !== c && code[i] !== '\n') i += code[i] === '\\' ? 2 : 1;
      i++;
      prev = 'x';
    } else if (c === '`') {
      i++;
      template();
    } else if (c === '{') {
      braces.push('{');
      i++;
      prev = '{';
    } else if (c === '}') {
      i++;
      if (braces.pop() === '`') template();
      else prev = '}';
    } else if (c === '/') {
      const regexOk = prev === '' || (prev.length === 1 && !')]x'.includes(prev) && !/\w/.test(prev))
        || REGEX_AFTER_WORD.has(prev);
      i++;
      if (regexOk) {
        i = regexEnd(code, i);
        prev = 'x';
      } else {
        prev = '/';
      }
    } else if (/[A-Za-z_$\u0080-\uffff\\]/.test(c)) {
      const start = i;
      while (i < n && /[\w$\u0080-\uffff\\]/.test(code[i])) i++;
      const word = code.slice(start, i);
      if (word === 'import' && prev !== '.') {
        const k = skipSpace(i);
        if (code[k] === '(' && !isMethodDefinition(code, k)) hits.push(start);
      }
      prev = REGEX_AFTER_WORD.has(word) ? word : 'x';
    } else if (/[0-9]/.test(c)) {
      while (i < n && /[\w.]/.test(code[i])) i += /[eE]/.test(code[i]) && /[+-]/.test(code[i + 1]) ? 2 : 1;
      prev = 'x';
    } else {
      i++;
      prev = c;
    }
  }
  if (!hits.length) return code;
  let result = '';
  let last = 0;
  for (const at of hits) {
    result += code.slice(last, at) + IMPORT_STANDIN;
    last = at + 6;
  }
  return result + code.slice(last);
}

/** Where a regular expression literal whose body starts at `i` ends (past its flags). */
function regexEnd(code, i) {
  const n = code.length;
  let cls = false;
  while (i < n) {
    const d = code.charCodeAt(i);
    if (d === 10) break; // \n
    if (d === 92) { i += 2; continue; } // backslash
    i++;
    if (d === 91) cls = true; // [
    else if (d === 93) cls = false; // ]
    else if (d === 47 && !cls) break; // /
  }
  for (;;) { // flags: ASCII letters
    const d = code.charCodeAt(i) | 0x20;
    if (i < n && d >= 97 && d <= 122) i++;
    else return i;
  }
}

// `import(x) { ... }` is a method named import (in a class or object literal), not a call.
function isMethodDefinition(code, open) {
  let depth = 0;
  for (let j = open; j < code.length; j++) {
    if (code[j] === '(') depth++;
    else if (code[j] === ')' && --depth === 0) return /^\s*\{/.test(code.slice(j + 1, j + 64));
  }
  return false;
}

// ------------------------------------------------------------ built-in modules
// Code written for Node loads `fs` with `require('fs')` or `await import('node:fs')`.
// The guest has no module loader, but it has the exports of a few of Node's built-in
// modules (`modules`: a name without `node:` -> its exports; runner.js gives `fs` and
// `fs/promises`): `require` answers them, and so does the dynamic import() stand-in.

/** The exports of the built-in module `id` (`fs`, `node:fs`, ...), or undefined. */
function builtinModule(modules, id) {
  const name = typeof id === 'string' && id.startsWith('node:') ? id.slice(5) : id;
  return typeof name === 'string' && Object.hasOwn(modules, name) ? modules[name] : undefined;
}

/** Node's `require` for `modules`; anything else throws Node's MODULE_NOT_FOUND error. */
export function makeRequire(modules) {
  const names = Object.keys(modules).join(', ');
  return function require(id) {
    if (typeof id !== 'string') {
      const err = new TypeError(`The "id" argument must be of type string. Received ${typeName(id)}`);
      err.code = 'ERR_INVALID_ARG_TYPE';
      throw err;
    }
    const exports = builtinModule(modules, id);
    if (exports !== undefined) return exports;
    // Node's first line; the second says what there is instead of Node's require stack.
    const err = new Error(`Cannot find module '${id}'\nthe sandbox's modules are ${names || 'none'} `
      + '(also with node:); reach the outside world through `tools`');
    err.code = 'MODULE_NOT_FOUND';
    err.requireStack = [];
    throw err;
  };
}

/** What `import(specifier)` stands for: a module namespace for `modules`, else a rejection. */
export function makeImportStandin(modules) {
  const namespaces = {};
  for (const name of Object.keys(modules)) {
    // Node's namespace of a built-in module: its exports by name, and `default`.
    const ns = Object.assign(Object.create(null), modules[name], { default: modules[name] });
    defineProperty(ns, Symbol.toStringTag, { value: 'Module' });
    namespaces[name] = Object.freeze(ns);
  }
  const names = Object.keys(modules).join(', ');
  return function importStandin(specifier) {
    const ns = builtinModule(namespaces, specifier);
    if (ns !== undefined) return promiseResolve(ns);
    return promiseReject(new TypeError(
      `import(${safe(() => stringify(String(specifier)), '?')}) is not available: `
      + `the sandbox's modules are ${names || 'none'}; reach the outside world through \`tools\``));
  };
}

// ------------------------------------------------------------- session steps
// A run is one call on a fresh instance. The host calls an instance again only in a
// session (host/src/session), which it opens with an empty call, so every call after the
// first is a step of a session. A step's code is the body of an async function, like a
// run's, so its top-level `let`, `const`, `var`, `function` and `class` would die with it:
// topLevelNames finds them, and the step starts with one line, `ɪkeep([[name, get, set],
// ...])`, whose closures see the step's own bindings. When the step ends, every binding
// that was initialised becomes an accessor on the global object (keepBindings), so later
// steps, and the functions of this one, read and write the same binding: `count = 10` in a
// later step changes what a function of this step sees, and a `const` stays constant.
export const KEEP_PARAM = '\u026Akeep'; // "ɪkeep": not a name code would write

// A name token the tokenizer finds that topLevelNames keeps holds one of these words:
// code with none of them needs no tokens.
const DECLARING_WORDS = /let|const|var|function|class/;
const OPENERS = new Set(['(', '[', '{', '${']);
const CLOSERS = new Set([')', ']', '}', '}`']);
// A newline before one of these does not end an expression.
const CONTINUES = new Set(['in', 'of', 'instanceof']);
const VALUE_WORDS = new Set(['this', 'null', 'true', 'false', 'super']);

// The tokenizer reads UTF-16 code units: in the guest's interpreter a regex test, a
// one-character string or a call to a helper closure per token cost several times what
// comparing char codes in one loop costs (docs/performance.md, "The JS tokenizer by char
// codes").
const LF = 10, CR = 13, LS = 0x2028, PS = 0x2029;

// Whether the unit `c` continues a name: [\w$\\] or any unit from U+0080 on that is not
// a space or line break.
function isNameUnit(c) {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 95 || c === 36
    || c === 92 || (c >= 0x80 && !/\s/.test(String.fromCharCode(c)));
}

// The length of the punctuator at `i`, whose first unit is `c`: the longest of
// `>>>= ... === !== **= <<= >>= >>> &&= ||= ??= => == != <= >= && || ?? ?. ++ -- += -= *=
// /= %= &= |= ^= ** << >>`, else 1. (charCodeAt past the end is NaN, which matches nothing.)
function punctuatorLength(code, i, c) {
  const d = code.charCodeAt(i + 1);
  switch (c) {
    case 62: // >
      if (d === 62) {
        const e = code.charCodeAt(i + 2);
        if (e === 62) return code.charCodeAt(i + 3) === 61 ? 4 : 3;
        return e === 61 ? 3 : 2;
      }
      return d === 61 ? 2 : 1;
    case 46: // .
      return d === 46 && code.charCodeAt(i + 2) === 46 ? 3 : 1;
    case 61: // =
      if (d === 61) return code.charCodeAt(i + 2) === 61 ? 3 : 2;
      return d === 62 ? 2 : 1;
    case 33: // !
      if (d === 61) return code.charCodeAt(i + 2) === 61 ? 3 : 2;
      return 1;
    case 63: // ?
      if (d === 63) return code.charCodeAt(i + 2) === 61 ? 3 : 2;
      return d === 46 ? 2 : 1;
    case 60: case 42: case 38: case 124: // < * & |: doubled, doubled with =, or with =
      if (d === c) return code.charCodeAt(i + 2) === 61 ? 3 : 2;
      return d === 61 ? 2 : 1;
    case 43: case 45: // + -
      return d === c || d === 61 ? 2 : 1;
    case 47: case 37: case 94: // / % ^
      return d === 61 ? 2 : 1;
    default:
      return 1;
  }
}

/**
 * The tokens of `code`: {k: 'name' | 'num' | 'str' | 'tmpl' | 'regex' | 'p', v, nl, end},
 * `nl` when a line break precedes the token, `end` where it ends (for a template's closing
 * `}`, where it starts). A template's `${` and the `}` that closes it are tokens of their
 * own (`${`, `}\``), so brackets balance. Good enough to find declarations, not a parser:
 * what it gets wrong only loses a declaration across steps.
 *
 * With `collapse`, a group (`(`, `[`, `{` or `${` to its closer) that opens at the top level
 * gives only its opener and closer, unless it follows `let`, `const`, `var` or `,` (a
 * destructuring pattern may start there): topLevelNames reads nothing else inside one,
 * and in the guest's interpreter a token costs several times its characters' reading
 * (docs/performance.md, "A JS step of one declaration").
 */
export function tokenize(code, collapse = false) {
  const tokens = [];
  const n = code.length;
  const braces = []; // '{' for a block or object, '`' for a template's ${ }
  let i = 0;
  let nl = false;
  let inTemplate = false; // i is inside a template's text, which starts at `start`
  let start = 0;
  // Openers less closers of the tokens kept, as topLevelNames counts them; and, inside a
  // collapsed group, its own depth (0 outside one: tokens are kept).
  let depth = 0;
  let hidden = 0;
  // The openers of the groups kept, innermost last, while collapsing: a closer of another
  // kind (`[` closed by `}`) ends the collapsing, as topLevelNames' pattern reading then
  // goes on past where the counting ends the group.
  const kept = [];
  // The last token, kept or not: its kind ('' before the first), where it starts and
  // ends, and whether it is `)`, `]` or `}\``: a `/` after it divides.
  let prevK = '';
  let prevStart = 0;
  let prevEnd = 0;
  let prevCloses = false;
  while (i < n || inTemplate) {
    if (inTemplate) {
      inTemplate = false;
      for (;;) {
        if (i >= n) {
          if (hidden === 0) tokens.push({ k: 'tmpl', v: code.slice(start, i), nl, end: i });
          prevK = 'tmpl';
          nl = false;
          break;
        }
        const c = code.charCodeAt(i);
        if (c === 92) i += 2; // backslash
        else if (c === 96) { // `
          i++;
          if (hidden === 0) tokens.push({ k: 'tmpl', v: code.slice(start, i), nl, end: i });
          prevK = 'tmpl';
          nl = false;
          break;
        } else if (c === 36 && code.charCodeAt(i + 1) === 123) { // ${
          if (hidden === 0) tokens.push({ k: 'tmpl', v: code.slice(start, i), nl, end: i });
          i += 2;
          braces.push('`');
          if (hidden !== 0) hidden++;
          else {
            tokens.push({ k: 'p', v: '${', nl: false, end: i });
            if (collapse && depth === 0) hidden = 1; // a template's text is no pattern
            else {
              depth++;
              if (collapse) kept.push(36);
            }
          }
          prevK = 'p';
          prevCloses = false;
          nl = false;
          break;
        } else i++;
      }
      continue;
    }
    const c = code.charCodeAt(i);
    if (c === LF || c === CR || c === LS || c === PS) { nl = true; i++; continue; }
    if (c === 32 || c === 9 || c === 11 || c === 12 || (c >= 0x80 && /\s/.test(code[i]))) { i++; continue; }
    start = i;
    let k;
    if (c === 47) { // /
      const d = code.charCodeAt(i + 1);
      if (d === 47) {
        while (i < n && code.charCodeAt(i) !== LF) i++;
        continue;
      }
      if (d === 42) {
        const end = code.indexOf('*/', i + 2);
        const stop = end < 0 ? n : end + 2;
        if (/[\n\r\u2028\u2029]/.test(code.slice(i, stop))) nl = true;
        i = stop;
        continue;
      }
      const regexAllowed = prevK === ''
        || (prevK === 'name' ? REGEX_AFTER_WORD.has(code.slice(prevStart, prevEnd)) : prevK === 'p' && !prevCloses);
      if (regexAllowed) {
        i = regexEnd(code, i + 1);
        if (hidden === 0) tokens.push({ k: 'regex', v: code.slice(start, i), nl, end: i });
        prevK = 'regex';
        nl = false;
        continue;
      }
    }
    if (c === 34 || c === 39) { // " '
      i++;
      for (;;) {
        if (i >= n) break;
        const d = code.charCodeAt(i);
        if (d === c) { i++; break; }
        if (d === LF || d === CR) break; // unterminated: the line break is the next token's
        i += d === 92 ? 2 : 1;
      }
      k = 'str';
    } else if (c === 96) { // `
      i++;
      inTemplate = true;
      continue;
    } else if (c === 125 && braces.length !== 0 && braces[braces.length - 1] === '`') { // } of ${ }
      braces.pop();
      if (hidden === 0) {
        tokens.push({ k: 'p', v: '}`', nl, end: i });
        depth--;
        if (collapse && kept.length !== 0 && kept.pop() !== 36) collapse = false;
      } else if (--hidden === 0) tokens.push({ k: 'p', v: '}`', nl, end: i });
      prevK = 'p';
      prevCloses = true;
      nl = false;
      i++;
      start = i;
      inTemplate = true;
      continue;
    } else if ((c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95 || c === 36 || c === 92 || c >= 0x80) {
      i++;
      for (;;) { // ASCII inline: a call per unit is dear
        const d = code.charCodeAt(i);
        if ((d >= 97 && d <= 122) || (d >= 65 && d <= 90) || (d >= 48 && d <= 57) || d === 95 || d === 36) i++;
        else if (d === 92 || (d >= 0x80 && isNameUnit(d))) i++; // NaN past the end is neither
        else break;
      }
      k = 'name';
    } else if ((c >= 48 && c <= 57) || (c === 46 && code.charCodeAt(i + 1) >= 48 && code.charCodeAt(i + 1) <= 57)) {
      for (;;) { // (?:[eE][+-]|[\w.])*
        const d = code.charCodeAt(i);
        if ((d === 101 || d === 69) && (code.charCodeAt(i + 1) === 43 || code.charCodeAt(i + 1) === 45)) i += 2;
        else if (d === 46 || (d >= 97 && d <= 122) || (d >= 65 && d <= 90) || (d >= 48 && d <= 57) || d === 95) i++;
        else break;
      }
      k = 'num';
    } else {
      const length = punctuatorLength(code, i, c);
      i += length;
      prevK = 'p';
      prevCloses = c === 41 || c === 93; // ) ]
      if (c === 40 || c === 91 || c === 123) { // ( [ {
        if (c === 123) braces.push('{');
        if (hidden !== 0) hidden++;
        else {
          const last = tokens.length === 0 ? undefined : tokens[tokens.length - 1];
          tokens.push({ k: 'p', v: code[start], nl, end: i });
          if (collapse && depth === 0 && !(last !== undefined && (last.k === 'name'
            ? last.v === 'let' || last.v === 'const' || last.v === 'var' : last.v === ','))) hidden = 1;
          else {
            depth++;
            if (collapse) kept.push(c);
          }
        }
      } else if (c === 41 || c === 93 || c === 125) { // ) ] }
        if (c === 125) braces.pop();
        if (hidden === 0) {
          tokens.push({ k: 'p', v: code[start], nl, end: i });
          depth--;
          // ( is 40 and ), 41; [ and ], 91 and 93; { and }, 123 and 125
          if (collapse && kept.length !== 0 && kept.pop() !== (c === 41 ? 40 : c - 2)) collapse = false;
        } else if (--hidden === 0) tokens.push({ k: 'p', v: code[start], nl, end: i });
      } else if (hidden === 0) {
        tokens.push({ k: 'p', v: length === 1 ? code[start] : code.slice(start, i), nl, end: i });
      }
      nl = false;
      continue;
    }
    if (hidden === 0) tokens.push({ k, v: code.slice(start, i), nl, end: i });
    prevK = k;
    prevStart = start;
    prevEnd = i;
    nl = false;
  }
  return tokens;
}

function endsValue(t) {
  if (!t) return false;
  if (t.k === 'name') return !REGEX_AFTER_WORD.has(t.v) || VALUE_WORDS.has(t.v);
  return t.k !== 'p' || t.v === ')' || t.v === ']' || t.v === '}' || t.v === '}`' || t.v === '++' || t.v === '--';
}

/**
 * The names the top level of `code` (a function body) declares with `let`, `const`, `var`,
 * `function` or `class`, destructuring patterns included, in order and without repeats.
 */
export function topLevelNames(code, t = tokenize(code, true)) {
  const names = [];
  const add = (tok) => {
    if (tok && tok.k === 'name' && !tok.v.includes('\\') && !names.includes(tok.v)) names.push(tok.v);
  };
  const is = (j, v) => t[j] !== undefined && t[j].k === 'p' && t[j].v === v;
  // From an opener at j, the index just past its closer.
  const skipGroup = (j) => {
    let depth = 0;
    for (; j < t.length; j++) {
      if (t[j].k !== 'p') continue;
      if (OPENERS.has(t[j].v)) depth++;
      else if (CLOSERS.has(t[j].v) && --depth === 0) return j + 1;
    }
    return j;
  };
  // An initializer or default from j: up to a `,` or `;` at its own depth, a closer of
  // the enclosing group, or a line break between two operands (where ASI ends it).
  const skipExpression = (j, inPattern) => {
    for (; j < t.length; j++) {
      const tok = t[j];
      if (tok.k === 'p') {
        if (tok.v === ',' || tok.v === ';' || CLOSERS.has(tok.v)) return j;
        if (OPENERS.has(tok.v)) { j = skipGroup(j) - 1; continue; }
      } else if (!inPattern && tok.nl && endsValue(t[j - 1]) && !(tok.k === 'name' && CONTINUES.has(tok.v))) {
        return j;
      }
    }
    return j;
  };
  // A binding at j (a name or a pattern); returns the next index.
  const binding = (j) => {
    if (is(j, '[') || is(j, '{')) return pattern(j);
    add(t[j]);
    return j + 1;
  };
  // A binding inside a pattern, then its default.
  const target = (j) => {
    j = binding(j);
    return is(j, '=') ? skipExpression(j + 1, true) : j;
  };
  const pattern = (j) => {
    const object = is(j, '{');
    j++;
    while (j < t.length && !is(j, object ? '}' : ']')) {
      if (is(j, ',')) { j++; continue; }
      if (is(j, '...')) { j = target(j + 1); continue; }
      if (!object) { j = target(j); continue; }
      // a key: a name, a string or number, or [computed]; then `: target` or shorthand
      const key = j;
      j = is(j, '[') ? skipGroup(j) : j + 1;
      if (is(j, ':')) j = target(j + 1);
      else {
        add(t[key]);
        if (is(j, '=')) j = skipExpression(j + 1, true);
      }
      if (!is(j, ',') && !is(j, '}')) j = skipExpression(j, true); // something unexpected: move on
    }
    return j + 1;
  };
  let depth = 0;
  for (let j = 0; j < t.length; j++) {
    const tok = t[j];
    if (tok.k === 'p') {
      if (OPENERS.has(tok.v)) depth++;
      else if (CLOSERS.has(tok.v)) depth--;
      continue;
    }
    if (depth !== 0 || tok.k !== 'name') continue;
    const prev = t[j - 1];
    const starts = !prev || is(j - 1, ';') || is(j - 1, '}') || (tok.nl && endsValue(prev));
    if (!starts) continue;
    const next = t[j + 1];
    if ((tok.v === 'let' || tok.v === 'const' || tok.v === 'var')
      && next && (next.k === 'name' || is(j + 1, '[') || is(j + 1, '{'))
      && !(tok.v === 'let' && next.k === 'name' && CONTINUES.has(next.v))) {
      let k = j + 1;
      for (;;) {
        k = binding(k);
        if (!is(k, '=')) {
          if (is(k, ',')) { k++; continue; }
          break;
        }
        k = skipExpression(k + 1, false);
        if (!is(k, ',')) break;
        k++;
      }
      j = k - 1;
    } else if (tok.v === 'function' || (tok.v === 'async' && next && next.v === 'function' && !next.nl)) {
      let k = tok.v === 'async' ? j + 2 : j + 1;
      if (is(k, '*')) k++;
      add(t[k]);
    } else if (tok.v === 'class' && next && next.k === 'name' && next.v !== 'extends') {
      add(next);
    }
  }
  return names;
}

// A step of one statement that declares one name, `let x = f(a, {b: 1})`, `const s = 'x'`,
// `function f(n) { ... }` or `class K { ... }`, the commonest kind, is recognised by one
// regular expression, which the engine runs natively, at a small part of what tokenizing
// costs in its interpreter (docs/performance.md, "A JS step of one declaration"). It
// takes only what topLevelNames reads the same way: no top-level `,`, `;` (but a last one)
// or line break after the initializer's start, no comment, no regex literal, no string
// with an escape, no template with a substitution, no `\`, groups nested at most
// SIMPLE_DEPTH deep, and a `/` only after a name, number, `)` or `]` (a division, as the
// tokenizer reads it). Anything else goes to the tokenizer.
const SIMPLE_DEPTH = 6;
const SIMPLE_STEP = (() => {
  const space = '[^\\S\\n\\r\\u2028\\u2029]';
  const name = '([A-Za-z_$][\\w$]*)';
  const regexWord = `(?<![\\w$])(?:${[...REGEX_AFTER_WORD].join('|')})`;
  const division = `(?<=(?:[)\\]]|[\\w$](?<!${regexWord}))${space}*)\\/(?![/*])`;
  const strings = "'[^'\\\\\\n\\r]*'|\"[^\"\\\\\\n\\r]*\"|`[^`\\\\$]*`";
  let group = '';
  for (let level = SIMPLE_DEPTH; level >= 1; level--) {
    group = `[(\\[{](?:[^()[\\]{}'"\`\\\\/]|${strings}|${division}${group ? `|${group}` : ''})*[)\\]}]`;
  }
  const initializer = `(?:[^()[\\]{}'"\`\\\\/,;\\n\\r\\u2028\\u2029]|${strings}|${division}|${group})*`;
  return new RegExp('^\\s*(?:'
    + `(?:let|const|var)\\s+${name}\\s*(?:=${initializer})?`
    + `|(?:async${space}+)?function\\s*(?:\\*\\s*)?${name}\\s*${group}\\s*${group}`
    + `|class\\s+${name}(?:\\s+extends\\s+[A-Za-z_$][\\w$.]*)?\\s*${group}`
    + ')\\s*;?\\s*$');
})();

/**
 * The one name a step of one simple declaration declares (see SIMPLE_STEP), as
 * topLevelNames finds it; null when the step is not one of those.
 */
export function simpleStepNames(code) {
  const m = SIMPLE_STEP.exec(code);
  if (m === null) return null;
  const name = m[1] ?? m[2] ?? m[3];
  // `let in ...`, `class extends ...`: topLevelNames' own exceptions
  if (CONTINUES.has(name) || name === 'extends') return null;
  return [name];
}

/**
 * Whether the directive prologue of a function body whose tokens are `t` holds `'use
 * strict'`: the string literal statements it starts with, each ended by `;`, the end, or a
 * line break before a token that cannot continue the expression (ASI). A step that keeps
 * bindings starts with the keep line, which would push its directives out of the prologue:
 * the step then starts with `'use strict';` of its own. Anything unsure is not a directive
 * (the step stays sloppy, as it was), so code is never made strict that was not.
 */
export function hasUseStrict(t) {
  for (let j = 0; j < t.length && t[j].k === 'str';) {
    const next = t[j + 1];
    const semicolon = next !== undefined && next.k === 'p' && next.v === ';';
    const ends = next === undefined || semicolon || (next.nl && (next.k === 'str' || next.k === 'num'
      || (next.k === 'name' && !CONTINUES.has(next.v)) || (next.k === 'p' && next.v === '{')));
    if (!ends) return false;
    // Only the exact text is the directive: no escapes, no line continuation.
    if (t[j].v === "'use strict'" || t[j].v === '"use strict"') return true;
    j += semicolon ? 2 : 1;
  }
  return false;
}

/** The line a step starts with: hands its top-level bindings' accessors to KEEP_PARAM. */
export function keepLine(names) {
  // A name is an identifier, with no `"` or `\\` to escape. A loop of concatenations:
  // a callback per name and a join cost the guest's interpreter more.
  let line = `${KEEP_PARAM}([`;
  for (let i = 0; i < names.length; i++) {
    const name = names[i];
    line += `${i === 0 ? '' : ','}["${name}",()=>${name},(\u026Av)=>{${name}=\u026Av}]`;
  }
  return `${line}]);\n`;
}

/** Makes each binding that was initialised an accessor of `global`. */
function keepBindings(global, bindings) {
  for (let i = 0; i < bindings.length; i++) {
    const [name, get, set] = bindings[i];
    try {
      get(); // a binding never initialised (its step threw first) throws: not kept
      defineProperty(global, name, { get, set, enumerable: true, configurable: true });
    } catch {
      // not initialised, or a global that cannot be redefined (`undefined`, `NaN`)
    }
  }
}

// ---------------------------------------------------------------------- console
const MAX_INSPECT_DEPTH = 20;

/**
 * Renders a value for console output: strings as they are, other primitives as node
 * prints them, plain data as compact JSON (the same text JSON.stringify gives), and
 * everything JSON cannot carry inline in a readable form (`Map(1) {1 => 2}`,
 * `[Function: f]`, `undefined`, `[Circular]`). Getters are shown, never called.
 */
export function inspect(v, depth = 0, seen = new Set()) {
  switch (typeof v) {
    case 'string': return depth === 0 ? v : stringify(v);
    case 'number': return Object.is(v, -0) ? '-0' : String(v);
    case 'bigint': return `${v}n`;
    case 'symbol': return v.toString();
    case 'undefined': return 'undefined';
    case 'boolean': return String(v);
    case 'function': {
      const name = safe(() => v.name, '') || '(anonymous)';
      return safe(() => /^class\b/.test(Function.prototype.toString.call(v)), false)
        ? `[class ${name}]` : `[Function: ${name}]`;
    }
  }
  if (v === null) return 'null';
  if (seen.has(v)) return '[Circular]';
  if (v instanceof Error) {
    return depth === 0 ? formatError(v) : `[${errorText(v)}]`;
  }
  if (depth >= MAX_INSPECT_DEPTH) return isArray(v) ? '[Array]' : '[Object]';
  seen.add(v);
  try {
    const sub = (x) => inspect(x, depth + 1, seen);
    const name = typeName(v);
    if (isArray(v)) {
      const items = [];
      for (let i = 0; i < v.length; i++) items.push(i in v ? sub(v[i]) : '<empty>');
      return (name === 'Array' ? '' : name + ' ') + '[' + items.join(',') + ']';
    }
    if (v instanceof Map) {
      const items = [...v].map(([k, x]) => `${sub(k)} => ${sub(x)}`);
      return `Map(${v.size}) {${items.join(', ')}}`;
    }
    if (v instanceof Set) return `Set(${v.size}) {${[...v].map(sub).join(', ')}}`;
    if (v instanceof Date) return isNaN(v) ? 'Invalid Date' : v.toISOString();
    if (v instanceof RegExp) return String(v);
    if (v instanceof Promise) return 'Promise {}';
    if (ArrayBuffer.isView(v) && !(v instanceof DataView)) {
      return `${name}(${v.length}) [${Array.prototype.map.call(v, sub).join(',')}]`;
    }
    if (v instanceof ArrayBuffer) return `ArrayBuffer(${v.byteLength})`;
    if (v instanceof String || v instanceof Number || v instanceof Boolean) {
      return `[${name}: ${sub(v.valueOf())}]`;
    }
    const items = [];
    for (const key of objectKeys(v)) {
      const d = getOwnPropertyDescriptor(v, key);
      const shown = !d ? 'undefined' : 'value' in d ? sub(d.value)
        : d.get && d.set ? '[Getter/Setter]' : d.get ? '[Getter]' : '[Setter]';
      items.push(`${stringify(key)}:${shown}`);
    }
    const prefix = isPlainObject(v) ? '' : name + ' ';
    return prefix + '{' + items.join(',') + '}';
  } finally {
    seen.delete(v);
  }
}

/** node's util.format: %s %d %i %f %j %o %O %c %%, then the rest joined by spaces. */
export function format(args) {
  let first = 0;
  let head = '';
  if (typeof args[0] === 'string' && args.length > 1 && args[0].includes('%')) {
    let a = 1;
    head = args[0].replace(/%([sdifjoOc%])/g, (m, f) => {
      if (f === '%') return '%';
      if (a >= args.length) return m;
      const x = args[a++];
      switch (f) {
        case 's': return typeof x === 'string' ? x : inspect(x, 1);
        case 'd': return typeof x === 'bigint' ? `${x}n` : typeof x === 'symbol' ? 'NaN' : inspect(Number(x));
        case 'i': return typeof x === 'bigint' ? `${x}n` : typeof x === 'symbol' ? 'NaN' : inspect(parseInt(x, 10));
        case 'f': return typeof x === 'symbol' ? 'NaN' : inspect(parseFloat(x));
        case 'j': return safe(() => stringify(x), '[Circular]') ?? 'undefined';
        case 'c': return '';
        default: return inspect(x, 1);
      }
    });
    first = a;
    if (first >= args.length) return head;
    head += ' ';
  } else if (args.length === 0) {
    return '';
  }
  return head + args.slice(first).map((x) => inspect(x)).join(' ');
}

/**
 * console methods that write one line per call through `write.out` / `write.err`.
 *
 * StarlingMonkey's own console sends console.debug to stderr, ignores format strings and
 * stops a line at a NUL character; these replace log/info/debug (stdout) and
 * error/warn/trace/assert (stderr), as node does.
 */
export function makeConsole(write) {
  let indent = '';
  const emit = (sink, args) => {
    let text;
    try {
      text = format(args);
    } catch (e) {
      text = `<unprintable: ${safe(() => errorText(e), 'error')}>`;
    }
    if (indent) text = indent + text.split('\n').join('\n' + indent);
    sink(clean(text).replace(/\0/g, '\uFFFD'));
  };
  const out = (...args) => emit(write.out, args);
  const err = (...args) => emit(write.err, args);
  return {
    log: out,
    info: out,
    debug: out,
    dir: (x) => emit(write.out, [inspect(x, 1)]),
    error: err,
    warn: err,
    trace: (...args) => {
      const frames = userFrames(safe(() => new Error().stack, ''));
      emit(write.err, [['Trace' + (args.length ? ': ' + format(args) : ''), ...frames].join('\n')]);
    },
    assert: (ok, ...args) => {
      if (!ok) emit(write.err, ['Assertion failed' + (args.length ? ': ' + format(args) : '')]);
    },
    group: (...args) => {
      if (args.length) out(...args);
      indent += '  ';
    },
    groupCollapsed: (...args) => {
      if (args.length) out(...args);
      indent += '  ';
    },
    groupEnd: () => {
      indent = indent.slice(2);
    },
  };
}

// ----------------------------------------------------------------------- timers
/**
 * setTimeout/setInterval that keep count of what is pending, so a run can tell "waiting
 * for a timer" from "waiting for something that will never happen".
 *
 * A callback that throws fails the run (as an uncaught exception does in node) instead
 * of reaching StarlingMonkey's event loop, which would trap the instance.
 *
 * One set for the runner, the same functions in every run (see createRunner's globals):
 * `run()` names the run in progress, and a timer reports to the run that set it,
 * `onError(run, e)` and `wake(run)`, or to nobody once that run has ended (clearAll
 * clears a run's timers when it ends).
 */
function makeTimers(real, run, onError, wake) {
  const active = new Map(); // timer id -> when it is next due (Date.now() time)
  const guard = (cb, args, id, once, delay) => {
    const owner = run();
    return () => {
      if (owner !== run()) { // a straggler of an ended run: its callback runs, as it would have
        try {
          cb(...args);
        } catch {
          // that run has ended: there is no one left to fail
        }
        return;
      }
      if (once) active.delete(id.value);
      else active.set(id.value, Date.now() + delay);
      try {
        cb(...args);
      } catch (e) {
        onError(owner, e);
      }
      wake(owner);
    };
  };
  const check = (cb) => {
    if (typeof cb !== 'function') {
      throw new TypeError(`The "callback" argument must be a function, got ${typeName(cb)}`);
    }
  };
  const clear = (id) => {
    if (active.delete(id)) {
      real.clearTimeout(id);
      real.clearInterval(id);
      wake(run());
    }
  };
  return {
    active,
    setTimeout(cb, ms, ...args) {
      check(cb);
      const id = {};
      id.value = real.setTimeout(guard(cb, args, id, true), ms);
      active.set(id.value, Date.now() + (ms > 0 ? +ms : 0));
      return id.value;
    },
    setInterval(cb, ms, ...args) {
      check(cb);
      const id = {};
      const delay = ms > 0 ? +ms : 0;
      id.value = real.setInterval(guard(cb, args, id, false, delay), ms);
      active.set(id.value, Date.now() + delay);
      return id.value;
    },
    /** Milliseconds until the next timer is due (0 when one is). */
    msToNext() {
      let next = Infinity;
      for (const due of active.values()) if (due < next) next = due;
      const ms = Math.ceil(next - Date.now());
      return ms > 0 ? (ms < 0xffffffff ? ms : 0xffffffff) : 0;
    },
    clearTimeout: clear,
    clearInterval: clear,
    clearAll() {
      if (!active.size) return; // the usual case: skip the Set iterator
      for (const id of active.keys()) {
        real.clearTimeout(id);
        real.clearInterval(id);
      }
      active.clear();
    },
  };
}

// ------------------------------------------------------------------------- a run
const ok = (text) => ({ tag: 'ok', val: text });
const fail = (tag, val) => ({ tag: 'err', val: { tag, val } });
export const NEVER_SETTLES = 'the code awaited something that never settles '
  + '(a promise that nothing resolves: no timer or tool call is pending)';
// Event-loop turns with the code's promise pending and none of its timers pending before
// the run is declared stuck. Not 1: native streams (CompressionStream, Blob and Response
// bodies) advance one chunk per turn, invisibly to JS, so a megabyte through gzip takes
// dozens of turns. An idle turn is cheap, so even this many report a stuck run long
// before a deadline would.
export const MAX_IDLE_TURNS = 1000;

// Prebuilt, so reporting cannot fail even when there is no memory left to build one.
/**
 * `result`, handed first to `lower` when the bindings passed one (bindings/export_run.js):
 * it writes the result where the host reads it, before the run's promise settles, so
 * that the export binding needs no async frame of its own to await the run.
 */
function settle(lower, result) {
  if (lower !== undefined) lower(result);
  return result;
}

const FALLBACK = fail('exception', {
  kind: 'InternalError', message: 'the guest failed while reporting an error', traceback: '',
});

const TIMER_NAMES = ['setTimeout', 'setInterval', 'clearTimeout', 'clearInterval'];

/**
 * Makes `run(code, inputJson, lower)`, resolving to a `result<string, run-error>` object,
 * which it first hands to `lower` when given one (see settle).
 *
 * `host`: {call(name, argsJson) -> string (throws {payload: {tag, val}} on Err),
 * listTools() -> [{name, description, argsSchema}]}.
 * `timers`: the engine's real setTimeout/clearTimeout/setInterval/clearInterval.
 * `global`: the object the code's names live on (globalThis).
 * `maxIdleTurns`: see MAX_IDLE_TURNS (node's setTimeout(0) waits 1 ms: tests lower it).
 * `modules`: the built-in modules `import(...)` answers (see makeImportStandin).
 */
export function createRunner({ host, timers: realTimers, global = globalThis, maxIdleTurns = MAX_IDLE_TURNS, modules = {} }) {
  let current = null; // the state of the run in progress
  // A session's steps compiled, by their text (see run), and their texts in the order
  // kept, as a ring: the oldest is dropped by its slot, where `keys().next()` made an
  // iterator per step that the map updated on every later delete until a GC took it.
  const compiledSteps = new Map();
  const keptTexts = new Array(MAX_REUSED_STEPS).fill(undefined);
  let nextKept = 0;
  let calls = 0; // after the first, every call is a session's step ("session steps")
  // The driver's zero-delay tick: one of the engine's timers, which then calls `onTick`,
  // the driver of the run in progress (null between runs). One for the runner, not one
  // per run: a run whose promise settles in its microtasks (most of them) ends with its
  // tick still pending, and StarlingMonkey keeps every pending timer, with its callback
  // and all that callback reaches, until an event-loop turn runs it, which a session's
  // next steps may never take. A tick per run left each step's whole state behind (a
  // session's memory grew ~5 KiB a step; docs/performance.md, "Session steps"). A tick
  // left over from an earlier run serves the next run that asks for one.
  let tickPending = false;
  let onTick = null;
  const tick = () => {
    tickPending = false;
    if (onTick !== null) onTick();
  };
  let idleTurns = 0; // event-loop turns of the run in progress that saw no progress

  /** Rouses the run in progress's driver on a fresh event-loop turn, after the microtasks. */
  function wake() {
    if (tickPending || current === null || current.closed) return;
    tickPending = true;
    realTimers.setTimeout(tick, 0);
  }

  function output(value) {
    const state = current;
    if (!state || state.closed) return; // a straggler after its run ended: ignored
    if (state.hasOutput) {
      // latched: the run fails even if the code catches this
      state.violation = 'output() called more than once';
      throw new Error(state.violation);
    }
    state.hasOutput = true;
    state.output = value;
  }

  function define(name, value) {
    Object.defineProperty(global, name, { value, writable: true, configurable: true, enumerable: false });
  }

  // Once, here, not by every run as the other globals are: code does not write this name,
  // and each global a run defines costs that run fuel (docs/performance.md).
  define(IMPORT_STANDIN, makeImportStandin(modules));

  // The runner's tool calls and timers: the same objects and functions in every run,
  // holding what belongs to the run in progress (`current`) only while it runs.
  const toolCalls = makeCalls(host, wake);
  const timers = makeTimers(realTimers, () => current, (run, e) => {
    if (!run.uncaught) run.uncaught = { error: e };
  }, (run) => {
    if (run !== current) return;
    idleTurns = 0; // a timer fired or was cleared: progress
    wake();
  });

  // The names the code sees, and their values: the same in every run. Globals, not
  // parameters: `const output = ...` in the code must shadow them, not be a redeclaration
  // error. Code may rebind or delete them; the next run gets them back (provide).
  const NAMES = ['tools', 'output', 'listTools', ...TOOL_ERRORS.map((cls) => cls.name), ...TIMER_NAMES];
  const VALUES = [makeTools(host, toolCalls), output, () => listTools(host), ...TOOL_ERRORS,
    ...TIMER_NAMES.map((name) => timers[name])];

  /** Makes `global[name]` `value` again, unless it still is. */
  function provide(name, value) {
    // A read costs a run a fraction of a defineProperty, and a run has a dozen of these
    // names (docs/performance.md, "A JS session's memory and a step's fuel"). It runs no
    // code unless the code made the name an accessor; that getter then runs here once,
    // and is replaced.
    let same = false;
    try {
      same = global[name] === value;
    } catch {
      // that getter threw
    }
    if (!same) define(name, value);
  }

  // Whether every name still holds its value: one read per name, each at a site of its
  // own, which the engine's inline caches serve for less than the loop's computed reads
  // (one site for all; docs/performance.md, "A JS step's fifteen names"). A getter the
  // code left there runs, as in provide; one that throws answers false.
  const allProvided = new Function('g', 'v',
    `try { return ${NAMES.map((name, i) => `g.${name} === v[${i}]`).join(' && ')}; } catch { return false; }`);

  // Now, for the runner runner.js makes into the snapshot: a run then only checks them,
  // and the first run of an instance not even that (below). INPUT too: the build's
  // warm-up runs defined it.
  for (let i = 0; i < NAMES.length; i++) provide(NAMES[i], VALUES[i]);
  provide('INPUT', null);
  // And the combinators' hidden helper, which a run only checks, when its code names
  // Promise: defining a global cost such a run more than its rewriting.
  provide(DEFER, toolCalls.defer);

  /** Ends the run `state` (its timers, a step's bindings) and reports how it settled. */
  function conclude(state, settled, lower) {
    try {
      try {
        state.closed = true;
        onTick = null;
        timers.clearAll();
        if (state.kept) keepBindings(global, state.kept);
      } finally {
        current = null;
      }
      if (state.violation !== null) return settle(lower, fail('contract', state.violation));
      if (state.uncaught) return settle(lower, fail('exception', guestException(state.uncaught.error)));
      if ('error' in settled) return settle(lower, fail('exception', guestException(settled.error)));
      if (settled.stalled) return settle(lower, fail('contract', NEVER_SETTLES));

      let value = state.hasOutput ? state.output : settled.value;
      if (value === undefined) value = null;
      const { text, problem } = toJson(value);
      if (problem) return settle(lower, fail('contract', clean(`result is not JSON: ${problem}`)));
      return settle(lower, ok(text));
    } catch (e) {
      return failed(lower, e);
    }
  }

  /** Reports a bug in the runner itself: never a trap. */
  function failed(lower, e) {
    try {
      return settle(lower, fail('exception', guestException(e)));
    } catch {
      return settle(lower, FALLBACK);
    }
  }

  /**
   * Drives the code's promise to its end. A synchronous tool call settles at once; calls
   * started together settle when the driver collects their answers, waiting on the host
   * no longer than to the next timer; timers and native streams need the event loop.
   * When turn after turn finds the promise pending, no call in flight and no timer of the
   * code pending, nothing will ever settle it, and the run ends with a contract error
   * (StarlingMonkey would trap with "event loop error" once its own queue ran dry with
   * the export's promise pending).
   */
  function drive(state, result, lower) {
    let resolve;
    const concluded = new Promise((resolveConcluded) => {
      resolve = resolveConcluded;
    });
    const finish = (outcome) => {
      if (state.closed) return;
      state.closed = true;
      resolve(conclude(state, outcome, lower));
    };
    onTick = () => {
      if (state.uncaught) return finish({ error: state.uncaught.error });
      if (toolCalls.inFlight.size) { // wait for an answer, or until the next timer is due
        toolCalls.wait(timers.active.size ? timers.msToNext() : undefined);
        idleTurns = 0;
        return wake();
      }
      if (timers.active.size) return; // the timer's callback (or a started call) wakes it
      if (++idleTurns >= maxIdleTurns) return finish({ stalled: true });
      wake();
    };
    try {
      promiseThen.call(result, (value) => finish({ value }), (error) => finish({ error }));
    } catch (error) { // the code replaced what `then` reads (Promise.prototype.constructor)
      finish({ error });
    }
    // The tick only matters to a run still pending after its first microtasks, and
    // asking the engine for one (a setTimeout) is dear (docs/performance.md): so a
    // runner's first run asks from a microtask queued after the code's first ones,
    // and code that settles at once has finished by then (wake() then does nothing).
    // A session's later steps ask at once: the tick stays pending from one step to
    // the next, and serves them all for less than that microtask costs each.
    if (calls > 1) wake();
    else promiseThen.call(RESOLVED, wake);
    return concluded;
  }

  // A plain function, not an async one: the embedding needs a promise, but code that
  // runs to its end with a plain value (`return 1 + 1`) settles the run with one
  // `then` on a settled promise, at a fraction of an async call's and an await's cost
  // (docs/performance.md, "A JS run without an async runner"). No yield before the code
  // runs: the embedding subscribes to the promise natively (JS::AddPromiseReactions), not
  // by looking `then` up, so code that patches Promise.prototype.then cannot leave the
  // export unsettled (bindings/export_run.js).
  return function run(codeArg, inputArg, lower) {
    let handedOff = false; // whether conclude() now owns `current` (a promise pending)
    try {
      // The bindings pass strings; a test costs less than the call.
      const code = typeof codeArg === 'string' ? codeArg : String(codeArg);
      const inputJson = typeof inputArg === 'string' ? inputArg : String(inputArg);
      let input = null;
      if (inputJson !== 'null' && inputJson !== '' && !['', 'null'].includes(inputJson.trim())) {
        try {
          input = parse(inputJson);
        } catch (e) {
          return promiseResolve(settle(lower, fail('contract', clean(`input is not valid JSON: ${e.message}`))));
        }
      }

      // Before `current` is set: a getter the code left on one of the names is no part of
      // this run (see provide). Indexed loops: for-of runs interpreted self-hosted code here
      // (see writeJson). Not before a runner's first run: no code has run since the names
      // were provided (at build time, for an instance fresh from the snapshot), and the
      // fifteen checks were much of a fresh trivial run's cost (docs/performance.md).
      if (calls !== 0 && !allProvided(global, VALUES)) {
        for (let i = 0; i < NAMES.length; i++) provide(NAMES[i], VALUES[i]);
      }
      // Only code that names a combinator needs it, in place (see createRunner).
      const namesPromise = code.includes('Promise');
      if (namesPromise) provide(DEFER, toolCalls.defer);
      if (input !== null) define('INPUT', input);
      else if (calls !== 0) provide('INPUT', null); // a first run finds it null (createRunner)
      // kept: a session step's top-level bindings, [[name, get, set], ...]
      const state = { hasOutput: false, output: undefined, violation: null, uncaught: null, closed: false, kept: null };
      current = state;
      idleTurns = 0;
      // what an earlier run left in flight is no part of this one
      if (toolCalls.inFlight.size !== 0) toolCalls.inFlight.clear();

      let fn;
      let sync = false;
      headerLines = HEADER_LINES;
      const step = ++calls > 1;
      // A step whose text an earlier step had runs the function compiled then: its
      // rewriting, tokens and names depend on the text alone.
      const reused = step ? compiledSteps.get(code) : undefined;
      if (reused !== undefined) {
        fn = reused.fn;
        sync = reused.sync;
        headerLines = reused.headerLines;
      } else {
        try {
          // Both return code without these words as it is: a test here saves two calls.
          const source = namesPromise || code.includes('import')
            ? deferToolCalls(hideDynamicImport(code)) : code;
          // Code without these words declares nothing to keep, and the tokenizer is then
          // most of a step's cost.
          let tokens = null;
          let names = step && DECLARING_WORDS.test(source) ? simpleStepNames(source) : [];
          if (names === null) {
            tokens = tokenize(source, true);
            names = topLevelNames(source, tokens);
          }
          // Without the word `await` the body parses the same as a plain function's, which
          // costs less to compile and to call, and whose value needs no promise (below).
          // (`\u` too: `aw\u0061it` is an error in an async body, a name in a plain one.)
          sync = !source.includes('await') && !source.includes('\\u');
          const Ctor = sync ? Function : AsyncFunction;
          if (names.length) {
            try {
              // On the keep line, so the code's own lines keep their numbers.
              // (a simple step starts with its declaration: no directive)
              const prologue = tokens !== null && hasUseStrict(tokens) ? "'use strict';" : '';
              fn = compile(Ctor, prologue + keepLine(names) + source, KEEP_PARAM);
              headerLines = HEADER_LINES + 1;
            } catch {
              // the code's own error, with its own line numbers, comes from compiling it as it is
            }
          }
          if (!fn) fn = compile(Ctor, source);
        } catch (e) {
          return promiseResolve(settle(lower, e instanceof SyntaxError ? fail('syntax', syntaxError(e, code)) : fail('exception', guestException(e))));
        }
        if (step && code.length <= MAX_REUSED_CHARS) {
          // A text is kept only when it missed, so each is in the ring once.
          const oldest = keptTexts[nextKept];
          if (oldest !== undefined) compiledSteps.delete(oldest);
          keptTexts[nextKept] = code;
          nextKept = nextKept + 1 === MAX_REUSED_STEPS ? 0 : nextKept + 1;
          compiledSteps.set(code, { fn, sync, headerLines });
        }
      }
      const keep = (bindings) => {
        state.kept = bindings;
      };

      handedOff = true;
      if (!sync) return drive(state, fn(keep), lower);
      // Code without `await` was compiled as a plain function (above): it runs to its end
      // here. Its value, unless a thenable, or what it threw, settles the run once the
      // microtasks the code queued have run, as an async body's would: without the
      // driver's promise, closures and tick (docs/performance.md, "A JS run without
      // await").
      let returned;
      try {
        returned = fn(keep);
      } catch (error) {
        return promiseThen.call(RESOLVED, () => conclude(state, { error }, lower));
      }
      if (returned === null || (typeof returned !== 'object' && typeof returned !== 'function')) {
        return promiseThen.call(RESOLVED, () => conclude(state, { value: returned }, lower));
      }
      return drive(state, promiseResolve(returned), lower);
    } catch (e) { // a bug in the runner itself: report it, never trap
      return promiseResolve(failed(lower, e));
    } finally {
      if (!handedOff) current = null;
    }
  };
}
