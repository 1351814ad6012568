// Native tests of the JS guest's logic (core.js), without wasm: `node guests/js/test_runner_native.mjs`.
//
// core.js takes the host (`call`, `listTools`) and the engine's timers as parameters, so
// node can drive it with a fake host here. What only the real component can show (stack
// line numbers, StarlingMonkey's console and event loop, traps) is checked against the
// built component by the host's conformance tests.
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  createRunner, simpleStepNames, deferToolCalls, deferToolCallsScan, hideDynamicImportScan, DEFER, makeRequire, topLevelNames, hasUseStrict, tokenize, toJson, writeJson, plainJsonText, plainArgsText, toolArgs, hideDynamicImport, format, IMPORT_STANDIN, NEVER_SETTLES,
} from './core.js';

// The bindings throw an Err from `call` as a ComponentError carrying the variant.
class ComponentError extends Error {
  constructor(payload) {
    super('see payload');
    this.payload = payload;
  }
}

const calls = [];
const events = []; // how the guest reached the host: 'call', 'start', ['await', timeoutMs]
const started = new Map(); // call id -> {tag, val}, as await-any answers
const host = {
  call(name, argsJson) {
    events.push('call');
    return host.answer(name, argsJson);
  },
  startCall(name, argsJson) {
    // The broker refuses an unknown tool before it starts, as `call` refuses it.
    if (!['add', 'echo', 'fail', 'spent'].includes(name)) return host.answer(name, argsJson);
    events.push('start');
    const id = calls.length + 1;
    try {
      started.set(id, { tag: 'ok', val: host.answer(name, argsJson) });
    } catch (e) {
      started.set(id, { tag: 'err', val: e.payload });
    }
    return id;
  },
  awaitAny(timeoutMs) {
    events.push(['await', timeoutMs]);
    const done = [...started].map(([id, answer]) => ({ id, answer }));
    started.clear();
    return done;
  },
  answer(name, argsJson) {
    calls.push([name, argsJson]);
    const args = JSON.parse(argsJson);
    if (name === 'add') return JSON.stringify(args.a + args.b);
    if (name === 'echo') return argsJson;
    if (name === 'fail') throw new ComponentError({ tag: 'failed', val: 'tool fail: boom' });
    if (name === 'spent') throw new ComponentError({ tag: 'budget-exhausted', val: 'no calls left' });
    throw new ComponentError({ tag: 'denied', val: `tool '${name}' is not allowed` });
  },
  listTools: () => [
    { name: 'add', description: 'adds', argsSchema: '{"type":"object"}' },
    { name: 'echo', description: 'echoes', argsSchema: 'not json' },
  ],
};
const timers = { setTimeout, clearTimeout, setInterval, clearInterval };
// node clamps setTimeout(0) to 1 ms; a few idle turns are enough without native streams
// A fresh runner per run, as every run is a fresh instance; a session reuses one.
const newRunner = () => createRunner({ host, timers, maxIdleTurns: 3 });
const run = (code, inputJson) => newRunner()(code, inputJson);

const ok = (val) => ({ tag: 'ok', val });
const contract = (val) => ({ tag: 'err', val: { tag: 'contract', val } });
async function exception(code) {
  const r = await run(code, 'null');
  assert.equal(r.tag, 'err');
  assert.equal(r.val.tag, 'exception', JSON.stringify(r));
  return r.val.val;
}

test('strict JSON: the Python guest\'s path messages', () => {
  const cases = [
    [{ items: [1, 2, 3, new Set()] }, '$.items[3] is a Set'],
    [[NaN], '$[0] is NaN'],
    [{ x: Infinity }, '$.x is Infinity'],
    [[1, undefined], '$[1] is undefined'],
    [[1, , 2], '$[1] is undefined'], // eslint-disable-line no-sparse-arrays
    [{ 'a b': 1n }, '$["a b"] is a BigInt'],
    [{ f() {} }, '$.f is a function'],
    [{ d: new Date(0) }, '$.d is a Date'],
    [['\ud800'], '$[0] is a string with a lone surrogate'],
    [{ [Symbol('k')]: 1 }, '$ has a non-string key Symbol(k) (symbol)'],
  ];
  for (const [value, problem] of cases) assert.deepEqual(toJson(value), { problem });
  const cyclic = { a: {} };
  cyclic.a.b = cyclic;
  assert.deepEqual(toJson(cyclic), { problem: '$.a.b is a cycle (it contains itself)' });
  let deep = 1;
  for (let i = 0; i < 201; i++) deep = [deep];
  assert.match(toJson(deep).problem, /^\$(\[0\]){200} is nested more than 200 levels deep$/);
});

test('strict JSON: paths are exact at any depth, also for a throwing getter or trap', () => {
  const value = { ok: [1, { 'a b': [0, { x: [true, null, NaN] }] }] };
  assert.deepEqual(toJson(value), { problem: '$.ok[1]["a b"][1].x[2] is NaN' });
  const getter = { a: [{ get b() { throw new Error('no b'); } }] };
  assert.deepEqual(toJson(getter), { problem: '$.a[0].b cannot be encoded: Error: no b' });
  const trap = new Proxy({}, { ownKeys() { throw new Error('no keys'); } });
  assert.deepEqual(toJson({ k: [trap] }), { problem: '$.k[0] cannot be encoded: Error: no keys' });
  // a problem after sibling values: the trail holds only the way to the bad one
  assert.deepEqual(toJson({ a: { b: 1 }, c: [2, [3]], d: [{}, undefined] }), { problem: '$.d[1] is undefined' });
  assert.deepEqual(toJson({ '\ud800': 1 }), { problem: '$["\\ud800"] is a string with a lone surrogate' });
});

