// Native tests of the `tools.call` binding the JS guest build splices into the generated
// bindings (bindings/patch.mjs): `node guests/js/test_bindings_native.mjs`.
//
// Both the generated bindings (bindings/generated.js, exactly what componentize-js
// writes) and the patched ones run here against the same fake embedding: a linear memory
// that grows on allocation as componentize-js's embedding's does (`memory.buffer` is then
// a new buffer, and the old one keeps its length and its view of the same memory: a
// shared WebAssembly.Memory does exactly that), an allocator that refuses double and
// unknown frees, and a host that answers with the canonical ABI's result layout. Every
// call must give the same result or error through both, send the host the same bytes,
// and the patched binding must free what it allocated.
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  EXPORT_RUN, GENERATED, RESOLVE_CLASSES, TOOL_CALL, generatedCall, generatedExport, patchBindings,
} from './bindings/patch.mjs';

const CALL_ERROR_TAGS = ['denied', 'budget-exhausted', 'invalid-args', 'failed', 'timeout'];

/** A fake embedding: memory, allocator and a scripted host `call` import. */
class Embedding {
  constructor(answer) {
    this.answer = answer; // (name, argsJson) => {ok: text} | {err: [caseIndex, text]}
    this.memory = new WebAssembly.Memory({ initial: 1, maximum: 16384, shared: true });
    this.next = 8;
    this.live = new Map(); // ptr -> len
    this.received = [];
  }

  get buffer() {
    return this.memory.buffer;
  }

  realloc(old, oldLen, align, len) {
    assert.equal(old, 0);
    const ptr = Math.ceil(this.next / align) * align;
    this.next = ptr + len;
    if (this.next > this.buffer.byteLength) {
      // a view past the end of an old buffer reads undefined, and a view made there throws
      this.memory.grow(Math.ceil((this.next - this.buffer.byteLength) / 65536));
    }
    this.live.set(ptr, len);
    return ptr;
  }

  dealloc(ptr) {
    assert.ok(this.live.has(ptr), `free of ${ptr}, which is not allocated`);
    this.live.delete(ptr);
  }

  string(ptr, len) {
    return new TextDecoder().decode(new Uint8Array(this.buffer, ptr, len));
  }

  lowerString(text) {
    const bytes = new TextEncoder().encode(text);
    const ptr = this.realloc(0, 0, 1, bytes.length);
    new Uint8Array(this.buffer, ptr, bytes.length).set(bytes);
    return [ptr, bytes.length];
  }

  // The raw import: reads its arguments, writes result<string, call-error> to a return area.
  call(namePtr, nameLen, argsPtr, argsLen) {
    const name = this.string(namePtr, nameLen);
    const args = this.string(argsPtr, argsLen);
    this.received.push([name, args]);
    const answer = this.answer(name, args);
    const ret = this.realloc(0, 0, 4, 16);
    if ('ok' in answer) {
      const [ptr, len] = this.lowerString(answer.ok);
      const view = new DataView(this.buffer);
      view.setUint8(ret, 0);
      view.setUint32(ret + 4, ptr, true);
      view.setUint32(ret + 8, len, true);
    } else {
      const [tag, message] = answer.err;
      const [ptr, len] = this.lowerString(message);
      const view = new DataView(this.buffer);
      view.setUint8(ret, 1);
      view.setUint8(ret + 4, tag);
      view.setUint32(ret + 8, ptr, true);
      view.setUint32(ret + 12, len, true);
    }
    return ret;
  }
}

/** Runs a bindings script on `embedding`; returns its `tools.call`. */
function load(bindings, embedding) {
  const memory = { get buffer() { return embedding.buffer; } };
  const modules = {};
  const script = new Function('contentGlobal', '$bindings', 'defineBuiltinModule', bindings);
  script(
    { TextEncoder, TextDecoder },
    [memory, embedding.realloc.bind(embedding), embedding.dealloc.bind(embedding),
      () => assert.fail('list-tools is not under test'), embedding.call.bind(embedding)],
    (name, fns) => { modules[name] = fns; },
  );
  return modules['wasmbox:sandbox/tools@0.1.2'].call;
}

