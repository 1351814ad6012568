// Splices wasmbox's `tools.call` binding (tool_call.js) and its `runner.run` export
// binding (export_run.js) into the JS bindings that componentize-js generates for the
// `code-runner` world.
//
// Every tool call of the JS guest runs the first, and every run and session step the
// second, interpreted (SpiderMonkey without a JIT); the generated ones were half of a
// call's cost in the guest and grew with the number of calls in a run (see
// tool_call.js), and a sixth of a trivial step (see export_run.js). componentize-js has
// no option to change them, so build.mjs intercepts the bindings between generation and
// the snapshot.
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
/** wasmbox's binding of the `runner.run` export, which replaces the generated one. */
export const EXPORT_RUN = readFileSync(new URL('export_run.js', here), 'utf8');
/** Makes the bindings realm's standard classes while the snapshot is taken (see the file). */
export const RESOLVE_CLASSES = readFileSync(new URL('resolve_classes.js', here), 'utf8');

const CALL_START = 'function import_wasmbox_sandbox_tools_0_1_2$call(arg0, arg1) {\n';
// The binding after `call`: `start-call` (WIT 0.1.2).
const CALL_END = '\nfunction import_wasmbox_sandbox_tools_0_1_2$startCall(';
const EXPORT_START = 'async function export_runner_0_1_2$run(arg0, arg1, arg2, arg3, arg4) {\n';
// What follows the export binding: the import modules' definitions.
const EXPORT_END = "\ndefineBuiltinModule('wasmbox:sandbox/files@0.1.2', {";

/** The text from `startText` to `endText` in `bindings`, which must hold `startText` once. */
function generatedFunction(bindings, startText, endText, what) {
  const start = bindings.indexOf(startText);
  const end = bindings.indexOf(endText, start);
  if (start < 0 || end < 0 || bindings.indexOf(startText, start + 1) >= 0) {
    throw new Error(`the bindings do not hold exactly one generated ${what} binding`);
  }
  return { start, end, text: bindings.slice(start, end) };
}

/** The text of the generated `call` binding, start and end in `bindings`. */
export function generatedCall(bindings) {
  return generatedFunction(bindings, CALL_START, CALL_END, '`tools.call`');
}

/** The text of the generated `runner.run` export binding, start and end in `bindings`. */
export function generatedExport(bindings) {
  return generatedFunction(bindings, EXPORT_START, EXPORT_END, '`runner.run` export');
}

/**
 * `bindings` with the generated `tools.call` binding replaced by tool_call.js, the
 * generated `runner.run` export binding by export_run.js, and resolve_classes.js
 * appended. Throws unless `bindings` is exactly GENERATED.
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
  const call = generatedCall(bindings);
  const run = generatedExport(bindings);
  if (!(call.end <= run.start)) throw new Error('the `tools.call` binding no longer precedes the export binding');
  return `${bindings.slice(0, call.start)}${TOOL_CALL}${bindings.slice(call.end, run.start)}${EXPORT_RUN}`
    + `${bindings.slice(run.end)}\n${RESOLVE_CLASSES}`;
}
