//! The run's in-memory files from JavaScript: the `fs` global (guests/js/fs.js) over
//! `wasmbox:sandbox/files`, the same `/input`, `/output` and `/tmp`, quota, file cap and
//! path rules as Python's (files.rs), with Node's function and error shapes.

use serde_json::{json, Value};
use wasmbox::{CancelToken, InputFiles, Limits, Outcome, Sandbox, Status, Tools};

use crate::support::{javascript, value};

async fn run_files(code: &str, files: &InputFiles, limits: Limits) -> Outcome {
    let sandbox = Sandbox::new(javascript(), Tools::new()).limits(limits);
    sandbox.run_with_files(code, &Value::Null, files, &CancelToken::new()).await
}

async fn run(code: &str) -> Outcome {
    run_files(code, &InputFiles::new(), Limits::default()).await
}

fn inputs() -> InputFiles {
    let mut files = InputFiles::new();
    files.insert("data.csv", b"name,n\nada,3\ngrace,4\n".to_vec()).unwrap();
    files.insert("sub/blob.bin", vec![0u8, 255, 1, 254]).unwrap();
    files
}

/// `err(f)`: the `code` of what `f` throws, or `'ok'`.
const ERR: &str = "const err = (f) => { try { f(); return 'ok'; } catch (e) { return e.code ?? String(e); } };\n";

#[tokio::test]
async fn input_files_are_read_and_output_files_come_back() {
    let code = r#"
const rows = fs.readFileSync('/input/data.csv', 'utf8').trim().split('\n').slice(1);
const total = rows.reduce((sum, row) => sum + Number(row.split(',')[1]), 0);
fs.writeFileSync('/output/total.txt', `total=${total}\n`);
fs.mkdirSync('/output/deep/er', { recursive: true });
const blob = fs.readFileSync('/input/sub/blob.bin');
fs.writeFileSync('/output/deep/er/raw.bin', blob.slice().reverse());
return [fs.readdirSync('/input'), fs.readdirSync('/'), blob instanceof Uint8Array, Array.from(blob)];
"#;
    let outcome = run_files(code, &inputs(), Limits::default()).await;
    assert_eq!(value(&outcome), json!([["data.csv", "sub"], ["input", "output", "tmp"], true, [0, 255, 1, 254]]));
    let names: Vec<&str> = outcome.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["deep/er/raw.bin", "total.txt"]);
    assert_eq!(outcome.files[0].bytes, [254, 1, 255, 0]);
    assert_eq!(outcome.files[1].text(), Some("total=7\n"));
}