function outcome(call, name, args) {
  try {
    return { ok: call(name, args) };
  } catch (e) {
    return { threw: e.constructor.name, message: e.message, payload: e.payload };
  }
}

/** The same call through the generated and the patched binding. */
function both(name, args, answer) {
  const generated = new Embedding(answer);
  const patched = new Embedding(answer);
  const result = {
    generated: outcome(load(GENERATED, generated), name, args),
    patched: outcome(load(patchBindings(GENERATED), patched), name, args),
    generatedHost: generated,
    patchedHost: patched,
  };
  assert.deepEqual(result.patched, result.generated);
  assert.deepEqual(patched.received, generated.received);
  return result;
}

const echo = (name, args) => ({ ok: `${name}:${args}` });

test('the patch replaces the generated call and export bindings, appends the class resolution, and nothing else', () => {
  const patched = patchBindings(GENERATED);
  const call = generatedCall(GENERATED);
  const run = generatedExport(GENERATED);
  assert.equal(patched, GENERATED.slice(0, call.start) + TOOL_CALL + GENERATED.slice(call.end, run.start)
    + EXPORT_RUN + GENERATED.slice(run.end) + `\n${RESOLVE_CLASSES}`);
  assert.ok(!patched.includes('function _unused'));
  assert.throws(() => patchBindings(GENERATED.replace('getUint8', 'getInt8')), /other JS bindings/);
});

test('results cross unchanged, ASCII, non-ASCII and empty', () => {
  for (const [name, args] of [
    ['add', '{"a":1,"b":2}'],
    ['grüße', '{"text":"héllo wörld, 日本語, 🎉"}'],
    ['', ''],
    ['x', '"' + 'long '.repeat(5000) + '"'],
  ]) {
    const { patched } = both(name, args, echo);
    assert.deepEqual(patched, { ok: `${name}:${args}` });
  }
  assert.deepEqual(both('t', '{}', () => ({ ok: '' })).patched, { ok: '' });
  assert.deepEqual(both('t', '{}', () => ({ ok: '"🎉 ü"' })).patched, { ok: '"🎉 ü"' });
});

test('names cross exactly when one binding calls several tools in turn', () => {
  const generated = new Embedding(echo);
  const patched = new Embedding(echo);
  const callGenerated = load(GENERATED, generated);
  const callPatched = load(patchBindings(GENERATED), patched);
  const names = ['add', 'grüße', 'add', '', 'x', 'grüße', 'add'];
  names.forEach((name, i) => {
    assert.equal(callPatched(name, `[${i}]`), callGenerated(name, `[${i}]`));
  });
  assert.deepEqual(patched.received, names.map((name, i) => [name, `[${i}]`]));
});

test('a lone surrogate reaches the host as U+FFFD, as with the generated binding', () => {
  const { patchedHost } = both('t', '"a\uD800b"', echo);
  assert.deepEqual(patchedHost.received, [['t', '"a\uFFFDb"']]);
});

test('every call-error case throws a ComponentError carrying the variant', () => {
  CALL_ERROR_TAGS.forEach((tag, i) => {
    const { patched } = both('t', '{}', () => ({ err: [i, `no: ${tag} ü`] }));
    assert.equal(patched.threw, 'ComponentError');
    assert.deepEqual(patched.payload, { tag, val: `no: ${tag} ü` });
  });
});

test('a name or arguments that are not strings are refused before the host', () => {
  for (const [name, args] of [[1, '{}'], ['t', undefined], ['t', { a: 1 }]]) {
    const { patched, patchedHost } = both(name, args, echo);
    assert.equal(patched.threw, 'TypeError');
    assert.deepEqual(patchedHost.received, []);
  }
});

test('the patched binding keeps a bounded set of blocks; the generated one leaves the arguments', () => {
  const generated = new Embedding(echo);
  const patched = new Embedding(echo);
  const callGenerated = load(GENERATED, generated);
  const callPatched = load(patchBindings(GENERATED), patched);
  for (let i = 0; i < 50; i++) {
    assert.equal(callPatched('add', `{"i":${i}}`), `add:{"i":${i}}`);
    // the arguments' block and the name, reused by every call
    assert.equal(patched.live.size, 2);
    callGenerated('add', `{"i":${i}}`);
  }
  // the generated binding's arguments wait for the end of the run, two per call
  assert.equal(generated.live.size, 100);
  // a second name adds its own block, once
  callPatched('sub', '{}');
  callPatched('sub', '{}');
  assert.equal(patched.live.size, 3);
  // errors free the result too
  const failing = new Embedding(() => ({ err: [3, 'boom'] }));
  const callFailing = load(patchBindings(GENERATED), failing);
  for (let i = 0; i < 3; i++) {
    assert.throws(() => callFailing('t', '{}'), (e) => e.payload.val === 'boom');
    assert.equal(failing.live.size, 2);
  }
});

