// `batch` in JavaScript: the worked example of docs/guests.md (the same guest exists in
// Rust, guests/rust/batch, and in Python, guests/examples/python_batch).
//
// The code is one tool call per line, `<tool> <JSON object of arguments>` (the
// arguments may be left out); blank lines and `#` comments are skipped. The run's value
// is the list of results.
//
// Built by `cargo xtask guests` with componentize-js (pinned in guests/js), which reads
// the world from wit/:
//
//   componentize-js batch.js --wit ../../../wit -n code-runner -d http fetch-event -o batch.wasm

import { call } from 'wasmbox:sandbox/tools@0.1.2';

// The exception kinds the built-in guests use for each call-error case.
const KINDS = {
  denied: 'ToolDenied',
  'budget-exhausted': 'ToolBudgetExhausted',
  'invalid-args': 'ToolInvalidArgs',
  failed: 'ToolFailed',
  timeout: 'ToolTimeout',
};

// `run` returns the WIT `result` as `{tag, val}`: an exception escaping it would trap
// the whole instance.
const failure = (tag, kind, message) => ({ tag: 'err', val: { tag, val: { kind, message, traceback: '' } } });

function runBatch(code) {
  const results = [];
  const lines = code.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (line === '' || line.startsWith('#')) continue;
    const [, name, rest] = /^(\S+)\s*(.*)$/.exec(line);
    const args = rest || '{}';
    try {
      JSON.parse(args);
    } catch (e) {
      return failure('syntax', 'SyntaxError', `line ${i + 1}: the arguments are not JSON (${e.message})`);
    }
    try {
      results.push(JSON.parse(call(name, args)));
    } catch (e) {
      // A refused or failed call throws an error whose payload is the call-error case.
      const { tag, val } = e.payload ?? { tag: 'failed', val: String(e) };
      return failure('exception', KINDS[tag] ?? 'ToolFailed', String(val));
    }
  }
  return { tag: 'ok', val: JSON.stringify(results) };
}

export const runner = {
  run(code, _inputJson) {
    try {
      return runBatch(code);
    } catch (e) {
      return failure('exception', 'Error', String(e));
    }
  },
};
