//! Lists the Rust guests (the folders of guests/rust) for the tests: `custom_guests.rs`
//! names one test function per guest through `foreach_rust_guest!`, so a guest without
//! a test is a compile error, not a silent gap (as wasmtime's test-programs do).

use std::path::Path;

fn main() {
    // Read at run time, not compiled in: a build-script binary reused from another
    // checkout sharing the target dir must still look in this one.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let guests_dir = Path::new(&manifest_dir).join("../guests/rust");
    println!("cargo:rerun-if-changed={}", guests_dir.display());
    let mut names: Vec<String> = std::fs::read_dir(&guests_dir)
        .expect("guests/rust exists")
        .map(|entry| entry.expect("readable guests/rust").path())
        .filter(|path| path.join("Cargo.toml").is_file())
        .map(|path| path.file_name().expect("a folder name").to_string_lossy().into_owned())
        .collect();
    names.sort();
    let calls: String = names.iter().map(|name| format!("        $m!({name});\n")).collect();
    let source = format!(
        "/// Calls `$m!(name)` for every Rust guest (a folder of guests/rust).\n\
         macro_rules! foreach_rust_guest {{\n    ($m:ident) => {{\n{calls}    }};\n}}\n"
    );
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("rust_guests.rs");
    std::fs::write(out, source).expect("OUT_DIR is writable");
}