test('strict JSON: plain data encodes like JSON.stringify', () => {
  const shared = [1];
  const value = { a: [1, 2.5, -0, 'é"\n', true, null, shared, shared], b: Object.create(null), 'c-d': {} };
  assert.deepEqual(toJson(value), { text: JSON.stringify(value) });
});

// toJson writes plain data with JSON.stringify after a check (plainlyJson) and
// everything else with writeJson: the check must never pass what writeJson refuses, and
// both writers must write plain data alike.
test('strict JSON: the fast path writes what writeJson writes, and refuses nothing it would pass', () => {
  let deep = { end: [] };
  for (let i = 0; i < 198; i++) deep = [deep]; // its innermost [] is 200 deep: the most allowed
  const plain = [
    {}, [], 0, -0, 1.5, -7, 1e21, 5e-324, Number.MAX_SAFE_INTEGER + 2, true, false, null, '',
    'é"\\\n\u0000\u2028 日本 🎉', { a: 1, b: [2, { c: null }] }, Object.create(null),
    { __proto__: null, 'a b': 1, '': 2, '🎉': [] }, [[[]]], { x: [1, , 2].slice(0, 1) }, // eslint-disable-line no-sparse-arrays
    // an array whose prototype brings a toJSON: written as the array it is, toJSON not called
    { a: Object.setPrototypeOf([1], { toJSON() { return 'x'; } }) },
    deep, { a: 1 }, // with a symbol key that is not enumerable (below): writeJson writes it
    // text with a `\u` escape, which sends a value to writeJson to look for lone surrogates
    { k: '\\u0041' }, ['\u0001'], { '\u001f': 'x' }, { a: ['\ud83c\udf89 pair', '\\\ud83d\ude00'] },
  ];
  Object.defineProperty(plain.at(-1), Symbol('not enumerable'), { value: 1, enumerable: false });
  plain.forEach((value, i) => {
    assert.deepEqual(toJson(value), writeJson(value), `plain[${i}]`);
    assert.ok('text' in toJson(value), `plain[${i}]`);
  });
  const cyclic = { a: [] };
  cyclic.a.push(cyclic);
  const refused = [
    NaN, Infinity, -Infinity, undefined, 1n, Symbol('s'), () => 1, new Date(0), new Set(), new Map(),
    new String('s'), new Number(1), Object(true), [1, , 2], [undefined], { a: undefined }, // eslint-disable-line no-sparse-arrays
    { a: { b: [NaN] } }, { '\ud800': 1 }, ['a\udc00'], { [Symbol('k')]: 1 }, new (class A {})(),
    { a: { b: ['x', 'y\ud800z'] } }, { a: [{ '\udfff': 1 }] }, '\udbff', { a: '\\\ud800' },
    Object.create({ inherited: 1 }), [deep], cyclic, new Uint8Array(2), /re/, new Error('e'),
    { toJSON: () => 1 },
    // scalars the check passes inline, in an array and in an object
    [NaN], { a: Infinity }, [-Infinity], { a: NaN }, [1n], { a: 1n }, [Symbol('s')], { a: () => 1 },
  ];
  refused.forEach((value, i) => {
    const problem = writeJson(value).problem;
    assert.ok(problem, `refused[${i}]`);
    assert.deepEqual(toJson(value), { problem }, `refused[${i}]`);
  });
});

test('strict JSON: plain data takes the fast path, unless its text has a \\u escape', () => {
  for (const value of ['s', ['a', 'b'], { a: 'x', b: ['y', { c: 'z' }] }, { 'é 日本 🎉': '🎉' }, { a: 1, b: true, c: null }]) {
    assert.equal(plainJsonText(value), JSON.stringify(value));
  }
  for (const value of [{ a: '\u0001' }, ['\\u'], { '\ud800': 1 }, [1, NaN], new Date(0)]) {
    assert.equal(plainJsonText(value), undefined);
  }
});

// plainArgsText is plainJsonText for a tool call's argument object, in one function.
test('strict JSON: plainArgsText answers as plainJsonText for every object argument', () => {
  let seed = 3;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  const pick = (list) => list[Math.floor(next() * list.length)];
  const scalars = [0, -0, 1.5, -7, 1e21, NaN, Infinity, true, false, null, undefined, '', 'é"\n', '\\u0041',
    '\ud800', '\u0001', 1n, Symbol('s'), () => 1, new Date(0), new String('s')];
  const keys = ['a', 'b', '', 'é', '\ud800', '__proto__', 'toJSON', 'constructor', '0', 'a b'];
  const value = (depth) => {
    const kind = next();
    if (depth > 3 || kind < 0.45) return pick(scalars);
    if (kind < 0.65) return Array.from({ length: Math.floor(next() * 4) }, () => value(depth + 1));
    const made = kind < 0.95 ? {} : Object.create(kind < 0.97 ? null : { inherited: 1 });
    for (let n = Math.floor(next() * 4); n > 0; n--) {
      defineProperty(made, pick(keys), {
        value: value(depth + 1), enumerable: next() < 0.9, writable: true, configurable: true,
      });
    }
    if (next() < 0.03) made[Symbol('k')] = 1;
    return made;
  };
  const { defineProperty } = Object;
  const objects = [];
  for (let i = 0; i < 20000; i++) {
    const v = value(0);
    if (typeof v === 'object' && v !== null && !Array.isArray(v)) objects.push(v);
  }
  let deep = { end: 1 };
  for (let i = 0; i < 199; i++) deep = { deep };
  const cyclic = { a: [] };
  cyclic.a.push(cyclic);
  objects.push(deep, { deep }, cyclic, new (class A {})(), new Map(), Object.create(null),
    { get a() { throw new Error('no'); } }, new Proxy({ a: 1 }, {}), new Proxy({}, { ownKeys() { throw new Error('no'); } }));
  let plain = 0;
  const check = (label) => objects.forEach((v, i) => {
    const text = plainArgsText(v);
    assert.equal(text, plainJsonText(v), `${label} objects[${i}]`);
    if (text !== undefined) plain += 1;
  });
  check('');
  assert.ok(plain > 1000 && plain < objects.length - 1000, `${plain} of ${objects.length} plain`);
  // names code put on the prototypes
  for (const [proto, name] of [[Object.prototype, 'toJSON'], [Array.prototype, 'toJSON'], [Object.prototype, 'extra']]) {
    proto[name] = () => 'replaced';
    try {
      check(`with ${name}`);
    } finally {
      delete proto[name];
    }
  }
});

