//! Compiles the guest component in when `cargo xtask guests` has written it beside this
//! crate's Cargo.toml; a checkout where it has not run still builds, without the guest.
//! The same file serves every bundle crate: the guest's name is the package name's
//! last part (`wasmbox-guest-python` bundles `python.wasm.zst`).

use std::path::Path;

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let package = std::env::var("CARGO_PKG_NAME").expect("cargo sets CARGO_PKG_NAME");
    let name = package.strip_prefix("wasmbox-guest-").expect("a bundle crate is named wasmbox-guest-<name>");
    // The folder rather than the two files: cargo treats a watched file that does not
    // exist as changed, and would run this script, and rebuild everything that depends
    // on this crate, on every build of a checkout without the guest.
    println!("cargo::rerun-if-changed={dir}");
    println!("cargo::rustc-check-cfg=cfg(wasmbox_guest_bundled)");
    let component = Path::new(&dir).join(format!("{name}.wasm.zst"));
    let manifest = Path::new(&dir).join(format!("{name}.wasm.json"));
    match (component.is_file(), manifest.is_file()) {
        (true, true) => {
            println!("cargo::rustc-cfg=wasmbox_guest_bundled");
            println!("cargo::rustc-env=WASMBOX_GUEST_COMPONENT={}", component.display());
            println!("cargo::rustc-env=WASMBOX_GUEST_MANIFEST={}", manifest.display());
        }
        // `cargo package` writes Cargo.toml.orig: a published bundle crate without its
        // guest would build a wasmbox that cannot run the language.
        (false, false) if Path::new(&dir).join("Cargo.toml.orig").is_file() => {
            panic!("this package of {package} was published without {name}.wasm.zst")
        }
        (false, false) => {}
        _ => panic!(
            "{dir} holds only one of {name}.wasm.zst and {name}.wasm.json, which are written together: \
             run `cargo xtask guests` again"
        ),
    }
}
