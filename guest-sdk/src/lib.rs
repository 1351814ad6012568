//! The Rust guest SDK for the `wasmbox:sandbox` WIT world.
//!
//! Not written yet: custom Rust guests are the subject of a later milestone. Until then
//! a guest can be built against `wit/` directly with `wit-bindgen`.
#![deny(missing_docs)]