test('strict JSON: a toJSON on the prototypes is not called', () => {
  for (const proto of [Object.prototype, Array.prototype]) {
    proto.toJSON = () => 'replaced';
    try {
      assert.deepEqual(toJson({ a: [1] }), { text: '{"a":[1]}' });
      assert.deepEqual(toJson([{}]), { text: '[{}]' });
    } finally {
      delete proto.toJSON;
    }
  }
});

test('strict JSON: a getter that throws on either read is reported with its path', () => {
  let reads = 0;
  const second = { a: { get b() { reads += 1; if (reads > 1) throw new Error('second'); return 1; } } };
  assert.deepEqual(toJson(second), { problem: '$.a.b cannot be encoded: Error: second' });
  const first = { a: [{ get b() { throw new Error('first'); } }] };
  assert.deepEqual(toJson(first), { problem: '$.a[0].b cannot be encoded: Error: first' });
});

test('tool arguments: one plain object, checked before the host sees it', () => {
  assert.equal(toolArgs('t', undefined), '{}');
  assert.equal(toolArgs('t', { a: [1] }), '{"a":[1]}');
  assert.throws(() => toolArgs('t', { a: [0, NaN] }),
    { name: 'TypeError', message: 'tools.t() arguments are not JSON: $.a[1] is NaN' });
  assert.throws(() => toolArgs('t', 1, 'x'),
    { name: 'TypeError', message: 'tools.t() takes one plain object of arguments, got more than one (number, string, ...)' });
  assert.throws(() => toolArgs('t', [1]), { message: 'tools.t() takes one plain object of arguments, got Array' });
});

test('dynamic import() is replaced, strings, comments, regexes and methods are not', () => {
  const src = 'const m = await import("x"); // import("y")\nconst s = "import(z)", r = /import\\(/, t = `${import("w")}`;\n'
    + 'const o = { import(a) { return a } }; o.import(1);';
  const out = hideDynamicImport(src);
  assert.equal(out.length, src.length); // positions in errors stay right
  assert.equal(out.split(IMPORT_STANDIN).length - 1, 2);
  assert.ok(out.includes('// import("y")') && out.includes('"import(z)"') && out.includes('o.import(1)'));
});

test('dynamic import() between comments and line breaks is replaced too', () => {
  for (const src of ['await import /* c */ ("x")', 'await import // c\n  ("x")', 'await import\n\t(\n"x")']) {
    assert.equal(hideDynamicImport(src), src.replace('import', IMPORT_STANDIN), src);
  }
  // Without a `(` after it, the word is left, and the text is not scanned at all.
  for (const src of ['const important = 1', 'import.meta', '"import"']) assert.equal(hideDynamicImport(src), src);
});

test('console formatting: node-like primitives, JSON-ish objects, format strings', () => {
  assert.equal(format(['a', 1, { x: [1, 's'] }, [undefined], null, -0, 5n]), 'a 1 {"x":[1,"s"]} [undefined] null -0 5n');
  assert.equal(format(['%s=%d %j %%', 'k', 42, { j: 1 }, 'rest']), 'k=42 {"j":1} % rest');
  assert.equal(format([new Map([[1, { a: 2 }]]), new Set(['s'])]), 'Map(1) {1 => {"a":2}} Set(1) {"s"}');
  const o = { get g() { throw new Error('never called') } };
  o.self = o;
  assert.equal(format([o]), '{"g":[Getter],"self":[Circular]}');
});

test('values: return, output, undefined -> null, input', async () => {
  assert.deepEqual(await run('return {a: [1, "x", null]}', 'null'), ok('{"a":[1,"x",null]}'));
  assert.deepEqual(await run('1 + 1', 'null'), ok('null'));
  assert.deepEqual(await run('output(1); return 2', 'null'), ok('1'));
  assert.deepEqual(await run('const output = 5; return output', 'null'), ok('5')); // shadowing is allowed
  assert.deepEqual(await run('return INPUT', ' '), ok('null'));
  assert.deepEqual(await run('return INPUT.s + "✓"', '{"s":"😀"}'), ok('"😀✓"'));
  const bad = await run('return 1', '{nope');
  assert.equal(bad.val.tag, 'contract');
  assert.match(bad.val.val, /^input is not valid JSON: /);
});

test('values: code without await settles as an async body would', async () => {
  // the microtasks the code queued run before the run settles: output() in one wins
  assert.deepEqual(await run('Promise.resolve().then(() => output(7)); return 1', 'null'), ok('7'));
  assert.deepEqual(await run('Promise.resolve().then(() => output(7)).catch(() => {}); output(8)', 'null'),
    contract('output() called more than once'));
  // a returned thenable is adopted; a rejected one, or a throw, is the run's exception
  assert.deepEqual(await run('return Promise.resolve(5)', 'null'), ok('5'));
  assert.deepEqual(await run('return {then(r) { r(6) }}', 'null'), ok('6'));
  assert.deepEqual(await run('return tools.add({a: 1, b: 2})', 'null'), ok('3'));
  assert.equal((await exception('return Promise.reject(new TypeError("no"))')).kind, 'TypeError');
  assert.equal((await exception('null.boom')).kind, 'TypeError');
  // `await` spelled with an escape is still refused, as in an async body
  assert.equal((await run('let aw\\u0061it = 1; return aw\\u0061it', 'null')).val.tag, 'syntax');
  assert.deepEqual(await run('return "\\u0061"', 'null'), ok('"a"'));
});

