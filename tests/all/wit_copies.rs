//! The published crates carry the WIT package inside them: `host/wit/` (the host's
//! bindings) and `guest-sdk/wit/` (the guest SDK's), because a crate on a registry cannot
//! read `../wit`. The top-level `wit/` stays the one the repository's tools and docs
//! name (componentize-py, componentize-js, docs/guests.md); these copies must equal it
//! byte for byte.
//!
//! Why copies checked by a test rather than copies made by xtask: the crates build with
//! plain cargo (a path dependency, `cargo package`, an outside crate) with no xtask step
//! before them, so the copy has to be in the tree; a test makes an edit to one tree
//! without the others fail in the first `cargo test`, where an xtask step could be
//! skipped. Symlinks would travel badly (Windows checkouts, and cargo packages them as
//! files anyway).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every file under `dir`, by its path relative to `dir`, with its bytes.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, files: &mut BTreeMap<PathBuf, Vec<u8>>) {
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a readable directory entry").path();
            if path.is_dir() {
                walk(root, &path, files);
            } else {
                let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
                files.insert(path.strip_prefix(root).expect("under the root").to_owned(), bytes);
            }
        }
    }
    let mut files = BTreeMap::new();
    walk(dir, dir, &mut files);
    files
}

#[test]
fn the_crates_carry_the_repositorys_wit_byte_for_byte() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let source = tree(&root.join("wit"));
    assert!(source.contains_key(Path::new("sandbox.wit")), "wit/sandbox.wit is missing");
    for copy in ["host/wit", "guest-sdk/wit"] {
        let copied = tree(&root.join(copy));
        let names = |t: &BTreeMap<PathBuf, Vec<u8>>| t.keys().cloned().collect::<Vec<_>>();
        assert_eq!(names(&copied), names(&source), "{copy}/ must hold the files of wit/: copy wit/ over it");
        for (name, bytes) in &source {
            assert!(
                copied[name] == *bytes,
                "{copy}/{} differs from wit/{}: copy wit/ over {copy}/ (`cp -r wit/. {copy}/`)",
                name.display(),
                name.display()
            );
        }
    }
}
