//! The guest's in-memory filesystem, from Python: `/input`, `/output`, `/tmp`, the quota
//! and the file cap, and every way out that must stay shut.

use serde_json::{json, Value};
use wasmbox::{CancelToken, InputFiles, Limits, Outcome, Status};

use crate::support::{javascript, sandbox, value};

async fn run_files(code: &str, files: &InputFiles, limits: Limits) -> Outcome {
    sandbox().limits(limits).run_with_files(code, &Value::Null, files, &CancelToken::new()).await
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

#[tokio::test]
async fn input_files_are_read_and_output_files_come_back() {
    let code = r#"
import csv
rows = list(csv.DictReader(open('/input/data.csv')))
total = sum(int(r['n']) for r in rows)
with open('/output/total.txt', 'w') as f:
    f.write(f'total={total}\n')
import os
os.makedirs('/output/deep/er', exist_ok=True)
open('/output/deep/er/raw.bin', 'wb').write(open('/input/sub/blob.bin', 'rb').read()[::-1])
sorted(os.listdir('/input')), sorted(os.listdir('/'))
"#;
    let outcome = run_files(code, &inputs(), Limits::default()).await;
    assert_eq!(value(&outcome), json!([["data.csv", "sub"], ["input", "output", "tmp"]]));
    let names: Vec<&str> = outcome.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["deep/er/raw.bin", "total.txt"]);
    assert_eq!(outcome.files[0].bytes, [254, 1, 255, 0]);
    assert_eq!(outcome.files[0].text(), None);
    assert_eq!(outcome.files[1].text(), Some("total=7\n"));
    // In JSON: text when UTF-8, base64 otherwise, and back.
    let json = serde_json::to_value(&outcome).unwrap();
    assert_eq!(json["files"][0], json!({"name": "deep/er/raw.bin", "base64": "/gH/AA=="}));
    assert_eq!(json["files"][1], json!({"name": "total.txt", "text": "total=7\n"}));
    let back: Outcome = serde_json::from_value(json).unwrap();
    assert_eq!(back.files, outcome.files);
}

#[tokio::test]
async fn the_stdlib_file_modules_work() {
    let code = r#"
import tempfile, pathlib, shutil, glob, os
with tempfile.TemporaryDirectory() as d:
    p = pathlib.Path(d) / 'a.txt'
    p.write_text('hello')
    shutil.copy(p, pathlib.Path(d) / 'b.txt')
    found = sorted(os.path.basename(x) for x in glob.glob(d + '/*.txt'))
    copied = (pathlib.Path(d) / 'b.txt').read_text()
with tempfile.NamedTemporaryFile('w+', suffix='.log') as f:
    f.write('x' * 10); f.flush(); f.seek(0); named = f.read()
shutil.copytree('/input', '/output/copy')
gone = not os.path.exists(d)
(found, copied, named, gone, tempfile.gettempdir(), sorted(pathlib.Path('/output').rglob('*.csv')) and 'csv')
"#;
    let outcome = run_files(code, &inputs(), Limits::default()).await;
    assert_eq!(value(&outcome), json!([["a.txt", "b.txt"], "hello", "xxxxxxxxxx", true, "/tmp", "csv"]));
    let names: Vec<&str> = outcome.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["copy/data.csv", "copy/sub/blob.bin"]);
}

#[tokio::test]
async fn relative_paths_resolve_from_the_root_and_chdir_works() {
    let code = r#"
import os
first = open('input/data.csv').readline().strip()
os.chdir('/tmp')
open('rel.txt', 'w').write('r')
(first, os.getcwd(), os.listdir('/tmp'), open('/tmp/rel.txt').read())
"#;
    let outcome = run_files(code, &inputs(), Limits::default()).await;
    assert_eq!(value(&outcome), json!(["name,n", "/tmp", ["rel.txt"], "r"]));
}

