//! The engine's core modules whose element segments write to an *imported* table, as
//! every dynamically linked library of componentize-py's CPython does (its
//! `__table_base`). The vendored wasmtime applies those segments lazily: the range is
//! recorded with the table's owner and each funcref is made when its slot is first
//! read (vendor/README.md, "Imported tables' element segments"). These tests pin the
//! semantics that must not change with it: what a slot holds after segments, writes
//! and copies in any order, bounds traps with the earlier segments kept, and the
//! host's view of the table. They run on the engine's own configuration (pooling).

use super::{Engine, EngineConfig};
use wasmtime::{Instance, Module, Store, Table, Val};

/// The table's owner: a table of 10 funcrefs and the bases libraries are linked at.
const OWNER: &str = r#"(module
    (table (export "table") 10 funcref)
    (global (export "base") i32 (i32.const 2))
    (global (export "next") i32 (i32.const 3)))"#;

/// A library with functions returning 1 and 2 placed at `base`, and `call` and
/// `copy` entry points that use the imported table from wasm.
const LIBRARY: &str = r#"(module
    (type $ret (func (result i32)))
    (import "env" "table" (table 10 funcref))
    (import "env" "base" (global $base i32))
    (func $one (result i32) i32.const 1)
    (func $two (result i32) i32.const 2)
    (elem (table 0) (global.get $base) func $one $two)
    (func (export "call") (param i32) (result i32)
        local.get 0
        call_indirect (type $ret))
    (func (export "copy") (param i32 i32)
        local.get 0 local.get 1 i32.const 1 table.copy))"#;

/// A second library whose segments put a 3 over the first's second slot and in two
/// empty ones, the last at an offset only the startup function computes.
const OVERLAPPING: &str = r#"(module
    (import "env" "table" (table 10 funcref))
    (import "env" "next" (global $next i32))
    (func $three (result i32) i32.const 3)
    (elem (table 0) (global.get $next) func $three)
    (elem (table 0) (i32.const 5) func $three)
    (elem (table 0) (offset (i32.add (global.get $next) (i32.const 3))) func $three))"#;

/// A library whose first segment fits and whose second does not.
const OUT_OF_BOUNDS: &str = r#"(module
    (import "env" "table" (table 10 funcref))
    (import "env" "base" (global $base i32))
    (func $four (result i32) i32.const 4)
    (elem (table 0) (i32.const 0) func $four)
    (elem (table 0) (global.get $base) func $four $four $four $four $four $four $four $four $four))"#;

/// A library that traps like `OUT_OF_BOUNDS`, whose functions left in the table read
/// globals that only its startup function computes (as libpython's `GOT` globals
/// are): an `i32` from the imported base and an `i64` from constants.
const OUT_OF_BOUNDS_WITH_GLOBALS: &str = r#"(module
    (import "env" "table" (table 10 funcref))
    (import "env" "base" (global $base i32))
    (global $address i32 (i32.add (global.get $base) (i32.const 40)))
    (global $wide i64 (i64.sub (i64.mul (i64.const 3) (i64.const 7)) (i64.const 100)))
    (func $address (result i32) global.get $address)
    (func $wide (result i32) global.get $wide i32.wrap_i64)
    (elem (table 0) (i32.const 0) func $address $wide)
    (elem (table 0) (global.get $base) func $address $address $address $address $address $address $address $address $address))"#;

struct Linked {
    store: Store<()>,
    owner: Instance,
    table: Table,
    engine: wasmtime::Engine,
}

impl Linked {
    fn new(engine: &Engine) -> Linked {
        let engine = engine.wasmtime().clone();
        let mut store = Store::new(&engine, ());
        store.set_epoch_deadline(u64::MAX / 2);
        let owner = Instance::new(&mut store, &Module::new(&engine, OWNER).unwrap(), &[]).unwrap();
        let table = owner.get_table(&mut store, "table").unwrap();
        Linked { store, owner, table, engine }
    }

    /// Instantiates `wat`, whose imports are all the owner's exports of those names.
    fn link(&mut self, wat: &str) -> wasmtime::Result<Instance> {
        let module = Module::new(&self.engine, wat).unwrap();
        let imports: Vec<_> =
            module.imports().map(|import| self.owner.get_export(&mut self.store, import.name()).unwrap()).collect();
        Instance::new(&mut self.store, &module, &imports)
    }

    /// Instantiates `wat` as `link` does, expecting a segment out of bounds.
    fn link_out_of_bounds(&mut self, wat: &str) {
        let error = self.link(wat).unwrap_err();
        assert_eq!(error.downcast::<wasmtime::Trap>().unwrap(), wasmtime::Trap::TableOutOfBounds);
    }