#[tokio::test]
async fn the_node_functions_work_on_tmp_with_their_node_shapes() {
    let code = r#"
fs.writeFileSync('/tmp/a.txt', 'héllo');
fs.appendFileSync('/tmp/a.txt', ' world', 'utf8');
fs.writeFileSync('/tmp/b.bin', new Uint16Array([0x0201, 0x0403]));
const st = fs.statSync('/tmp/a.txt');
const dir = fs.statSync('/tmp');
fs.mkdirSync('/tmp/d/e', { recursive: true });
fs.writeFileSync('/tmp/d/e/f.txt', 'deep', { flag: 'w' });
const listed = fs.readdirSync('/tmp', { recursive: true });
const typed = fs.readdirSync('/tmp', { withFileTypes: true }).map((d) => [d.name, d.isDirectory(), d.isFile()]);
fs.renameSync('/tmp/a.txt', '/tmp/renamed.txt');
fs.copyFileSync('/tmp/renamed.txt', '/tmp/copy.txt');
const exclusive = err(() => fs.writeFileSync('/tmp/copy.txt', 'x', { flag: 'wx' }));
const notEmpty = err(() => fs.rmdirSync('/tmp/d'));
const isDir = err(() => fs.rmSync('/tmp/d'));
fs.rmSync('/tmp/d', { recursive: true });
fs.rmSync('/tmp/missing', { force: true });
fs.unlinkSync('/tmp/copy.txt');
const made = fs.mkdirSync('/tmp/x/y', { recursive: true });
const again = fs.mkdirSync('/tmp/x/y', { recursive: true }) === undefined;
const viaPromise = await fs.promises.readFile('/tmp/renamed.txt', { encoding: 'utf8' });
const viaCallback = await new Promise((resolve) => fs.readFile('/tmp/missing', (e, data) => resolve([e.code, data === undefined])));
await fs.promises.writeFile('relative.txt', 'r').catch((e) => e.code);
return {
  text: fs.readFileSync('/tmp/renamed.txt', 'utf8'),
  bytes: Array.from(fs.readFileSync('/tmp/b.bin')),
  encodings: [fs.readFileSync('/tmp/b.bin', 'hex'), fs.readFileSync('/tmp/b.bin', 'base64'),
    fs.readFileSync('/tmp/renamed.txt', { encoding: 'latin1' }).length],
  stat: [st.size, st.isFile(), st.isDirectory(), dir.isDirectory(), st.mtime instanceof Date, st.mtimeMs > 1.6e12],
  listed, typed, exclusive, notEmpty, isDir, made, again, viaPromise, viaCallback,
  exists: [fs.existsSync('/tmp/renamed.txt'), fs.existsSync('/tmp/a.txt'), fs.existsSync('tmp'), fs.existsSync(42)],
  tmp: fs.readdirSync('tmp'),
  relative: fs.readFileSync('input/data.csv', 'utf8').split('\n')[0],
  noEntry: fs.statSync('/tmp/nothing', { throwIfNoEntry: false }) === undefined,
};
"#;
    let outcome = run_files(&format!("{ERR}{code}"), &inputs(), Limits::default()).await;
    assert_eq!(
        value(&outcome),
        json!({
            "text": "héllo world",
            "bytes": [1, 2, 3, 4],
            "encodings": ["01020304", "AQIDBA==", 12],
            "stat": [12, true, false, true, true, true],
            "listed": ["a.txt", "b.bin", "d", "d/e", "d/e/f.txt"],
            "typed": [["a.txt", false, true], ["b.bin", false, true], ["d", true, false]],
            "exclusive": "EEXIST",
            "notEmpty": "ENOTEMPTY",
            "isDir": "ERR_FS_EISDIR",
            "made": "/tmp/x",
            "again": true,
            "viaPromise": "héllo world",
            "viaCallback": ["ENOENT", true],
            "exists": [true, false, true, false],
            "tmp": ["b.bin", "renamed.txt", "x"],
            "relative": "name,n",
            "noEntry": true,
        })
    );
    // `relative.txt` resolved from `/`, which is read-only: nothing was written.
    assert!(outcome.files.is_empty());
}

#[tokio::test]
async fn errors_carry_nodes_code_errno_syscall_and_message() {
    let code = r#"
const caught = (f) => { try { f(); } catch (e) { return [e.code, e.errno, e.syscall, e.path, e.message, e instanceof Error]; } };
return [
  caught(() => fs.readFileSync('/tmp/nope.txt')),
  caught(() => fs.writeFileSync('/input/data.csv', 'x')),
  caught(() => fs.readFileSync('/tmp')),
  caught(() => fs.mkdirSync('/tmp')),
  caught(() => fs.renameSync('/tmp/a', '/tmp/b')),
];
"#;
    let outcome = run_files(code, &inputs(), Limits::default()).await;
    assert_eq!(
        value(&outcome),
        json!([
            ["ENOENT", -2, "open", "/tmp/nope.txt", "ENOENT: no such file or directory, open '/tmp/nope.txt'", true],
            ["EROFS", -30, "open", "/input/data.csv", "EROFS: read-only file system, open '/input/data.csv'", true],
            ["EISDIR", -21, "read", "/tmp", "EISDIR: illegal operation on a directory, read '/tmp'", true],
            ["EEXIST", -17, "mkdir", "/tmp", "EEXIST: file already exists, mkdir '/tmp'", true],
            ["ENOENT", -2, "rename", "/tmp/a", "ENOENT: no such file or directory, rename '/tmp/a' -> '/tmp/b'", true],
        ])
    );
    // Uncaught, it ends the run as an exception with Node's message.
    let outcome = run("fs.readFileSync('/input/missing.csv', 'utf8')").await;
    assert_eq!(outcome.status, Status::Error);
    let error = outcome.error.unwrap();
    assert_eq!(error.kind, "Error");
    assert_eq!(error.message, "ENOENT: no such file or directory, open '/input/missing.csv'");
}

