// Splices wasmbox's `tools.call` binding (tool_call.js) into the JS bindings that
// componentize-js generates for the `code-runner` world.
//
// Every tool call of the JS guest runs that binding, interpreted (SpiderMonkey without a
// JIT), and the generated one was half of a call's cost in the guest and grew with the
// number of calls in a run (see tool_call.js). componentize-js has no option to change
// it, so build.mjs intercepts the bindings between generation and the snapshot.
//
// Only the exact bindings reviewed here are patched: generated.js is componentize-js
// 0.23.0's output for this repository's WIT, and the build fails if the generated text
// differs in any byte (a new componentize-js or a WIT change), rather than splicing
// into code nobody has read.
import { readFileSync } from 'node:fs';

const here = new URL('.', import.meta.url);

/** The bindings componentize-js 0.23.0 generates for wit/ (`code-runner`). */
export const GENERATED = readFileSync(new URL('generated.js', here), 'utf8');
/** wasmbox's binding of `tools.call`, which replaces the generated one. */
export const TOOL_CALL = readFileSync(new URL('tool_call.js', here), 'utf8');
/** Makes the bindings realm's standard classes while the snapshot is taken (see the file). */
export const RESOLVE_CLASSES = readFileSync(new URL('resolve_classes.js', here), 'utf8');

const CALL_START = 'function import_wasmbox_sandbox_tools_0_1_2$call(arg0, arg1) {\n';
// The binding after `call`: `start-call` (WIT 0.1.2).
const CALL_END = '\nfunction import_wasmbox_sandbox_tools_0_1_2$startCall(';

/** The text of the generated `call` binding, start and end in `bindings`. */
export function generatedCall(bindings) {
  const start = bindings.indexOf(CALL_START);
  const end = bindings.indexOf(CALL_END, start);
  if (start < 0 || end < 0 || bindings.indexOf(CALL_START, start + 1) >= 0) {
    throw new Error('the bindings do not hold exactly one generated `tools.call` binding');
  }
  return { start, end, text: bindings.slice(start, end) };
}

/**
 * `bindings` with the generated `tools.call` binding replaced by tool_call.js, and
 * resolve_classes.js appended. Throws unless `bindings` is exactly GENERATED.
 */
export function patchBindings(bindings) {
  if (bindings !== GENERATED) {
    throw new Error(
      'componentize-js generated other JS bindings than guests/js/bindings/generated.js '
        + '(a new componentize-js, or a changed WIT world): check that tool_call.js still '
        + 'does what the generated `tools.call` binding does, then replace generated.js '
        + 'with the new bindings',
    );
  }
  const { start, end } = generatedCall(bindings);
  return `${bindings.slice(0, start)}${TOOL_CALL}${bindings.slice(end)}\n${RESOLVE_CLASSES}`;
}