test('the arguments block grows when needed, and huge arguments get a block of their own', () => {
  const generated = new Embedding(echo);
  const patched = new Embedding(echo);
  const callGenerated = load(GENERATED, generated);
  const callPatched = load(patchBindings(GENERATED), patched);
  // Small, then larger than the first block, then beyond the reused block's limit
  // (3 bytes per UTF-16 unit > 64 KiB), then small again; the memory grows during and
  // between the calls.
  const sizes = [10, 400, 5000, 21000, 30000, 5, 21000, 0, 12];
  sizes.forEach((n, i) => {
    const args = JSON.stringify('ü🎉x'.repeat(n));
    assert.equal(callPatched(`t${i % 2}`, args), callGenerated(`t${i % 2}`, args));
    // the old block is freed when a larger one replaces it; a huge call's own block at once
    assert.equal(patched.live.size, 3 - (i === 0 ? 1 : 0));
    assert.ok(Math.max(...patched.live.values()) <= 64 * 1024);
    // the rest of the guest grows the memory between calls too
    patched.dealloc(patched.realloc(0, 0, 1, patched.buffer.byteLength));
  });
  assert.deepEqual(patched.received, generated.received);
});

test('a result the host writes past the memory the binding has seen is read in full', () => {
  // Each call's return area and result string start exactly at the end of the memory, so
  // the memory grows during every call and both lie past the end of any older buffer.
  class PastTheEnd extends Embedding {
    call(...args) {
      this.next = this.buffer.byteLength;
      return super.call(...args);
    }
  }
  const answers = [{ ok: '"done"' }, { err: [3, 'it failed'] }, { ok: 'x'.repeat(70000) }, { ok: '' }];
  const calls = [];
  for (const bindings of [GENERATED, patchBindings(GENERATED)]) {
    const embedding = new PastTheEnd(() => answers[embedding.received.length % answers.length]);
    const call = load(bindings, embedding);
    calls.push(Array.from({ length: 8 }, (_, i) => outcome(call, `t${i % 3}`, `{"i":${i}}`)));
  }
  assert.deepEqual(calls[1], calls[0]);
  // the i-th call answers answers[(i + 1) % 4]
  assert.deepEqual(calls[1][0].payload, { tag: 'failed', val: 'it failed' });
  assert.equal(calls[1][1].ok, 'x'.repeat(70000));
  assert.equal(calls[1][2].ok, '');
  assert.equal(calls[1][3].ok, '"done"');
});

test('a return area that is not 4-aligned is an error, not a misread', () => {
  class Misaligned extends Embedding {
    call(...args) {
      const ret = super.call(...args);
      const moved = this.realloc(0, 0, 4, 20) + 1;
      new Uint8Array(this.buffer).copyWithin(moved, ret, ret + 16);
      this.dealloc(ret);
      return moved;
    }
  }
  const callPatched = load(patchBindings(GENERATED), new Misaligned(echo));
  assert.throws(() => callPatched('add', '{}'), /return area at \d+ is not 4-aligned/);
});

// The `runner.run` export binding (export_run.js against the generated one).

/** Runs a bindings script on `embedding` with `runner` as the source module's `runner`; returns the export. */
function loadExport(bindings, embedding, runner) {
  const memory = { get buffer() { return embedding.buffer; } };
  const script = new Function('contentGlobal', '$bindings', 'defineBuiltinModule', '$source_mod',
    `${bindings}\nbindExports('runner.js'); return export_runner_0_1_2$run;`);
  return script(
    { TextEncoder, TextDecoder },
    [memory, embedding.realloc.bind(embedding), embedding.dealloc.bind(embedding)],
    () => {},
    { runner },
  );
}

