// wasmbox's binding of the `wasmbox:sandbox/tools.call` import, spliced by patch.mjs into
// the bindings componentize-js generates (generated.js) in place of its own
// `import_wasmbox_sandbox_tools_0_1_0$call`. It runs in the bindings' scope: `$memory`,
// `$realloc`, `$dealloc`, the raw import, the UTF-8 coders, `dataView` and
// `ComponentError` are theirs.
//
// Same contract as the generated function (test_bindings_native.mjs runs both on the
// same calls): the result text, or a thrown ComponentError whose payload is the
// call-error variant {tag, val}. What differs is the cost, in an interpreter without a
// JIT where every operation counts (docs/performance.md):
// - the arguments are freed as soon as the host has copied them. The generated code
//   leaves them to the end of the run, on a list that every later `$dealloc` searches
//   linearly, so a call cost ~30 us in a run's first thousand calls and ~50 us after
//   six thousand;
// - strings are encoded by the native TextEncoder, where the generated code first
//   counts their UTF-8 length in an interpreted loop over every character; the tool
//   name once per run, and both strings go in one allocation;
// - no debug-log calls (each built an object even with logging off), one DataView and
//   no intermediate {tag, val} objects for a successful call.

// call-error cases in WIT order: the discriminant the host writes indexes this
const CALL_ERROR_TAGS = ['denied', 'budget-exhausted', 'invalid-args', 'failed', 'timeout'];

// Each tool name's UTF-8, encoded once: a run calls few tools, many times (and the
// call ceiling bounds how many names one run can try).
const nameUtf8 = new Map();

function expectString(s) {
  if (typeof s !== 'string') {
    throw new TypeError('expected a string, received [' + typeof s + ']');
  }
}

function import_wasmbox_sandbox_tools_0_1_0$call(name, argsJson) {
  if (typeof name !== 'string' || typeof argsJson !== 'string') {
    expectString(name); // throws, naming the first non-string as the generated code does
    expectString(argsJson);
  }
  let nameBytes = nameUtf8.get(name);
  if (nameBytes === undefined) {
    nameBytes = TEXT_ENCODER_UTF8.encode(name);
    nameUtf8.set(name, nameBytes);
  }
  // Lone surrogates become U+FFFD, as in the generated code.
  const argsBytes = TEXT_ENCODER_UTF8.encode(argsJson);
  // Both strings in one allocation: the canonical ABI only needs two (ptr, len) pairs.
  const nameLen = nameBytes.length;
  const argsLen = argsBytes.length;
  const size = nameLen + argsLen;
  let block = 1; // any aligned pointer when there is nothing to read
  if (size !== 0) {
    block = $realloc(0, 0, 1, size);
    // `$memory.buffer` after `$realloc`: growing the memory replaces the buffer
    const bytes = new Uint8Array($memory.buffer, block, size);
    bytes.set(nameBytes);
    bytes.set(argsBytes, nameLen);
  }
  const ret = $import_wasmbox_sandbox_tools_0_1_0$call(block, nameLen, block + nameLen, argsLen);
  // The embedding's `$dealloc` also drops the pointer from its end-of-run list, so this
  // is not freed twice.
  if (size !== 0) $dealloc(block, size, 1);
  // result<string, call-error> at `ret`: a u8 discriminant, then the ok string
  // (ptr, len) at +4, or the call-error's u8 case at +4 and its string at +8.
  const view = dataView($memory);
  const failed = view.getUint8(ret) !== 0;
  const tag = failed ? view.getUint8(ret + 4) : 0;
  const at = failed ? ret + 8 : ret + 4;
  const ptr = view.getUint32(at, true);
  const len = view.getUint32(at + 4, true);
  const text = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr, len));
  if (len !== 0) $dealloc(ptr, len, 1);
  $dealloc(ret);
  if (failed) throw new ComponentError({ tag: CALL_ERROR_TAGS[tag], val: text });
  return text;
}
