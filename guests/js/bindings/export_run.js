// wasmbox's binding of the `wasmbox:sandbox/runner.run` export, spliced by patch.mjs into
// the bindings componentize-js generates (generated.js) in place of its own
// `export_runner_0_1_2$run`. It runs in the bindings' scope: `$memory`, `$realloc`,
// `$dealloc`, the UTF-8 coders, `runner012Run` (runner.js's `runner.run`) and
// `import_wasmbox_sandbox_tools_0_1_2$call` (tool_call.js) are theirs.
// A `var`: the embedding finds the export as a property of the bindings' global object.
//
// Same contract as the generated function (test_bindings_native.mjs runs both on the
// same calls): it takes the code's and the input's text, and writes the run's
// result<string, run-error> to the return area the embedding passes last, before the
// promise it returns settles. What differs is the cost, in an interpreter without a JIT
// (docs/performance.md, "The JS export call"):
// - the generated binding is an async function that awaits the runner's promise and then
//   writes the result: one more async frame and one more await per call. Here the runner
//   writes the result itself, through `lower`, as it concludes the run, and the binding
//   returns the runner's promise, to which the embedding adds its reactions;
// - two debug-log calls per call (one built an object even with logging off), a DataView
//   getter call per field written, and each string's UTF-8 length counted in an
//   interpreted loop over its characters before the native encoder wrote it: here the
//   native encoder alone, and views of the whole memory made again only when it grows.

var export_runner_0_1_2$run = (() => {
  const memory = $memory;
  const realloc = $realloc;
  const dealloc = $dealloc;
  const encoder = TEXT_ENCODER_UTF8;
  const decoder = TEXT_DECODER_UTF8;
  const Bytes = Uint8Array;
  const Words = Uint32Array;

  // run-error cases in WIT order: the discriminant written is the index
  const RUN_ERROR_CASES = ['syntax', 'exception', 'contract'];

  // Growing the memory replaces `memory.buffer`, so the views are made again when the
  // buffer differs from the one they were made on.
  let memoryBuffer = null;
  let memory8 = null;
  let memory32 = null;
  // The return area of the export call in progress (4-aligned: the embedding allocates it).
  let area = 0;

  function viewMemory() {
    memoryBuffer = memory.buffer;
    memory8 = new Bytes(memoryBuffer);
    memory32 = new Words(memoryBuffer, 0, memoryBuffer.byteLength >>> 2);
  }

  /** Writes `s` to a new allocation and its (ptr, len) at byte `at` of the memory. */
  function lowerString(s, at) {
    if (typeof s !== 'string') {
      throw new TypeError('expected a string, received [' + typeof s + ']');
    }
    let ptr = 1; // any aligned pointer when there is nothing to read
    let len = 0;
    if (s.length !== 0) {
      const bytes = encoder.encode(s); // lone surrogates become U+FFFD, as in the generated code
      len = bytes.length;
      ptr = realloc(0, 0, 1, len);
      if (memory.buffer !== memoryBuffer) viewMemory();
      memory8.set(bytes, ptr);
    }
    memory32[at >>> 2] = ptr;
    memory32[(at >>> 2) + 1] = len;
  }

  /** Writes the run's result ({tag: 'ok', val} or {tag: 'err', val: run-error}) to the return area. */
  function lower(result) {
    if (memory.buffer !== memoryBuffer) viewMemory();
    const ret = area;
    const tag = result?.tag;
    if (tag === 'ok') {
      memory8[ret] = 0;
      lowerString(result.val, ret + 4);
      return;
    }
    if (tag !== 'err') throw new TypeError('invalid variant specified for result');
    const error = result.val;
    const which = RUN_ERROR_CASES.indexOf(error?.tag);
    if (which < 0) {
      throw new TypeError(`invalid variant tag value \`${JSON.stringify(error?.tag)}\` (received \`${error}\`) specified for \`RunError\``);
    }
    memory8[ret] = 1;
    memory8[ret + 4] = which;
    if (which === 2) {
      lowerString(error.val, ret + 8);
      return;
    }
    const { kind, message, traceback } = error.val;
    lowerString(kind, ret + 8);
    lowerString(message, ret + 16);
    lowerString(traceback, ret + 24);
  }

  // Compiled now, into the snapshot: SpiderMonkey compiles a function on its first call,
  // and every instance starts from the snapshot, so each fresh run compiled these again.
  {
    const free = (at) => {
      const len = memory32[(at >>> 2) + 1];
      if (len !== 0) dealloc(memory32[at >>> 2], len, 1);
    };
    area = realloc(0, 0, 4, 32);
    lower({ tag: 'ok', val: 'warm' });
    free(area + 4);
    lower({ tag: 'err', val: { tag: 'exception', val: { kind: 'k', message: 'm', traceback: 't' } } });
    for (const at of [8, 16, 24]) free(area + at);
    dealloc(area, 32, 4);
    area = 0;
  }

  return function export_runner_0_1_2$run(codePtr, codeLen, inputPtr, inputLen, returnArea) {
    // What the tools.call binding allocated in an earlier export call (a session's
    // earlier step) has been freed since (tool_call.js). Here rather than in runner.js,
    // whose wrapper was one more frame under every stack the code's promises capture.
    import_wasmbox_sandbox_tools_0_1_2$call.forgetAllocations();
    const buffer = memory.buffer;
    const code = decoder.decode(new Bytes(buffer, codePtr, codeLen));
    if (codeLen !== 0) dealloc(codePtr, codeLen, 1);
    // Most runs have no input, whose text is then `null`: read without a view and a
    // decoder. The views made before the memory last grew still cover what they did.
    const input = inputLen === 4 && memory8 !== null && memory8[inputPtr] === 110 && memory8[inputPtr + 1] === 117
      && memory8[inputPtr + 2] === 108 && memory8[inputPtr + 3] === 108
      ? 'null' : decoder.decode(new Bytes(buffer, inputPtr, inputLen));
    if (inputLen !== 0) dealloc(inputPtr, inputLen, 1);
    if ((returnArea & 3) !== 0) throw new Error(`the runner.run return area at ${returnArea} is not 4-aligned`);
    area = returnArea;
    // runner.run calls `lower` with its result before its promise settles.
    return runner012Run(code, input, lower);
  };
})();
