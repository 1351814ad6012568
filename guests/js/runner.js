// wasmbox JavaScript guest: the component's entry point (componentize-js).
//
// A thin binding: core.js holds the logic. This module runs once, while the component
// is built (componentize-js snapshots the initialised engine with wizer), so everything
// here costs nothing per run.

import { call, listTools, startCall, awaitAny } from 'wasmbox:sandbox/tools@0.1.2';
import * as files from 'wasmbox:sandbox/files@0.1.2';
import { createRunner, makeConsole, makeRequire } from './core.js';
import { makeFs } from './fs.js';
import { installIntlOnFirstUse } from './intl/lazy.js';

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

// The `fs` global (fs.js), over the run's files: defined here, into the snapshot, rather
// than by every run as core.js defines `tools` (a run that defined one more global paid
// for it in W1; docs/performance.md).
const fs = makeFs(files);
Object.defineProperty(globalThis, 'fs', { value: fs, writable: true, configurable: true, enumerable: false });
// Node's built-in modules the guest has, for code that loads them: `require('fs')`,
// `require('node:fs/promises')` and `await import('node:fs')` (core.js). `require` goes
// into the snapshot as `fs` does.
const modules = { fs, 'fs/promises': fs.promises };
Object.defineProperty(globalThis, 'require', {
  value: makeRequire(modules), writable: true, configurable: true, enumerable: false,
});

// The export: `runner.run(code, inputJson, lower)`, where `lower` is the export
// binding's writer of the result (bindings/export_run.js). core.js's runner itself, made
// at the end, after the build's warm-up runs; the bindings read it after this module
// has run.
export const runner = { run: null };

// Make every standard class of the code's realm now, into the snapshot: SpiderMonkey
// makes a class on its first use in a realm, and each run starts from the snapshot, so a
// run otherwise made again each class it touched, a large part of a trivial run with
// the bindings' realm (bindings/resolve_classes.js does the same there, and says more).
for (const name of Object.getOwnPropertyNames(globalThis)) {
  try {
    void globalThis[name];
  } catch {
    // an accessor that refuses at build time: nothing to make
  }
}
// SavedFrame is not a global; the first captured stack makes it.
void (function captureStack() { return new Error(); })();

// After the loop above, which would have installed it: `Intl` and the toLocale*String
// methods install FormatJS's polyfills on their first use in a run (intl/lazy.js).
installIntlOnFirstUse(globalThis);

// Run code twice now, against a stand-in host, so that the snapshot holds the compiled
// code of a run's path. SpiderMonkey compiles a function the first time it is called,
// and every run starts from the snapshot, so every run compiled again each function it
// called: core.js's run, tool-call, JSON and error paths (docs/performance.md, "Session
// 9", has the instruction counts before and after). The stand-in's timers run on
// microtasks, which the build drains (the engine refuses timers before a request), and
// its tool echoes its arguments. The globals these runs define are replaced by the
// runner's own, made after them (at the end).
{
  const later = (fn) => {
    Promise.resolve().then(fn);
    return 0;
  };
  // Calls started together (Promise.all's) end at the first wait, in the order started.
  let started = [];
  const host = {
    call: (name, argsJson) => argsJson,
    startCall(name, argsJson) {
      started.push({ id: started.length + 1, answer: { tag: 'ok', val: argsJson } });
      return started.length;
    },
    awaitAny() {
      const finished = started;
      started = [];
      return finished;
    },
    listTools: () => [{ name: 'echo', description: 'echoes its arguments', argsSchema: '{}' }],
  };
  const timers = { setTimeout: later, clearTimeout() {}, setInterval: later, clearInterval() {} };
  // it defines the import() stand-in again: the same one
  const warmUp = createRunner({ modules, host, timers });
  const value = await warmUp(`let t = 0;
for (let i = 0; i < 3; i++) t += (await tools.echo({a: i, b: [true, null, 'é']})).a;
return [t, listTools().length, {b: null}]`, '{"x": 1}');
  const error = await warmUp('throw new TypeError("warm")', 'null');
  // Code without `await` settles the run on one of two paths: a plain value's, an object's.
  const plain = await warmUp('return 1 + 1', 'null');
  // Code that names Promise or import goes through its rewriting first (deferToolCalls,
  // hideDynamicImport): compiled now too. It declares nothing: this runner's later runs
  // are steps, which would keep what they declare on the snapshot's global object.
  const fanOut = await warmUp(`return (await Promise.all([tools.echo({a: 1}), tools.echo({a: 2})]))
  .reduce((sum, r) => sum + r.a, 0) + typeof (await import('node:fs')).readFileSync`, 'null');
  const object = await warmUp('return {a: [1]}', 'null');
  if (value.tag !== 'ok' || value.val !== '[3,1,{"b":null}]' || error.val?.tag !== 'exception'
    || plain.val !== '2' || object.val !== '{"a":[1]}' || fanOut.val !== '"3function"') {
    throw new Error(`the build's warm-up runs failed: ${JSON.stringify([value, error, plain, object, fanOut])}`);
  }
  // And a session's step that keeps names (its tokenizer, the keep line, keepBindings),
  // on a runner whose names go to an object of its own rather than onto the snapshot's
  // global object.
  const stepWarmUp = createRunner({ modules, host, timers, global: {} });
  await stepWarmUp('', 'null');
  const step = await stepWarmUp(`let [a, {b}] = [1, {b: 2}]; const s = \`x\${a}\`; var r = /re/g;
function f() { return 1.5e+3 >>> 0 } class K {}
return a + b`, 'null');
  if (step.tag !== 'ok' || step.val !== '3') {
    throw new Error(`the build's warm-up step failed: ${JSON.stringify(step)}`);
  }
}

// Last, after the warm-up runs, whose runner defined the code's globals (tools, the
// timers, ...) with its stand-ins: this one defines its own, into the snapshot, and a run
// then finds them in place rather than defining them again (createRunner's `provide`).
runner.run = createRunner({ host: { call, listTools, startCall, awaitAny }, timers, modules });
