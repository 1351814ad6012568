// wasmbox's binding of the `wasmbox:sandbox/tools.call` import, spliced by patch.mjs into
// the bindings componentize-js generates (generated.js) in place of its own
// `import_wasmbox_sandbox_tools_0_1_2$call`. It runs in the bindings' scope: `$memory`,
// `$realloc`, `$dealloc`, the raw import, the UTF-8 coders and `ComponentError` are
// theirs.
//
// Same contract as the generated function (test_bindings_native.mjs runs both on the
// same calls): the result text, or a thrown ComponentError whose payload is the
// call-error variant {tag, val}. What differs is the cost, in an interpreter without a
// JIT where every native call and every new object counts (docs/performance.md):
// - the generated code leaves each call's arguments allocated to the end of the run, on
//   a list that every later `$dealloc` searches linearly, so each call cost more than
//   the one before it. Here the arguments go in one block that every call of the run
//   reuses (the host copies them during the call and calls nothing in the guest but its
//   allocator), and each tool name is written to the memory once per run;
// - strings are encoded by the native TextEncoder straight into that block, where the
//   generated code first counts their UTF-8 length in an interpreted loop over every
//   character, then makes a view of the fresh allocation to encode into;
// - the result is read through views of the whole memory, made again only when the
//   memory grows, not through a DataView getter call per field; no debug-log calls
//   (each built an object even with logging off) and no intermediate {tag, val}
//   objects for a successful call.
// docs/performance.md ("Where a tool call goes", "Session 7") has the per-call times.
//
// Everything the call uses is a local of one closure, the bindings' own names included.
// The bindings are a script, not a module: a name at its top level is a property of
// the realm's global lexical environment (or of the global object, for a function), and
// the interpreter finds it by a lookup in those objects' property maps at every use, of
// some twenty names per call; a closure's variable is a slot at a fixed place.