/** Reads result<string, run-error> at `ret`, as the host lifts it. */
function lift(embedding, ret) {
  const view = new DataView(embedding.buffer);
  const string = (at) => embedding.string(view.getUint32(at, true), view.getUint32(at + 4, true));
  if (view.getUint8(ret) === 0) return { ok: string(ret + 4) };
  const which = view.getUint8(ret + 4);
  if (which === 2) return { contract: string(ret + 8) };
  return { [which === 0 ? 'syntax' : 'exception']: [string(ret + 8), string(ret + 16), string(ret + 24)] };
}

/**
 * One export call through the generated and the patched binding, the runner answering
 * `result` (after a microtask, as core.js's async run does): what the host reads, the
 * code and input the runner received, and that only the results' strings stay allocated.
 */
async function exportBoth(code, input, result) {
  const lifted = [];
  for (const bindings of [GENERATED, patchBindings(GENERATED)]) {
    const embedding = new Embedding(() => assert.fail('no tool calls here'));
    const received = [];
    const runner = {
      async run(c, i, lower) {
        received.push([c, i]);
        await null;
        // as core.js's settle: the result goes to `lower` (the patched binding's) first
        if (lower !== undefined) lower(result);
        return result;
      },
    };
    const exported = loadExport(bindings, embedding, runner);
    const [codePtr, codeLen] = embedding.lowerString(code);
    const [inputPtr, inputLen] = embedding.lowerString(input);
    const ret = embedding.realloc(0, 0, 4, 32);
    const before = new Set(embedding.live.keys());
    // the memory grows during the run, too
    embedding.dealloc(embedding.realloc(0, 0, 1, embedding.buffer.byteLength));
    await exported(codePtr, codeLen, inputPtr, inputLen, ret);
    assert.deepEqual(received, [[code, input]]);
    // the code's and input's text freed; new: one block per non-empty result string
    const strings = [...embedding.live.keys()].filter((ptr) => !before.has(ptr));
    assert.ok(!embedding.live.has(codePtr) || codeLen === 0);
    lifted.push({ result: lift(embedding, ret), strings: strings.length });
  }
  assert.deepEqual(lifted[1], lifted[0]);
  return lifted[1].result;
}

test('the export binding writes every result case as the generated one does', async () => {
  assert.deepEqual(await exportBoth('return 1 + 1', 'null', { tag: 'ok', val: '2' }), { ok: '2' });
  assert.deepEqual(await exportBoth('', '', { tag: 'ok', val: '' }), { ok: '' });
  const big = JSON.stringify('ü🎉x'.repeat(30000));
  assert.deepEqual(await exportBoth('x'.repeat(70000), '{"é": "日本語"}', { tag: 'ok', val: big }), { ok: big });
  assert.deepEqual(await exportBoth('é', 'null', { tag: 'ok', val: '"a\uD800b"' }), { ok: '"a\uFFFDb"' });
  const exception = { kind: 'TypeError', message: 'nö 🎉', traceback: 'at <code>:1' };
  assert.deepEqual(await exportBoth('throw 1', 'null', { tag: 'err', val: { tag: 'exception', val: exception } }),
    { exception: ['TypeError', 'nö 🎉', 'at <code>:1'] });
  assert.deepEqual(await exportBoth('(', 'null', { tag: 'err', val: { tag: 'syntax', val: { ...exception, traceback: '' } } }),
    { syntax: ['TypeError', 'nö 🎉', ''] });
  assert.deepEqual(await exportBoth('', 'null', { tag: 'err', val: { tag: 'contract', val: 'output() twice' } }),
    { contract: 'output() twice' });
});

test('the export binding refuses a result that is no result<string, run-error>', async () => {
  for (const result of [{ tag: 'err', val: { tag: 'nope', val: '' } }, { tag: 'ok', val: 5 }]) {
    const embedding = new Embedding(() => assert.fail('no tool calls here'));
    const exported = loadExport(patchBindings(GENERATED), embedding, {
      async run(c, i, lower) {
        await null;
        lower(result);
        return result;
      },
    });
    const ret = embedding.realloc(0, 0, 4, 32);
    await assert.rejects(exported(1, 0, 1, 0, ret), TypeError);
  }
});