#[tokio::test]
async fn input_and_the_root_are_read_only() {
    let code = r#"
return [
  err(() => fs.writeFileSync('/input/data.csv', 'x')),
  err(() => fs.appendFileSync('/input/data.csv', 'x')),
  err(() => fs.writeFileSync('/input/new.txt', 'x')),
  err(() => fs.unlinkSync('/input/data.csv')),
  err(() => fs.renameSync('/input/data.csv', '/tmp/x')),
  err(() => fs.mkdirSync('/input/d')),
  err(() => fs.writeFileSync('/new.txt', 'x')),
  err(() => fs.rmdirSync('/tmp')),
  err(() => fs.renameSync('/output', '/tmp/o')),
  err(() => fs.rmSync('/input', { recursive: true })),
  fs.readFileSync('/input/data.csv', 'utf8').slice(0, 4),
];
"#;
    let outcome = run_files(&format!("{ERR}{code}"), &inputs(), Limits::default()).await;
    let expected = ["EROFS", "EROFS", "EROFS", "EROFS", "EROFS", "EROFS", "EROFS", "EROFS", "EROFS", "EROFS", "name"];
    assert_eq!(value(&outcome), json!(expected));
    assert!(outcome.files.is_empty());
}

#[tokio::test]
async fn paths_outside_the_mounts_find_nothing_of_the_host() {
    let code = r#"
return [
  err(() => fs.readFileSync('/etc/passwd')),
  err(() => fs.readFileSync('/tmp/../../../etc/passwd')),
  err(() => fs.readFileSync('../../etc/passwd')),
  err(() => fs.readdirSync('/..')),
  err(() => fs.readdirSync('/tmp/../..')),
  err(() => fs.readFileSync('/proc/self/environ')),
  err(() => fs.statSync('/usr')),
  err(() => fs.writeFileSync('/tmp/../../escape.txt', 'x')),
  err(() => fs.mkdirSync('/../x', { recursive: true })),
  err(() => fs.readFileSync('/tmp/a\0b')),
  err(() => fs.readdirSync('/input/../output')),
];
"#;
    let outcome = run_files(&format!("{ERR}{code}"), &inputs(), Limits::default()).await;
    // As from Python: absolute paths resolve inside the tree, where no host name exists
    // (ENOENT), and a `..` above `/` is refused (EPERM) rather than folded.
    let expected = ["ENOENT", "EPERM", "EPERM", "EPERM", "EPERM", "ENOENT", "ENOENT", "EPERM", "EPERM", "EINVAL", "ok"];
    assert_eq!(value(&outcome), json!(expected));
    assert!(outcome.files.is_empty());
}

#[tokio::test]
async fn tmp_is_scratch_and_each_run_starts_empty() {
    let first = run_files(
        "fs.writeFileSync('/tmp/left', 'x'); fs.writeFileSync('/output/o', 'y'); return fs.readFileSync('/tmp/left', 'utf8')",
        &inputs(),
        Limits::default(),
    )
    .await;
    assert_eq!(value(&first), json!("x"));
    let names: Vec<&str> = first.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["o"], "/tmp is not returned");
    let second = run("return [fs.readdirSync('/tmp'), fs.readdirSync('/output'), fs.readdirSync('/input')]").await;
    assert_eq!(value(&second), json!([[], [], []]));
    assert!(second.files.is_empty());
}

/// Past the quota the write fails with ENOSPC, stores nothing and leaves no new file; it
/// is an ordinary error the code may catch, not a breach.
#[tokio::test]
async fn the_byte_quota_refuses_writes_past_it_with_enospc() {
    let limits = Limits { max_fs_bytes: 10_000, ..Limits::default() };
    let code = r#"
const results = [];
try {
  fs.writeFileSync('/output/a', 'x'.repeat(20_000));
} catch (e) {
  results.push(e.code, e.errno, e.message, fs.existsSync('/output/a'));
}
fs.writeFileSync('/tmp/p', 'y'.repeat(6_000));
try {
  fs.appendFileSync('/tmp/p', 'z'.repeat(6_000));
} catch (e) {
  results.push(e.code, fs.statSync('/tmp/p').size);
}
try {
  fs.writeFileSync('/tmp/p', 'w'.repeat(12_000));
} catch (e) {
  results.push(e.code, fs.readFileSync('/tmp/p', 'utf8').slice(0, 1));
}
fs.unlinkSync('/tmp/p');
fs.writeFileSync('/output/fits', 'v'.repeat(10_000));
return results;
"#;
    let outcome = run_files(code, &InputFiles::new(), limits.clone()).await;
    assert_eq!(
        value(&outcome),
        json!([
            "ENOSPC",
            -28,
            "ENOSPC: no space left on device, write '/output/a'",
            false,
            "ENOSPC",
            6000,
            "ENOSPC",
            "y",
        ]),
    );
    assert_eq!(outcome.files.len(), 1);
    assert_eq!(outcome.files[0].bytes.len(), 10_000, "freed bytes are free again");

    let uncaught = run_files("fs.writeFileSync('/tmp/x', new Uint8Array(20_000))", &InputFiles::new(), limits).await;
    assert_eq!(uncaught.status, Status::Error);
    let error = uncaught.error.unwrap();
    assert_eq!(
        (error.kind.as_str(), error.message.as_str()),
        ("Error", "ENOSPC: no space left on device, write '/tmp/x'")
    );
}