const import_wasmbox_sandbox_tools_0_1_2$call = (() => {
  const memory = $memory;
  const realloc = $realloc;
  const dealloc = $dealloc;
  const rawCall = $import_wasmbox_sandbox_tools_0_1_2$call;
  const encoder = TEXT_ENCODER_UTF8;
  const decoder = TEXT_DECODER_UTF8;
  const CallError = ComponentError;
  const Bytes = Uint8Array;
  const Words = Uint32Array;

  // call-error cases in WIT order: the discriminant the host writes indexes this
  const CALL_ERROR_TAGS = ['denied', 'budget-exhausted', 'invalid-args', 'failed', 'timeout'];

  // Arguments whose UTF-8 may exceed this many bytes get an exact allocation of their own,
  // freed after the call, so one huge call does not leave the run a block three times its
  // size (encodeInto needs room for the worst case, 3 bytes per UTF-16 unit).
  const MAX_SCRATCH_BYTES = 64 * 1024;
  const MIN_SCRATCH_BYTES = 256;

  // The embedding's `memory.buffer` is an ArrayBuffer over the linear memory from address
  // 0, as long as the memory was when it was made (componentize-js's GetMemBuffer); when
  // the memory grows, the next read of `memory.buffer` makes a new one, and the old one
  // keeps its length and still reads and writes the same memory below it. So the views
  // stay right for every address below `memoryLength`, and are made again only when a
  // pointer lies past it: a comparison where a read of `memory.buffer` is a native getter
  // call (the tests' fake embedding grows a shared WebAssembly.Memory, which behaves so).
  let memoryBuffer = null;
  let memoryLength = 0;
  let memory8 = null;
  let memory32 = null;
  // The arguments' block: allocated on the first call, reused, grown when too small.
  let scratch = 0;
  let scratchSize = 0;
  let scratchBytes = null;
  // Each tool name's UTF-8 in the memory, [ptr, len], written once: a run calls few tools,
  // many times, and the call ceiling bounds how many names it can try.
  const namesInMemory = new Map();
  // The last name called, as most runs call one tool many times: a comparison instead of
  // the map's native call.
  let lastName = null;
  let lastLowered = null;

  // The embedding frees every allocation of an export call when the call returns
  // (ComponentizeJS embedding.cpp: `cabi_realloc` lists them, `post_call` frees the list),
  // the argument block and the names above included. A run makes one export call, but a
  // session calls the same instance again, whose calls would then write arguments into,
  // and pass names from, freed memory. The export binding (export_run.js) calls this at
  // the start of every export call.
  function forgetAllocations() {
    scratch = 0;
    scratchSize = 0;
    scratchBytes = null;
    namesInMemory.clear();
    lastName = null;
    lastLowered = null;
  }

  function viewMemory() {
    memoryBuffer = memory.buffer;
    memoryLength = memoryBuffer.byteLength;
    memory8 = new Bytes(memoryBuffer);
    memory32 = new Words(memoryBuffer, 0, memoryBuffer.byteLength >>> 2);
    scratchBytes = scratchSize === 0 ? null : new Bytes(memoryBuffer, scratch, scratchSize);
  }

  function growScratch(bytes) {
    if (scratchSize !== 0) dealloc(scratch, scratchSize, 1);
    scratchSize = 0;
    const size = bytes < MIN_SCRATCH_BYTES ? MIN_SCRATCH_BYTES : bytes;
    scratch = realloc(0, 0, 1, size);
    scratchSize = size;
    viewMemory();
  }

  /** Copies `bytes` to a new allocation of exactly their size; returns its pointer. */
  function lowerBytes(bytes) {
    if (bytes.length === 0) return 1; // any aligned pointer when there is nothing to read
    const ptr = realloc(0, 0, 1, bytes.length);
    if (ptr + bytes.length > memoryLength) viewMemory();
    memory8.set(bytes, ptr);
    return ptr;
  }

  function nameInMemory(name) {
    const bytes = encoder.encode(name); // lone surrogates become U+FFFD
    const lowered = [lowerBytes(bytes), bytes.length];
    namesInMemory.set(name, lowered);
    return lowered;
  }

  function expectString(s) {
    if (typeof s !== 'string') {
      throw new TypeError('expected a string, received [' + typeof s + ']');
    }
  }

  function import_wasmbox_sandbox_tools_0_1_2$call(name, argsJson) {
    if (typeof name !== 'string' || typeof argsJson !== 'string') {
      expectString(name); // throws, naming the first non-string as the generated code does
      expectString(argsJson);
    }
    let lowered = lastLowered;
    if (name !== lastName) {
      lowered = namesInMemory.get(name) ?? nameInMemory(name);
      lastName = name;
      lastLowered = lowered;
    }
    let argsPtr;
    let argsLen;
    let owned = 0; // the size of the arguments' own allocation, to free after the call
    const mostBytes = argsJson.length * 3;
    if (mostBytes <= MAX_SCRATCH_BYTES) {
      if (mostBytes > scratchSize || scratchSize === 0) growScratch(mostBytes);
      // Lone surrogates become U+FFFD, as in the generated code.
      argsLen = encoder.encodeInto(argsJson, scratchBytes).written;
      argsPtr = scratch;
    } else {
      const bytes = encoder.encode(argsJson);
      argsPtr = lowerBytes(bytes);
      argsLen = bytes.length;
      owned = argsLen;
    }
    const ret = rawCall(lowered[0], lowered[1], argsPtr, argsLen);
    // The embedding's `$dealloc` also drops the pointer from its end-of-run list, so this
    // is not freed twice.
    if (owned !== 0) dealloc(argsPtr, owned, 1);
    // result<string, call-error> at `ret`, 4-aligned (the canonical ABI's return area for
    // this type): a u8 discriminant, then the ok string (ptr, len) at +4, or the
    // call-error's u8 case at +4 and its string at +8. The host allocated both in the
    // guest during the call, which may have grown the memory past the views.
    if ((ret & 3) !== 0) throw new Error(`the tools.call return area at ${ret} is not 4-aligned`);
    if (ret + 16 > memoryLength) viewMemory();
    const failed = memory8[ret] !== 0;
    const at = (failed ? ret + 8 : ret + 4) >>> 2;
    const ptr = memory32[at];
    const len = memory32[at + 1];
    if (ptr + len > memoryLength) viewMemory();
    const text = decoder.decode(new Bytes(memoryBuffer, ptr, len));
    if (len !== 0) dealloc(ptr, len, 1);
    const tag = failed ? memory8[ret + 4] : 0;
    dealloc(ret);
    if (failed) throw new CallError({ tag: CALL_ERROR_TAGS[tag], val: text });
    return text;
  }

  // Compiled now, into the snapshot, as export_run.js's functions are: SpiderMonkey
  // compiles a function on its first call, and every instance starts from the snapshot,
  // so each fresh run's first tool call compiled these again. The call itself runs up to
  // its argument check only: the host is not there while the snapshot is made.
  {
    const [ptr, len] = nameInMemory('warm');
    growScratch(MIN_SCRATCH_BYTES);
    encoder.encodeInto('{}', scratchBytes);
    dealloc(ptr, len, 1);
    dealloc(scratch, scratchSize, 1);
    forgetAllocations();
    try {
      import_wasmbox_sandbox_tools_0_1_2$call(0, 0);
    } catch {
      // the TypeError of a name that is not a string, as expected
    }
  }

  // Not enumerable, and only the export binding calls it: guest code never sees it.
  Object.defineProperty(import_wasmbox_sandbox_tools_0_1_2$call, 'forgetAllocations', { value: forgetAllocations });
  return import_wasmbox_sandbox_tools_0_1_2$call;
})();