test('contract errors: output twice (even caught), non-JSON result, never settles', async () => {
  assert.deepEqual(await run('output(1); try { output(2) } catch {} return 3', 'null'),
    contract('output() called more than once'));
  assert.deepEqual(await run('return {items: [1, 2, 3, new Set()]}', 'null'),
    contract('result is not JSON: $.items[3] is a Set'));
  assert.deepEqual(await run('output(tools.add({a: 1, b: 2}))', 'null'), contract('result is not JSON: $ is a Promise'));
  assert.deepEqual(await run('await new Promise(() => {})', 'null'), contract(NEVER_SETTLES));
  assert.deepEqual(await run('await new Promise(r => setTimeout(r, 5)); return 1', 'null'), ok('1'));
});

test('tools: await, Promise.all, ToolError family, listTools', async () => {
  assert.deepEqual(await run('return await tools.add({a: 1, b: 2})', 'null'), ok('3'));
  assert.deepEqual(await run('return await Promise.all([tools.add({a: 1, b: 2}), tools.echo({x: 1}), tools.echo()])', 'null'),
    ok('[3,{"x":1},{}]'));
  const caught = await run(`try { await tools.nope({}) } catch (e) {
    return [e instanceof ToolDenied, e instanceof ToolError, e.kind, e.name, e.tool, e.message, String(e)] }`, 'null');
  assert.deepEqual(JSON.parse(caught.val),
    [true, true, 'denied', 'ToolDenied', 'nope', "tool 'nope' is not allowed", "tool 'nope' is not allowed"]);
  assert.deepEqual(await run('try { await tools.spent() } catch (e) { return [e.kind, e instanceof ToolBudgetExhausted] }', 'null'),
    ok('["budget_exhausted",true]'));
  const failed = await exception('await tools.fail({})');
  assert.deepEqual([failed.kind, failed.message], ['ToolFailed', 'tool fail: boom']);
  assert.deepEqual(await run('return [typeof tools._x, typeof tools.then, Object.keys(tools), listTools()[1].args_schema]', 'null'),
    ok('["undefined","undefined",["add","echo"],"not json"]'));
});

test('tools: calls handed to Promise.all start together; any other call is synchronous', async () => {
  events.length = 0;
  assert.deepEqual(await run('return await Promise.all([tools.add({a: 1, b: 2}), tools.echo({x: 1}), tools.add({a: 0, b: 0})])', 'null'),
    ok('[3,{"x":1},0]'));
  assert.deepEqual(events, ['start', 'start', 'start', ['await', undefined]]);
  events.length = 0;
  assert.deepEqual(await run('let t = 0; for (let i = 0; i < 3; i++) t += await tools.add({a: i, b: 1}); return t', 'null'),
    ok('6'));
  assert.deepEqual(events, ['call', 'call', 'call']);
  // Refusals and failures reject their own promise; the others still answer.
  assert.deepEqual(await run(`const r = await Promise.allSettled([tools.nope(), tools.fail(), tools.add({a: 1, b: 1})]);
    return r.map((x) => x.status === 'fulfilled' ? x.value : x.reason.name)`, 'null'), ok('["ToolDenied","ToolFailed",2]'));
  // Calls made in a .map() inside the argument, and a combinator's own forms.
  events.length = 0;
  assert.deepEqual(await run(`const r = await Promise.race([1, 2].map((i) => tools.add({a: i, b: i})));
    return [r, await Promise.any([tools.echo({x: 1})])]`, 'null'), ok('[2,{"x":1}]'));
  assert.deepEqual(events, ['start', 'start', ['await', undefined], 'start', ['await', undefined]]);
  // A call outside the combinator, even in the same job, stays synchronous.
  events.length = 0;
  assert.deepEqual(await run('const a = tools.add({a: 1, b: 1}); return await Promise.all([a, tools.add({a: 2, b: 2})])', 'null'),
    ok('[2,4]'));
  assert.deepEqual(events, ['call', 'start', ['await', undefined]]);
  // With a timer pending, the wait for answers ends when the timer is due.
  events.length = 0;
  assert.deepEqual(await run(`setTimeout(() => {}, 5000);
    const r = await Promise.all([tools.add({a: 1, b: 1}), tools.add({a: 2, b: 2})]); clearTimeout(); return r`, 'null'),
  ok('[2,4]'));
  const waited = events.find((e) => Array.isArray(e));
  assert.ok(waited[1] > 0 && waited[1] <= 5000, `await-any waited for ${waited[1]} ms at most`);
});

// The driver goes idle while only a timer of the code is pending; a call started later,
// from code resumed by an event of the engine's own (here one of node's timers, which the
// runner does not count), must wake it, or it is collected only when the timer is due.
test('tools: calls started after a native event are collected while a timer is pending', async () => {
  globalThis.nativeEvent = (ms) => new Promise((resolve) => timers.setTimeout(resolve, ms));
  events.length = 0;
  try {
    assert.deepEqual(await run(`let fired = false; const t = setTimeout(() => { fired = true; }, 30000);
      await nativeEvent(20);
      const r = await Promise.all([tools.add({a: 1, b: 1}), tools.add({a: 2, b: 2})]); clearTimeout(t); return [r, fired]`, 'null'),
    ok('[[2,4],false]'));
  } finally {
    delete globalThis.nativeEvent;
  }
  assert.equal(events.length, 3);
  assert.deepEqual(events.slice(0, 2), ['start', 'start']);
  assert.ok(events[2][1] > 0, `await-any waited up to the pending timer, not past it: ${events[2][1]}`);
});

