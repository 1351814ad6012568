//! A component's core instances importing each other's functions and globals, as
//! componentize-py's dynamically linked CPython does thousands of times per
//! instantiation. The vendored wasmtime resolves those imports straight to the
//! `VMFunctionImport`/`VMGlobalImport` the importer stores, without a `Func` or
//! `Global` handle and without writing the exporter's own funcref (vendor/README.md,
//! "Imports between a component's core instances"). These tests pin what an importer
//! sees: a defined function and a mutable global of another instance, the same items
//! re-exported by an instance that imported them, a function passed through
//! `call_indirect` after the wiring, and the same results from a fresh instance in a
//! reused pool slot; and a host function re-exported by an instance that imported
//! it. The vendored wasmtime also plans those imports once per component ("The import
//! plan"); every debug build checks each planned or directly resolved import against
//! the stock path's.

use super::{Engine, EngineConfig};
use wasmtime::component::{Component, Linker};
use wasmtime::Store;

/// `$a` defines a function, a mutable global and a function that bumps it; `$b`
/// imports those and re-exports them (so for `$c` they are `$b`'s imports); `$c`
/// imports some from each and puts one in its own table.
const LINKED: &str = r#"(component
    (core module $a
        (global $g (export "g") (mut i32) (i32.const 5))
        (func (export "seven") (result i32) i32.const 7)
        (func (export "bump") global.get $g i32.const 1 i32.add global.set $g))
    (core instance $a (instantiate $a))
    (core module $b
        (import "a" "seven" (func $seven (result i32)))
        (import "a" "g" (global $g (mut i32)))
        (export "seven" (func $seven))
        (export "g" (global $g)))
    (core instance $b (instantiate $b (with "a" (instance $a))))
    (core module $c
        (type $ret (func (result i32)))
        (import "b" "seven" (func $seven (result i32)))
        (import "b" "g" (global $g (mut i32)))
        (import "a" "bump" (func $bump))
        (import "a" "seven" (func $seven_direct (result i32)))
        (table 1 funcref)
        (elem (i32.const 0) func $seven)
        (func (export "run") (result i32)
            call $bump
            call $seven
            global.get $g
            i32.add
            i32.const 0
            call_indirect (type $ret)
            i32.add
            call $seven_direct
            i32.add)
        (func (export "set") (param i32) local.get 0 global.set $g))
    (core instance $c (instantiate $c (with "b" (instance $b)) (with "a" (instance $a))))
    (func (export "run") (result u32) (canon lift (core func $c "run")))
    (func (export "set") (param "value" u32) (canon lift (core func $c "set"))))"#;

fn engine() -> (Engine, tempfile::TempDir) {
    let cache = tempfile::tempdir().unwrap();
    let config =
        EngineConfig { cache_dir: cache.path().to_path_buf(), prepared_instances: 0, ..EngineConfig::default() };
    (Engine::new(config).unwrap(), cache)
}

/// Instantiates `component` in a store of its own and calls its `run` export after
/// setting the shared global through `set` (when given).
fn run(engine: &wasmtime::Engine, component: &Component, set: Option<u32>) -> u32 {
    let mut store = Store::new(engine, ());
    store.set_epoch_deadline(u64::MAX / 2);
    let instance = Linker::new(engine).instantiate(&mut store, component).unwrap();
    if let Some(value) = set {
        let set = instance.get_typed_func::<(u32,), ()>(&mut store, "set").unwrap();
        set.call(&mut store, (value,)).unwrap();
    }
    let run = instance.get_typed_func::<(), (u32,)>(&mut store, "run").unwrap();
    run.call(&mut store, ()).unwrap().0
}

#[test]
fn core_instances_see_each_others_functions_and_globals_directly_and_re_exported() {
    let (engine, _cache) = engine();
    let engine = engine.wasmtime().clone();
    let component = Component::new(&engine, LINKED).unwrap();
    // bump makes the global 6 in `$a`; `$c` sees it through `$b`'s re-export:
    // 7 (re-exported) + 6 (global) + 7 (through the table) + 7 (direct).
    assert_eq!(run(&engine, &component, None), 27);
    // A write through the importer's view reaches the definition that bump reads.
    assert_eq!(run(&engine, &component, Some(100)), 7 + 101 + 7 + 7);
    // Fresh instances, in slots the runs above used, start from the definitions again.
    for _ in 0..3 {
        assert_eq!(run(&engine, &component, None), 27);
    }
}

/// A host function lowered into a core function (a trampoline, which the component's
/// import plan leaves to instantiation) and re-exported by `$b`: `$c`'s import of it
/// is `$b`'s own import record.
const REEXPORTED_HOST_FUNCTION: &str = r#"(component
    (import "double" (func $double (param "x" u32) (result u32)))
    (core func $double_core (canon lower (func $double)))
    (core instance $host (export "double" (func $double_core)))
    (core module $b
        (import "host" "double" (func $d (param i32) (result i32)))
        (export "double" (func $d)))
    (core instance $b (instantiate $b (with "host" (instance $host))))
    (core module $c
        (import "b" "double" (func $d (param i32) (result i32)))
        (func (export "run") (result i32) i32.const 21 call $d))
    (core instance $c (instantiate $c (with "b" (instance $b))))
    (func (export "run") (result u32) (canon lift (core func $c "run"))))"#;

#[test]
fn a_re_exported_host_function_reaches_the_host() {
    let (engine, _cache) = engine();
    let engine = engine.wasmtime().clone();
    let component = Component::new(&engine, REEXPORTED_HOST_FUNCTION).unwrap();
    let mut linker = Linker::new(&engine);
    linker.root().func_wrap("double", |_, (x,): (u32,)| Ok((x * 2,))).unwrap();
    for _ in 0..3 {
        let mut store = Store::new(&engine, ());
        store.set_epoch_deadline(u64::MAX / 2);
        let instance = linker.instantiate(&mut store, &component).unwrap();
        let run = instance.get_typed_func::<(), (u32,)>(&mut store, "run").unwrap();
        assert_eq!(run.call(&mut store, ()).unwrap().0, 42);
    }
}
