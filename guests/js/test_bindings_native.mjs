// Native tests of the `tools.call` binding the JS guest build splices into the generated
// bindings (bindings/patch.mjs): `node guests/js/test_bindings_native.mjs`.
//
// Both the generated bindings (bindings/generated.js, exactly what componentize-js
// writes) and the patched ones run here against the same fake embedding: a linear memory
// that grows (replacing its buffer) on allocation, an allocator that refuses double and
// unknown frees, and a host that answers with the canonical ABI's result layout. Every
// call must give the same result or error through both, send the host the same bytes,
// and the patched binding must free what it allocated.
import test from 'node:test';
import assert from 'node:assert/strict';
import { GENERATED, RESOLVE_CLASSES, generatedCall, patchBindings } from './bindings/patch.mjs';

const CALL_ERROR_TAGS = ['denied', 'budget-exhausted', 'invalid-args', 'failed', 'timeout'];

/** A fake embedding: memory, allocator and a scripted host `call` import. */
class Embedding {
  constructor(answer) {
    this.answer = answer; // (name, argsJson) => {ok: text} | {err: [caseIndex, text]}
    this.buffer = new ArrayBuffer(64);
    this.next = 8;
    this.live = new Map(); // ptr -> len
    this.received = [];
  }

  realloc(old, oldLen, align, len) {
    assert.equal(old, 0);
    const ptr = Math.ceil(this.next / align) * align;
    this.next = ptr + len;
    if (this.next > this.buffer.byteLength) {
      // memory.grow: a new buffer; the old one is detached, so stale views fail loudly
      const grown = new ArrayBuffer(2 * this.next);
      new Uint8Array(grown).set(new Uint8Array(this.buffer));
      structuredClone(this.buffer, { transfer: [this.buffer] });
      this.buffer = grown;
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

test('the patch replaces the generated call binding, appends the class resolution, and nothing else', () => {
  const patched = patchBindings(GENERATED);
  const { start, end } = generatedCall(GENERATED);
  assert.ok(patched.startsWith(GENERATED.slice(0, start)));
  assert.ok(patched.endsWith(`${GENERATED.slice(end)}\n${RESOLVE_CLASSES}`));
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
