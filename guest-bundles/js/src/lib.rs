//! One of [wasmbox](https://crates.io/crates/wasmbox)'s built-in guests, as wasmbox reads
//! it: the WebAssembly component, zstd-compressed, and the manifest `cargo xtask guests`
//! wrote with it. Nothing but wasmbox needs this crate; it is a crate of its own because
//! crates.io limits the size of one crate.
//!
//! The same file serves every bundle crate (see `build.rs`).

#![no_std]
#![deny(missing_docs)]

/// A compressed guest component and what was recorded when it was built.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Bundle {
    /// The component, compressed with zstd.
    pub compressed: &'static [u8],
    /// JSON: the decompressed component's SHA-256 (hex) and length, the versions of
    /// the interpreter and the tool that built it, and the WIT package it targets.
    pub manifest: &'static str,
}

/// The guest, or `None` in a build from a checkout where `cargo xtask guests` had not
/// written it yet.
#[cfg(wasmbox_guest_bundled)]
pub const BUNDLE: Option<Bundle> = Some(Bundle {
    compressed: include_bytes!(env!("WASMBOX_GUEST_COMPONENT")),
    manifest: include_str!(env!("WASMBOX_GUEST_MANIFEST")),
});

/// The guest, or `None` in a build from a checkout where `cargo xtask guests` had not
/// written it yet.
#[cfg(not(wasmbox_guest_bundled))]
pub const BUNDLE: Option<Bundle> = None;
