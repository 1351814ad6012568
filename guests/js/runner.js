// wasmbox JavaScript guest: the component's entry point (componentize-js).
//
// A thin binding: core.js holds the logic. This module runs once, while the component
// is built (componentize-js snapshots the initialised engine with wizer), so everything
// here costs nothing per run.

import { call, listTools } from 'wasmbox:sandbox/tools@0.1.0';
import { createRunner, makeConsole } from './core.js';

// The engine's timers, kept before the run replaces the globals with counting wrappers.
const timers = {
  setTimeout: globalThis.setTimeout.bind(globalThis),
  clearTimeout: globalThis.clearTimeout.bind(globalThis),
  setInterval: globalThis.setInterval.bind(globalThis),
  clearInterval: globalThis.clearInterval.bind(globalThis),
};

// StarlingMonkey's console writes to WASI stdout/stderr; keep it as the sink and put
// node-like formatting in front of it (see makeConsole).
const sink = { out: console.log.bind(console), err: console.error.bind(console) };
Object.assign(console, makeConsole(sink));

// The build disables the http feature, but `fetch` is still defined, and calling it traps
// the instance. The only way out of the guest is `tools`.
delete globalThis.fetch;

export const runner = {
  run: createRunner({ host: { call, listTools }, timers }),
};

// Make every standard class of the code's realm now, into the snapshot: SpiderMonkey
// makes a class on its first use in a realm, and each run starts from the snapshot, so a
// run otherwise made again each class it touched (~30% of a trivial run with the
// bindings' realm; bindings/resolve_classes.js does the same there, and says more).
for (const name of Object.getOwnPropertyNames(globalThis)) {
  try {
    void globalThis[name];
  } catch {
    // an accessor that refuses at build time: nothing to make
  }
}
// SavedFrame is not a global; the first captured stack makes it.
void (function captureStack() { return new Error(); })();