#[tokio::test]
async fn input_and_the_root_are_read_only() {
    let code = r#"
import errno, os
def err(f):
    try:
        f()
        return 'ok'
    except OSError as e:
        return errno.errorcode[e.errno]
(
    err(lambda: open('/input/data.csv', 'w')),
    err(lambda: open('/input/data.csv', 'a')),
    err(lambda: open('/input/new.txt', 'w')),
    err(lambda: os.remove('/input/data.csv')),
    err(lambda: os.rename('/input/data.csv', '/tmp/x')),
    err(lambda: os.mkdir('/input/d')),
    err(lambda: open('/new.txt', 'w')),
    err(lambda: os.rmdir('/tmp')),
    err(lambda: os.rename('/output', '/tmp/o')),
    open('/input/data.csv').read(4),
)
"#;
    let outcome = run_files(code, &inputs(), Limits::default()).await;
    assert_eq!(
        value(&outcome),
        json!(["EROFS", "EROFS", "EROFS", "EROFS", "EROFS", "EROFS", "EROFS", "EROFS", "EROFS", "name"])
    );
}

#[tokio::test]
async fn paths_outside_the_mounts_find_nothing_of_the_host() {
    let code = r#"
import errno, os
def err(f):
    try:
        f()
        return 'ok'
    except OSError as e:
        return errno.errorcode[e.errno]
(
    err(lambda: open('/etc/passwd').read()),
    err(lambda: open('/tmp/../../../etc/passwd').read()),
    err(lambda: open('../../etc/passwd').read()),
    err(lambda: os.listdir('/..')),
    err(lambda: os.listdir('/tmp/../..')),
    err(lambda: open('/proc/self/environ').read()),
    err(lambda: os.stat('/usr')),
    err(lambda: os.listdir('/input/../output')),
)
"#;
    let outcome = run_files(code, &inputs(), Limits::default()).await;
    // Absolute paths resolve inside the tree, where no host name exists (ENOENT); wasi-libc
    // hands a `..` to the host as it is, and one that climbs above `/` is refused (EPERM).
    let expected = ["ENOENT", "EPERM", "EPERM", "EPERM", "EPERM", "ENOENT", "ENOENT", "ok"];
    assert_eq!(value(&outcome), json!(expected));
}

#[tokio::test]
async fn symlinks_and_hard_links_are_refused() {
    let code = r#"
import errno, os
def err(f):
    try:
        f()
        return 'ok'
    except OSError as e:
        return errno.errorcode[e.errno]
open('/tmp/a', 'w').write('a')
(
    err(lambda: os.symlink('/etc/passwd', '/tmp/l')),
    err(lambda: os.symlink('a', '/tmp/l2')),
    err(lambda: os.symlink('/input/data.csv', '/output/alias')),
    err(lambda: os.link('/tmp/a', '/tmp/b')),
    err(lambda: os.link('/input/data.csv', '/output/alias2')),
    err(lambda: os.readlink('/tmp/a')),
    sorted(os.listdir('/tmp')),
    os.listdir('/output'),
)
"#;
    let outcome = run_files(code, &inputs(), Limits::default()).await;
    assert_eq!(value(&outcome), json!(["EPERM", "EPERM", "EPERM", "EPERM", "EPERM", "EINVAL", ["a"], []]));
    assert!(outcome.files.is_empty());
}

/// `os.pwrite`, creating a file or a directory past a cap: ENOSPC, as on Linux (WASI
/// numbers it 51: `OSError: [Errno 51] No space left on device`). A buffered `write` goes
/// through an output stream instead, and the CPython guest's wasi-libc reports every
/// failed stream write as EIO without asking the host which error it was (its component
/// imports no `filesystem-error-code`): the write fails, with the wrong errno.
#[tokio::test]
async fn the_byte_quota_refuses_writes_past_it() {
    let limits = Limits { max_fs_bytes: 10_000, ..Limits::default() };
    let code = r#"
import errno, os
results = []
fd = os.open('/tmp/p', os.O_CREAT | os.O_WRONLY)
try:
    os.pwrite(fd, b'y' * 20_000, 0)
except OSError as e:
    results.append(str(e))
try:
    os.pwrite(fd, b'z', 50_000)
except OSError as e:
    results.append(errno.errorcode[e.errno])
os.pwrite(fd, b'w' * 100, 0)
os.close(fd)
try:
    with open('/tmp/big', 'wb') as f:
        f.write(b'x' * 20_000)
except OSError as e:
    results.append(errno.errorcode[e.errno])
os.remove('/tmp/big')
os.remove('/tmp/p')
open('/output/fits', 'wb').write(b'v' * 10_000)
results
"#;
    let outcome = run_files(code, &InputFiles::new(), limits).await;
    assert_eq!(value(&outcome), json!(["[Errno 51] No space left on device", "ENOSPC", "EIO"]));
    assert_eq!(outcome.files.len(), 1);
    assert_eq!(outcome.files[0].bytes.len(), 10_000, "freed bytes are free again");
}