test('deferToolCalls: a combinator\'s argument goes through DEFER, lines stay, unholdable ones are left', () => {
  const d = (code) => deferToolCalls(code);
  assert.equal(d('await Promise.all([tools.a(), tools.b()])'),
    `await Promise.all(${DEFER}(() => ([tools.a(), tools.b()])))`);
  assert.equal(d('Promise.allSettled(xs.map((x) => tools.get({x})))\nthrow 1'),
    `Promise.allSettled(${DEFER}(() => (xs.map((x) => tools.get({x})))))\nthrow 1`);
  assert.equal(d('Promise.all([Promise.race([a()]), `${b}`])'),
    `Promise.all(${DEFER}(() => ([Promise.race(${DEFER}(() => ([a()]))), \`\${b}\`])))`);
  for (const kept of ['Promise.all([await a(), b()])', 'Promise.all(...xs)', 'Promise.all()', 'Promise.all(a, b)',
    'x.Promise.all([a()])', 'Promise.resolve(a())', '"Promise.all([a()])"', 'Promise.all([function* () { yield 1 }])']) {
    assert.equal(d(kept), kept);
  }
  // Comments and line breaks between the tokens, as the tokens see them.
  assert.equal(d('Promise /* c */ . // d\n allSettled\n([a()])'),
    `Promise /* c */ . // d\n allSettled\n(${DEFER}(() => ([a()])))`);
});

/**
 * `count` texts of random pieces, the same in every run (a fixed seed): each one of
 * `heads`, then `least` to `most` of `parts`.
 */
function* randomTexts({ seed, count, parts, heads = [''], least = 1, most }) {
  const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  for (let n = 0; n < count; n++) {
    let code = heads[Math.floor(next() * heads.length)];
    const len = least + Math.floor(next() * (most - least + 1));
    for (let i = 0; i < len; i++) code += parts[Math.floor(next() * parts.length)];
    yield code;
  }
}

test('the texts the rewrites skip unscanned are those their scans leave as they are', () => {
  // Fragments around the words the prechecks look for; every mix of them, scanned and not.
  const parts = ['Promise', 'import', '.', 'all', 'race', '(', '[a()]', ')', ' ', '\n', '/* x */', '// y\n',
    '"', '`', '${', '}', '/', 'r', 'allSettled', 'any', '.all', '$', 'x', 'Promise.all(', 'import(', '[t()])', 'race(x))'];
  for (const code of randomTexts({ seed: 7, count: 20000, parts, most: 12 })) {
    const deferred = deferToolCalls(code);
    if (deferred !== code) assert.ok(/Promise/.test(code), code);
    const hidden = hideDynamicImport(code);
    if (hidden !== code) assert.ok(/import/.test(code), code);
    // The scans themselves, without the prechecks, on the same text.
    assert.equal(deferred, deferToolCallsScan(code), code);
    assert.equal(hidden, hideDynamicImportScan(code), code);
  }
});

test('tools: a read-only object whose every public name is a tool', async () => {
  const value = (code) => run(code, 'null').then((r) => (r.tag === 'ok' ? JSON.parse(r.val) : r));
  // Before and after a tool is made, the object answers the same.
  assert.deepEqual(await value(`const before = [Object.keys(tools), 'add' in tools, 'nope' in tools, '_x' in tools,
    Object.getOwnPropertyDescriptor(tools, 'add').enumerable];
    const same = tools.add === tools.add && tools.add.name === 'add';
    return [...before, same, Object.keys(tools), Object.getOwnPropertyNames(tools),
      Object.getOwnPropertyDescriptor(tools, 'add').writable, Object.getOwnPropertyDescriptor(tools, 'toString') === undefined,
      Object.getPrototypeOf(tools), String(tools), tools.hasOwnProperty('add'), typeof tools.then, typeof tools.toJSON]`),
  [['add', 'echo'], true, true, false, true, true, ['add', 'echo'], ['add', 'echo'], false, true, null,
    '[object Object]', true, 'undefined', 'undefined']);
  // Nothing can be changed on it, made or not, and it cannot be frozen into refusing new tools.
  assert.deepEqual(await value(`'use strict'; const refused = [];
    for (const f of [() => { tools.add = 1 }, () => { tools.fresh = 1 }, () => { delete tools.add },
      () => Object.defineProperty(tools, 'x', { value: 1 }), () => Object.setPrototypeOf(tools, {}),
      () => Object.preventExtensions(tools), () => Object.freeze(tools)]) {
      try { f(); refused.push(false) } catch (e) { refused.push(e instanceof TypeError) }
    }
    return [refused, await tools.add({a: 1, b: 2}), await tools.echo({later: true})]`),
  [[true, true, true, true, true, true, true], 3, { later: true }]);
  // A second argument is refused, unless it is undefined (as by any one-parameter function).
  assert.deepEqual(await value(`const r = []; try { await tools.add({a: 1}, {b: 2}) } catch (e) { r.push(e.message) }
    r.push(await tools.add({a: 1, b: 2}, undefined)); return r`),
  ['tools.add() takes one plain object of arguments, got more than one (Object, Object, ...)', 3]);
});

test('errors: syntax, thrown values, dynamic import', async () => {
  const syntax = await run('let x = ;', 'null');
  assert.equal(syntax.val.tag, 'syntax');
  assert.equal(syntax.val.val.kind, 'SyntaxError');
  const thrown = await exception('throw new RangeError("too far")');
  assert.deepEqual([thrown.kind, thrown.message], ['RangeError', 'too far']);
  assert.match(thrown.traceback, /^RangeError: too far/);
  const str = await exception('throw "plain"');
  assert.deepEqual([str.kind, str.message], ['Error', 'plain']);
  const timer = await exception('setTimeout(() => { throw new TypeError("in timer") }, 0); await new Promise(r => setTimeout(r, 20))');
  assert.deepEqual([timer.kind, timer.message], ['TypeError', 'in timer']);
  assert.deepEqual(await run('try { await import("node:path") } catch (e) { return e.name }', 'null'), ok('"TypeError"'));
});

