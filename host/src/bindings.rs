//! Host bindings of the `wasmbox:sandbox` WIT world, generated at compile time.

wasmtime::component::bindgen!({
    world: "code-runner",
    // The crate's own copy of wit/, so the packaged crate builds (tests/all/wit_copies.rs).
    path: "wit",
    imports: { default: async },
    exports: { default: async },
});
