#!/usr/bin/env node
// Builds the wasmbox JavaScript guest component with componentize-js.
//
//   npm ci --prefix guests/js && node guests/js/build.mjs target/guests/js.wasm
//
// The source is runner.js (+ core.js); the world is `code-runner` from ../../wit. The
// generated bindings get wasmbox's binding of `tools.call` (bindings/patch.mjs). `Intl`
// comes from FormatJS's polyfills and the locale data that intl/bundle.mjs gathers first.
//
// package.json pins @bytecodealliance/preview2-shim 0.17.9 next to componentize-js
// 0.23.0: componentize-js runs its WIT splicer on that shim without declaring it, and
// from 0.25 the shim no longer pre-opens "/", so the splicer could not read the WIT files.
import { componentize, version } from '@bytecodealliance/componentize-js';
import { mkdir, writeFile } from 'node:fs/promises';
import { writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GENERATED, patchBindings } from './bindings/patch.mjs';
import { bundleIntl, OUTPUT as INTL_OUTPUT } from './intl/bundle.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const outArg = process.argv[2];
if (!outArg) {
  console.error('usage: node build.mjs <output.wasm>');
  process.exit(2);
}
const out = resolve(outArg); // against the caller's directory, before the chdir below

// componentize() takes the bindings from this object's spliceBindings, between
// generating them and snapshotting the engine. It is the module componentize.js imports
// (the same file, so the same instance); its package exports only componentize.js.
const { splicer } = await import(new URL(
  './node_modules/@bytecodealliance/componentize-js/lib/spidermonkey-embedding-splicer.js', import.meta.url,
));
const spliceBindings = splicer.spliceBindings;
let patched = false;
splicer.spliceBindings = (...args) => {
  const spliced = spliceBindings(...args);
  if (spliced.jsBindings !== GENERATED) {
    const unexpected = `${out}.bindings.js`;
    writeFileSync(unexpected, spliced.jsBindings);
    console.error(`build.mjs: the bindings componentize-js generated are in ${unexpected}`);
  }
  patched = true;
  return { ...spliced, jsBindings: patchBindings(spliced.jsBindings) };
};

// componentize-js maps the current directory into the build-time engine (wizer) when the
// source lies inside it; building from here maps only guests/js and makes the module
// names in stack traces ("core.js") independent of where the build was started.
process.chdir(here);

const started = Date.now();
const intlBytes = await bundleIntl(here);
console.log(`intl/bundle.mjs: wrote ${INTL_OUTPUT} (${intlBytes} bytes)`);
const { component } = await componentize({
  sourcePath: resolve(here, 'runner.js'),
  witPath: resolve(here, '../../wit'),
  worldName: 'code-runner',
  // The default build also imports wasi:http (fetch, fetch-event), which the host does
  // not provide. stdio, random and clocks stay: console, Math.random/crypto, timers.
  disableFeatures: ['http', 'fetch-event'],
});
if (!patched) {
  throw new Error(`componentize-js ${version} did not take its bindings from splicer.spliceBindings: `
    + 'the tools.call binding was not replaced (see bindings/patch.mjs)');
}
await mkdir(dirname(out), { recursive: true });
await writeFile(out, component);
const seconds = ((Date.now() - started) / 1000).toFixed(1);
const mib = (component.length / 1048576).toFixed(1);
console.log(`componentize-js ${version}: wrote ${out} (${mib} MiB, ${component.length} bytes) in ${seconds} s`);
