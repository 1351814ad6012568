//! Host bindings of the `wasmbox:sandbox` WIT world, generated at compile time.

wasmtime::component::bindgen!({
    world: "code-runner",
    path: "../wit",
    imports: { default: async },
    exports: { default: async },
});