#[tokio::test]
async fn a_full_quota_is_an_ordinary_oserror_not_a_breach() {
    let limits = Limits { max_fs_bytes: 1_000, ..Limits::default() };
    let code = "import os\nfd = os.open('/tmp/x', os.O_CREAT | os.O_WRONLY)\nos.pwrite(fd, b'a' * 5000, 0)";
    let outcome = run_files(code, &InputFiles::new(), limits.clone()).await;
    assert_eq!(outcome.status, Status::Error);
    let error = outcome.error.unwrap();
    assert_eq!(error.kind, "OSError");
    assert!(error.message.contains("No space left on device"), "{}", error.message);
    let caught = format!("try:\n    {}\nexcept OSError:\n    pass\n'recovered'", code.replace('\n', "\n    "));
    assert_eq!(value(&run_files(&caught, &InputFiles::new(), limits).await), json!("recovered"));
}

#[tokio::test]
async fn the_file_cap_counts_files_and_directories() {
    let limits = Limits { max_fs_files: 5, ..Limits::default() };
    let code = r#"
import os
made = 0
try:
    os.mkdir('/tmp/d'); made += 1
    for i in range(10):
        open(f'/tmp/d/{i}', 'w').close(); made += 1
except OSError as e:
    err = e.errno
os.remove('/tmp/d/0')
open('/output/again', 'w').close()
(made, err)
"#;
    let outcome = run_files(code, &InputFiles::new(), limits).await;
    assert_eq!(value(&outcome), json!([5, 51]), "ENOSPC is 51 in WASI");
    assert_eq!(outcome.files.len(), 1);
}

#[tokio::test]
async fn input_files_do_not_count_against_the_quota() {
    let mut files = InputFiles::new();
    files.insert("big", vec![7u8; 50_000]).unwrap();
    let limits = Limits { max_fs_bytes: 1_000, max_fs_files: 1, ..Limits::default() };
    let code = "import os\nn = len(open('/input/big', 'rb').read())\nopen('/output/o', 'w').write('k')\nn";
    let outcome = run_files(code, &files, limits).await;
    assert_eq!(value(&outcome), json!(50_000));
    assert_eq!(outcome.files[0].text(), Some("k"));
}

#[tokio::test]
async fn each_run_starts_with_an_empty_filesystem() {
    let files = InputFiles::new();
    let first =
        run_files("open('/tmp/left', 'w').write('x')\nopen('/output/o', 'w').write('y')", &files, Limits::default())
            .await;
    assert!(first.is_ok());
    assert_eq!(first.files.len(), 1);
    let second = run("import os\n(os.listdir('/tmp'), os.listdir('/output'), os.listdir('/input'))").await;
    assert_eq!(value(&second), json!([[], [], []]));
    assert!(second.files.is_empty());
}

#[tokio::test]
async fn output_files_come_back_when_the_run_raises() {
    let outcome = run("open('/output/partial.txt', 'w').write('so far')\n1/0").await;
    assert_eq!(outcome.status, Status::Error);
    assert_eq!(outcome.files.len(), 1);
    assert_eq!(outcome.files[0].text(), Some("so far"));
}

#[tokio::test]
async fn a_javascript_run_has_the_same_filesystem_and_does_not_break() {
    // StarlingMonkey has no file API for scripts; its libc still sees the in-memory tree.
    let sandbox = wasmbox::Sandbox::new(javascript(), wasmbox::Tools::new());
    let outcome = sandbox.run_with_files("return 1 + 1", &Value::Null, &inputs(), &CancelToken::new()).await;
    assert_eq!(value(&outcome), json!(2));
    assert!(outcome.files.is_empty());
}