#[tokio::test]
async fn the_file_cap_counts_files_and_directories() {
    let limits = Limits { max_fs_files: 5, ..Limits::default() };
    let code = r#"
let made = 0;
let code;
try {
  fs.mkdirSync('/tmp/d'); made += 1;
  for (let i = 0; i < 10; i++) { fs.writeFileSync(`/tmp/d/${i}`, ''); made += 1; }
} catch (e) {
  code = e.code;
}
fs.unlinkSync('/tmp/d/0');
fs.writeFileSync('/output/again', '');
return [made, code];
"#;
    let outcome = run_files(code, &InputFiles::new(), limits).await;
    assert_eq!(value(&outcome), json!([5, "ENOSPC"]));
    assert_eq!(outcome.files.len(), 1);
}

#[tokio::test]
async fn input_files_do_not_count_against_the_quota() {
    let mut files = InputFiles::new();
    files.insert("big", vec![7u8; 50_000]).unwrap();
    let limits = Limits { max_fs_bytes: 1_000, max_fs_files: 1, ..Limits::default() };
    let code = "const n = fs.readFileSync('/input/big').length; fs.writeFileSync('/output/o', 'k'); return n";
    let outcome = run_files(code, &files, limits).await;
    assert_eq!(value(&outcome), json!(50_000));
    assert_eq!(outcome.files[0].text(), Some("k"));
}

#[tokio::test]
async fn output_files_come_back_when_the_run_throws() {
    let outcome = run("fs.writeFileSync('/output/partial.txt', 'so far'); throw new Error('late')").await;
    assert_eq!(outcome.status, Status::Error);
    assert_eq!(outcome.files.len(), 1);
    assert_eq!(outcome.files[0].text(), Some("so far"));
}

/// Every run has `fs` and the three mounts, whether or not the host passed files.
#[tokio::test]
async fn a_run_without_files_still_sees_the_three_mounts() {
    let outcome = run("return [typeof fs, typeof fs.promises.readFile, fs.readdirSync('/')]").await;
    assert_eq!(value(&outcome), json!(["object", "function", ["input", "output", "tmp"]]));
}

/// Code written for Node loads `fs` as a module: `require('fs')`, `require('node:fs')`,
/// `require('fs/promises')` and `await import('node:fs')` give the `fs` global's object
/// (and its `promises`), over the same files; any other module is Node's
/// MODULE_NOT_FOUND (require) or a rejection (import).
#[tokio::test]
async fn require_and_import_give_fs() {
    let code = "const fs = require('fs');\n\
        const { readFileSync } = require('node:fs');\n\
        const fsp = require('node:fs/promises');\n\
        fs.writeFileSync('/output/a.txt', readFileSync('/input/data.csv', 'utf8').split('\\n')[1]);\n\
        const ns = await import('node:fs');\n\
        const { readFile } = await import('fs/promises');\n\
        let missing;\n\
        try { require('child_process'); } catch (e) { missing = [e.code, e instanceof Error, e.message.split('\\n')[0]]; }\n\
        let refused;\n\
        try { await import('node:path'); } catch (e) { refused = e.name; }\n\
        return [fs === globalThis.fs, fsp === fs.promises, ns.default === fs, ns.readFileSync === readFileSync,\n\
          await fsp.readFile('/output/a.txt', 'utf8'), await readFile('/output/a.txt', 'utf8'), missing, refused];";
    let outcome = run_files(code, &inputs(), Limits::default()).await;
    let missing = json!(["MODULE_NOT_FOUND", true, "Cannot find module 'child_process'"]);
    assert_eq!(value(&outcome), json!([true, true, true, true, "ada,3", "ada,3", missing, "TypeError"]));
}