    fn call(&mut self, library: Instance, slot: i32) -> wasmtime::Result<i32> {
        let call = library.get_typed_func::<i32, i32>(&mut self.store, "call")?;
        call.call(&mut self.store, slot)
    }

    /// What the host sees in `slot`: `None` for null, else what calling it returns.
    fn host_view(&mut self, slot: u64) -> Option<i32> {
        let func = self.table.get(&mut self.store, slot).unwrap();
        let func = func.as_func().unwrap()?;
        let mut result = [Val::I32(0)];
        func.call(&mut self.store, &[], &mut result).unwrap();
        Some(result[0].unwrap_i32())
    }
}

fn engine() -> (Engine, tempfile::TempDir) {
    let cache = tempfile::tempdir().unwrap();
    let config =
        EngineConfig { cache_dir: cache.path().to_path_buf(), prepared_instances: 0, ..EngineConfig::default() };
    (Engine::new(config).unwrap(), cache)
}

#[test]
fn a_segment_in_an_imported_table_fills_its_slots_and_no_others() {
    let (engine, _cache) = engine();
    let mut linked = Linked::new(&engine);
    let library = linked.link(LIBRARY).unwrap();
    assert_eq!(linked.call(library, 2).unwrap(), 1);
    assert_eq!(linked.call(library, 3).unwrap(), 2);
    for empty in [0, 1, 4, 9] {
        let trap = linked.call(library, empty).unwrap_err().downcast::<wasmtime::Trap>().unwrap();
        assert_eq!(trap, wasmtime::Trap::IndirectCallToNull, "slot {empty}");
    }
    // The host reads slots the guest never called through, and sees the same.
    assert_eq!((2..5).map(|slot| linked.host_view(slot)).collect::<Vec<_>>(), [Some(1), Some(2), None]);
}

#[test]
fn the_last_write_to_a_slot_wins_whatever_wrote_it() {
    let (engine, _cache) = engine();
    let mut linked = Linked::new(&engine);
    let library = linked.link(LIBRARY).unwrap();
    // A later module's segment over slot 3, before anything read it.
    linked.link(OVERLAPPING).unwrap();
    assert_eq!(linked.call(library, 2).unwrap(), 1);
    assert_eq!(linked.call(library, 3).unwrap(), 3);
    assert_eq!(linked.call(library, 5).unwrap(), 3);
    assert_eq!(linked.call(library, 6).unwrap(), 3);
    // A host write over a slot a segment filled, then read from wasm.
    let three = linked.table.get(&mut linked.store, 5).unwrap();
    linked.table.set(&mut linked.store, 2, three).unwrap();
    assert_eq!(linked.call(library, 2).unwrap(), 3);
    // A segment applied again (a new instance of the library) takes the slots back.
    let again = linked.link(LIBRARY).unwrap();
    assert_eq!(linked.call(again, 2).unwrap(), 1);
    assert_eq!(linked.call(library, 3).unwrap(), 2);
    // `table.copy` from a slot nothing has read yet to an empty one.
    let fresh = linked.link(LIBRARY).unwrap();
    let copy = fresh.get_typed_func::<(i32, i32), ()>(&mut linked.store, "copy").unwrap();
    copy.call(&mut linked.store, (8, 3)).unwrap();
    assert_eq!(linked.call(library, 8).unwrap(), 2);
    // And a null written over a filled slot stays null.
    linked.table.set(&mut linked.store, 3, wasmtime::Ref::Func(None)).unwrap();
    assert_eq!(linked.host_view(3), None);
}

#[test]
fn a_segment_out_of_bounds_traps_and_keeps_the_segments_before_it() {
    let (engine, _cache) = engine();
    let mut linked = Linked::new(&engine);
    linked.link_out_of_bounds(OUT_OF_BOUNDS);
    assert_eq!(linked.host_view(0), Some(4));
    assert_eq!(linked.host_view(2), None);
}

#[test]
fn a_trapping_segment_leaves_the_globals_set_that_the_startup_function_sets_first() {
    let (engine, _cache) = engine();
    let mut linked = Linked::new(&engine);
    linked.link_out_of_bounds(OUT_OF_BOUNDS_WITH_GLOBALS);
    // The failed instance's functions stay in the shared table; stock wasmtime sets
    // its globals before its segments, and so must a lazily applied segment's trap.
    assert_eq!(linked.host_view(0), Some(2 + 40));
    assert_eq!(linked.host_view(1), Some(3 * 7 - 100));
    assert_eq!(linked.host_view(2), None);
}