test('modules: require and import() answer fs and fs/promises, Node\'s error for the rest', async () => {
  const fs = { readFileSync: () => 'text', promises: { readFile: async () => 'text' } };
  const modules = { fs, 'fs/promises': fs.promises };
  const require = makeRequire(modules);
  assert.equal(require('fs'), fs);
  assert.equal(require('node:fs'), fs);
  assert.equal(require('fs/promises'), fs.promises);
  assert.equal(require('node:fs/promises'), fs.promises);
  for (const id of ['path', 'node:path', 'lodash', './fs', 'node:', 'constructor', '__proto__']) {
    assert.throws(() => require(id), (e) => e.code === 'MODULE_NOT_FOUND' && e instanceof Error
      && e.message.split('\n')[0] === `Cannot find module '${id}'`, id);
  }
  assert.throws(() => require(1), { code: 'ERR_INVALID_ARG_TYPE', name: 'TypeError' });
  const step = createRunner({ host, timers, maxIdleTurns: 3, modules });
  const code = `const a = await import('node:fs'), b = await import("fs"), c = await import('fs/promises');
return [a.default === b.default, a.readFileSync(), typeof a.promises.readFile, await c.readFile(),
  c.default === a.promises, Object.prototype.toString.call(a), Object.isFrozen(a)]`;
  assert.deepEqual(await step(code, 'null'), ok('[true,"text","function","text",true,"[object Module]",true]'));
  const missing = await step('await import("node:child_process")', 'null');
  assert.equal(missing.val.val.kind, 'TypeError', JSON.stringify(missing));
  assert.match(missing.val.val.message, /modules are fs, fs\/promises/);
});

test('sessions: top-level declarations and their names', () => {
  const names = (code) => topLevelNames(code);
  assert.deepEqual(names('let a = 1, b = [2, 3], c\nconst {d, e: [f, g = h], ...i} = obj; var [j, , ...k] = l'),
    ['a', 'b', 'c', 'd', 'f', 'g', 'i', 'j', 'k']);
  assert.deepEqual(names('function f() { let inner = 1 }\nasync function* g() {}\nclass C extends D {}'), ['f', 'g', 'C']);
  assert.deepEqual(names('const f = () => {\n  let inner;\n}\nlet after = `${x}` + /re}/.source\nfor (let i = 0; ;) {}'),
    ['f', 'after']);
  assert.deepEqual(names('x = function named() {}; y = class K {}; { let block } if (a) { const b = 1 }'), []);
  assert.deepEqual(names('let a = b\nc()\nlet d = 1'), ['a', 'd']);
  assert.deepEqual(names('let a = b\n  .map(f)\n  in c'), ['a']);
  assert.deepEqual(names('const o = {a: 1, b: {c: 2}}, p = 3; label: for (;;) break label'), ['o', 'p']);
});

test('sessions: collapsed groups leave the names and the directive as all the tokens find them', () => {
  const collapsed = (code) => tokenize(code, true).map((t) => `${t.k}:${t.v}${t.nl ? ':nl' : ''}@${t.end}`);
  // A top-level group keeps its opener and closer; one after let, const, var or `,`
  // (a pattern may start there) keeps what is inside, nested groups included.
  assert.deepEqual(collapsed('f(a, [b])\nlet {c: [d]} = g({h}), [i] = `j${k}`'), [
    'name:f@1', 'p:(@2', 'p:)@9', 'name:let:nl@13', 'p:{@15', 'name:c@16', 'p::@17', 'p:[@19', 'name:d@20',
    'p:]@21', 'p:}@22', 'p:=@24', 'name:g@26', 'p:(@27', 'p:)@31', 'p:,@32', 'p:[@34', 'name:i@35', 'p:]@36',
    'p:=@38', 'tmpl:`j@41', 'p:${@43', 'p:}`@44', 'tmpl:`@46']);
  // A stray closer takes the top level below zero, where no group is collapsed: what
  // is inside is back at the top level for topLevelNames.
  assert.deepEqual(collapsed(') (a) (b)'), ['p:)@1', 'p:(@3', 'name:a@4', 'p:)@5', 'p:(@7', 'name:b@8', 'p:)@9']);
  // A `/` inside a collapsed group is a regex or a division by the token before it, kept or not.
  assert.deepEqual(collapsed('f(a / b, / )/) / 2; let x'), ['name:f@1', 'p:(@2', 'p:)@14', 'p:/@16', 'num:2@18',
    'p:;@19', 'name:let@23', 'name:x@25']);
  // Every mix of these fragments: the names and the directive equal those of all the tokens.
  const parts = ['let ', 'const ', 'var ', 'function ', 'async ', 'class ', 'x', 'y = ', '=', ',', ';', '\n', ' ',
    '(', ')', '[', ']', '{', '}', '${', '`', '"', "'", '/', '/re/', '// c\n', '/* c */', 'return ', '...', ':',
    "'use strict'", 'a.b', '1', 'extends ', '*', '=>', 'in ', 'of ', '}`'];
  for (const code of randomTexts({ seed: 11, count: 30000, parts, most: 16 })) {
    const all = tokenize(code);
    const some = tokenize(code, true);
    assert.deepEqual(topLevelNames(code, some), topLevelNames(code, all), code);
    assert.equal(hasUseStrict(some), hasUseStrict(all), code);
    assert.ok(some.length <= all.length, code);
  }
});

test('sessions: a step of one simple declaration is named as topLevelNames names it', () => {
  for (const [code, names] of [['let x = 10', ['x']], ['const s = "a, b; c" ;\n', ['s']],
    ['let items = Array.from({length: x}, (_, i) => square(i))', ['items']], ['var q = a / b', ['q']],
    ['function f(n) {\n  let m = n / 2; return [m, `t`]\n}', ['f']], ['async function* g() {}', ['g']],
    ['class K extends A.B { m() { return 1 } }', ['K']], ['let z = await tools.add({a: 1, b: y})', ['z']]]) {
    assert.deepEqual(simpleStepNames(code), names, code);
    assert.deepEqual(topLevelNames(code, tokenize(code)), names, code);
  }
  // What the expression leaves to the tokenizer.
  for (const code of ['let a = 1, b = 2', 'let x = 1\nlet y = 2', 'let {a} = o', 'let in = 1', 'class extends {}',
    'let r = typeof / 2', 'let r = x.return / 2', 'let c = 1 // note', 'let s = "\\""', 'let t = `${a}`',
    'let d = ((((((((1))))))))', 'x = 1; let y', 'let y = }', 'async\nfunction f() {}', 'let é = 1']) {
    assert.equal(simpleStepNames(code), null, code);
  }
  // Every mix of these after a declaring head: the expression's names, when it takes the
  // text, are all the tokens' names.
  const heads = ['let ', 'const ', 'var ', 'function ', 'async function ', 'function* ', 'class ', ' let\n',
    'let x = ', 'const y = ', 'var z', 'function f(', 'function g() {', 'async function h(a) ', 'class K {',
    'class K extends B ', 'let in = '];
  const parts = ['x', 'y', ' ', '=', ' = ', ',', ';', '\n', '(', ')', '[', ']', '{', '}', '"a"', "'b'", '`c`',
    '"(', "')", '/', ' / ', '/re/', '// c', '/* c */', 'return', ' typeof ', '1', '.', 'extends ', 'in', '=>',
    'let ', 'async', '*', '\\', '${', ':', '?'];
  let taken = 0;
  for (const code of randomTexts({ seed: 5, count: 100000, parts, heads, least: 0, most: 9 })) {
    const simple = simpleStepNames(code);
    if (simple === null) continue;
    taken++;
    assert.deepEqual(simple, topLevelNames(code, tokenize(code)), code);
  }
  assert.ok(taken > 4000, `the expression took ${taken} texts`);
});

test('sessions: the tokenizer\'s tokens, line breaks and ends', () => {
  const tokens = (code) => tokenize(code).map((t) => `${t.k}:${t.v}${t.nl ? ':nl' : ''}@${t.end}`);
  assert.deepEqual(tokens('a>>>=b...c===d!==e**=f<<=g>>=h>>>i&&=j||=k??=l=>m'), [
    'name:a@1', 'p:>>>=@5', 'name:b@6', 'p:...@9', 'name:c@10', 'p:===@13', 'name:d@14', 'p:!==@17', 'name:e@18',
    'p:**=@21', 'name:f@22', 'p:<<=@25', 'name:g@26', 'p:>>=@29', 'name:h@30', 'p:>>>@33', 'name:i@34', 'p:&&=@37',
    'name:j@38', 'p:||=@41', 'name:k@42', 'p:??=@45', 'name:l@46', 'p:=>@48', 'name:m@49']);
  assert.deepEqual(tokens('a?.b??c..d!e<f**g%=h^i|j&k+=l--'), [
    'name:a@1', 'p:?.@3', 'name:b@4', 'p:??@6', 'name:c@7', 'p:.@8', 'p:.@9', 'name:d@10', 'p:!@11', 'name:e@12',
    'p:<@13', 'name:f@14', 'p:**@16', 'name:g@17', 'p:%=@19', 'name:h@20', 'p:^@21', 'name:i@22', 'p:|@23',
    'name:j@24', 'p:&@25', 'name:k@26', 'p:+=@28', 'name:l@29', 'p:--@31']);
  // numbers with exponents and a leading dot; unicode names, spaces and line breaks;
  // escapes in names and strings; a string that a line break ends, which the next token
  // sees
  assert.deepEqual(tokens('1e+5 .5e-3x 0x1F\u00a0é$\\u0061\ufeff\u2028"a\\"b"\r\n\'c\nd'), [
    'num:1e+5@4', 'num:.5e-3x@11', 'num:0x1F@16', 'name:é$\\u0061@25', 'str:"a\\"b":nl@33', 'str:\'c:nl@37',
    'name:d:nl@39']);
  // regex or division by what precedes; flags of either case; comments and their lines
  assert.deepEqual(tokens('x = a / b / c; return /[/]\\//Gi /* \n */ y // z\n`t${u}v${`w`}`'), [
    'name:x@1', 'p:=@3', 'name:a@5', 'p:/@7', 'name:b@9', 'p:/@11', 'name:c@13', 'p:;@14', 'name:return@21',
    'regex:/[/]\\//Gi@31', 'name:y:nl@41', 'tmpl:`t:nl@49', 'p:${@51', 'name:u@52', 'p:}`@52', 'tmpl:v@54',
    'p:${@56', 'tmpl:`w`@59', 'p:}`@59', 'tmpl:`@61']);
  assert.deepEqual(tokens('`open ${'), ['tmpl:`open @6', 'p:${@8']);
  assert.deepEqual(tokens('`unclosed\\'), ['tmpl:`unclosed\\@11']);
});

test('sessions: a step\'s \'use strict\' directive, and what is none', () => {
  const strict = (code) => hasUseStrict(tokenize(code));
  for (const code of ["'use strict'", '"use strict";let a', "// c\n'use asm'; 'use strict'\nx = 1",
    "'a'\n'use strict'\nlet b", "'use strict'\n{ }", "/* c */ 'use strict'\nx = 1"]) {
    assert.ok(strict(code), code);
  }
  for (const code of ["'use strict'.length", "'use strict' + x", "'use strict'\n(f)()", "'use strict'\n[0]",
    "'use\\x20strict'", "x; 'use strict'", "'use strict'\n`t`", "'use strict'\ninstanceof C", "'use strict' ? 1 : 2",
    "let a; 'use strict'", "'x'.y; 'use strict'"]) {
    assert.ok(!strict(code), code);
  }
});

test('sessions: a step\'s directive prologue applies to that step only', async () => {
  const step = newRunner();
  await step('', 'null');
  const r = await step("'use strict'; let keptStrict = 1; undeclaredStrict = 2", 'null');
  assert.equal(r.val.val.kind, 'ReferenceError', JSON.stringify(r));
  assert.deepEqual(await step('let more = 1; undeclaredLater = 3; return [keptStrict, undeclaredLater]', 'null'),
    ok('[1,3]'));
  for (const name of ['keptStrict', 'more', 'undeclaredLater']) delete globalThis[name];
});

test('sessions: declarations persist across steps, sharing one binding', async () => {
  const step = newRunner();
  assert.deepEqual(await step('', 'null'), ok('null'), 'the host opens a session with an empty call');
  assert.deepEqual(await step('let count = 0; const base = 40\nfunction inc() { return ++count }\nclass Box {}', 'null'),
    ok('null'));
  assert.deepEqual(await step('inc(); inc(); return [count, base, typeof Box]', 'null'), ok('[2,40,"function"]'));
  assert.deepEqual(await step('count = 10; return inc()', 'null'), ok('11'));
  const error = await step('base = 1', 'null');
  assert.equal(error.val.val.kind, 'TypeError', JSON.stringify(error));
  // (Line numbers in tracebacks are SpiderMonkey's: tests/all/sessions.rs checks them.)
  assert.equal((await step('let z = 1;\n\nnull.boom', 'null')).val.val.kind, 'TypeError');
  assert.equal((await step('throw new Error("first");\nlet never = 1', 'null')).val.val.message, 'first');
  assert.deepEqual(await step('return [typeof never, z]', 'null'), ok('["undefined",1]'), 'kept only once initialised');
  for (const name of ['count', 'base', 'inc', 'Box', 'z']) delete globalThis[name];
});

test('sessions: a step with an earlier step\'s text runs as that one did', async () => {
  const step = newRunner();
  await step('', 'null');
  const declaring = 'let kept = 1; kept += 1; return kept';
  for (let i = 0; i < 3; i++) assert.deepEqual(await step(declaring, 'null'), ok('2'));
  assert.deepEqual(await step('return kept', 'null'), ok('2'), 'each time it keeps its names');
  const reads = 'return typeof later';
  assert.deepEqual(await step(reads, 'null'), ok('"undefined"'));
  await step('const later = 5', 'null');
  assert.deepEqual(await step(reads, 'null'), ok('"number"'), 'names resolve when it runs');
  const awaiting = 'return await tools.add({a: 1, b: 2})';
  for (let i = 0; i < 2; i++) assert.deepEqual(await step(awaiting, 'null'), ok('3'));
  const strict = "'use strict'; let s = 1; undeclared = s";
  for (let i = 0; i < 2; i++) assert.equal((await step(strict, 'null')).val.val.kind, 'ReferenceError');
  for (let i = 0; i < 2; i++) assert.equal((await step('let = ;', 'null')).val.tag, 'syntax');
  // More distinct texts than it keeps, then the first again: compiled again.
  for (let i = 0; i < 40; i++) assert.deepEqual(await step(`return ${i}`, 'null'), ok(String(i)));
  assert.deepEqual(await step(declaring, 'null'), ok('2'));
  assert.deepEqual(await step('return 0', 'null'), ok('0'));
  for (const name of ['kept', 'later', 's']) delete globalThis[name];
});

test('sessions: a step leaves at most one of the engine\'s timers pending', async () => {
  // StarlingMonkey keeps a pending timer, and all its callback reaches, until an
  // event-loop turn runs it; a step whose promise settles in its microtasks takes no such
  // turn. Timers that never fire here stand for those: one tick per step left every
  // step's state behind (a JS session's memory grew ~5 KiB a step).
  const pending = new Set();
  let next = 1;
  const held = {
    setTimeout() {
      pending.add(next);
      return next++;
    },
    clearTimeout: (id) => pending.delete(id),
    setInterval() { return next++; },
    clearInterval() {},
  };
  const step = createRunner({ host, timers: held, maxIdleTurns: 3 });
  for (let i = 0; i < 50; i++) {
    assert.deepEqual(await step(i % 2 ? 'return 1 + 1' : '', 'null'), ok(i % 2 ? '2' : 'null'));
  }
  assert.deepEqual(await step('return await tools.add({a: 1, b: 2})', 'null'), ok('3'));
  assert.ok(pending.size <= 1, `${pending.size} timers pending after 51 steps`);
});

test('sessions: the names a step rebinds or deletes are there again in the next', async () => {
  const step = newRunner();
  await step('', 'null');
  const spoil = `tools = null; setTimeout = 1; delete globalThis.output; ToolError = undefined;
Object.defineProperty(globalThis, 'listTools', { get() { throw new Error('no') }, configurable: true });
Object.defineProperty(globalThis, 'INPUT', { value: 'stale', writable: false, configurable: true })`;
  assert.deepEqual(await step(spoil, '{"n": 1}'), ok('null'));
  const check = `return [await tools.add({a: 1, b: 2}), typeof setTimeout, typeof output, ToolError.name,
  listTools().length, INPUT, Object.getOwnPropertyDescriptor(globalThis, 'INPUT').writable]`;
  assert.deepEqual(await step(check, 'null'), ok('[3,"function","function","ToolError",2,null,true]'));
  assert.deepEqual(await step('return [INPUT, typeof tools.echo]', '[7]'), ok('[[7],"function"]'));
});
