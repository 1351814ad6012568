//! wasmbox: the imports between a component's core instances, resolved once per
//! component instead of at every instantiation.
//!
//! A dynamically linked guest's core instances import thousands of each other's
//! functions and globals. What such an import's record holds is fixed when the
//! component loads, but for the exporter's `vmctx`: a function's code pointers (in the
//! component's code, shared by its modules) and type, a global's offset in its
//! owner's `vmctx`. [`ImportPlan`] keeps those per core instance, in the order of its
//! imports, with the definer already found through any chain of re-exports, so that
//! `Instantiator::build_imports` writes each record from one sequential read and the
//! definer's `vmctx`, instead of looking the exporter up in the store and reading its
//! module's scattered tables. An import the plan cannot resolve (an imported module's
//! instance, an export by name, a trampoline, code private to a store) is resolved at
//! instantiation as before. See vendor/README.md, change 6.

use crate::Module;
use crate::prelude::*;
use wasmtime_environ::component::{
    Component, CoreDef, CoreExport, ExportItem, GlobalInitializer, InstantiateModule,
    RuntimeInstanceIndex, StaticModuleIndex,
};
use wasmtime_environ::{
    DefinedGlobalIndex, EntityIndex, EntityRef, Initializer, PrimaryMap, VMSharedTypeIndex,
};

/// How one import of a core instance is resolved.
#[derive(Clone, Copy, Debug)]
pub(crate) enum PlannedImport {
    /// A function that core instance `definer` defines, whose code is at these
    /// offsets of the component's text.
    Function {
        definer: RuntimeInstanceIndex,
        array_call: u32,
        wasm_call: u32,
        type_index: VMSharedTypeIndex,
    },
    /// A global that core instance `definer` defines, at `offset` in its `vmctx`.
    Global {
        definer: RuntimeInstanceIndex,
        offset: u32,
        index: DefinedGlobalIndex,
    },
    /// Resolved at instantiation.
    AtInstantiation,
}

/// Every core instance's imports, planned; see the module's documentation.
#[derive(Default)]
pub(crate) struct ImportPlan {
    /// Per core instance in instantiation order, where its imports lie in `imports`
    /// (`None`: an imported module's instance, not planned).
    instances: TryPrimaryMap<RuntimeInstanceIndex, Option<(u32, u32)>>,
    imports: TryVec<PlannedImport>,
}

/// A planned core instance while the plan is made: its module, and where in its
/// imports each imported function and global is.
struct PlannedInstance<'a> {
    module: &'a Module,
    functions: Vec<u32>,
    globals: Vec<u32>,
}

impl ImportPlan {
    /// Plans `component`'s core instances' imports. `code_is_shared`: whether its
    /// modules' code is the same for every store (not so when guest debugging gives
    /// each store a copy); if not, nothing is planned.
    pub(crate) fn new(
        component: &Component,
        static_modules: &PrimaryMap<StaticModuleIndex, Module>,
        code_is_shared: bool,
    ) -> Result<ImportPlan, OutOfMemory> {
        let mut plan = ImportPlan::default();
        if !code_is_shared {
            return Ok(plan);
        }
        let mut instances: Vec<Option<PlannedInstance<'_>>> = Vec::new();
        for initializer in component.initializers.iter() {
            let GlobalInitializer::InstantiateModule(instantiate, _) = initializer else {
                continue;
            };
            let InstantiateModule::Static(module, args) = instantiate else {
                instances.push(None);
                plan.instances.push(None)?;
                continue;
            };
            let start = plan.imports.len();
            plan.imports.reserve(args.len())?;
            for arg in args.iter() {
                let planned = plan.resolve(&instances, arg);
                plan.imports.push(planned)?;
            }
            plan.instances
                .push(Some((to_u32(start), to_u32(plan.imports.len()))))?;
            instances.push(Some(PlannedInstance::new(&static_modules[*module])));
        }
        Ok(plan)
    }

    /// The plan of core instance `index`'s imports, in its module's import order.
    pub(crate) fn instance(&self, index: RuntimeInstanceIndex) -> Option<&[PlannedImport]> {
        let (start, end) = (*self.instances.get(index)?)?;
        Some(&self.imports[start as usize..end as usize])
    }

    fn resolve(&self, instances: &[Option<PlannedInstance<'_>>], arg: &CoreDef) -> PlannedImport {
        let CoreDef::Export(CoreExport {
            instance: exporter,
            item: ExportItem::Index(item),
        }) = arg
        else {
            return PlannedImport::AtInstantiation;
        };
        let Some(instance) = &instances[exporter.index()] else {
            return PlannedImport::AtInstantiation;
        };
        let compiled = instance.module.compiled_module();
        let env = compiled.module();
        match *item {
            EntityIndex::Function(index) => match env.defined_func_index(index) {
                Some(def) => match compiled.funcref_offsets(def) {
                    Some(offsets) => PlannedImport::Function {
                        definer: *exporter,
                        array_call: offsets.array_call,
                        wasm_call: offsets.wasm_call,
                        type_index: env.functions[index].signature.unwrap_engine_type_index(),
                    },
                    None => PlannedImport::AtInstantiation,
                },
                None => self.reexported(*exporter, instance.functions[index.index()]),
            },
            EntityIndex::Global(index) => match env.defined_global_index(index) {
                Some(def) => PlannedImport::Global {
                    definer: *exporter,
                    offset: instance.module.offsets().globals().at(def),
                    index: def,
                },
                None => self.reexported(*exporter, instance.globals[index.index()]),
            },
            _ => PlannedImport::AtInstantiation,
        }
    }

    /// What core instance `exporter`'s own import at `position` was planned as: the
    /// item it re-exports.
    fn reexported(&self, exporter: RuntimeInstanceIndex, position: u32) -> PlannedImport {
        self.instance(exporter)
            .map_or(PlannedImport::AtInstantiation, |plan| {
                plan[position as usize]
            })
    }
}

impl<'a> PlannedInstance<'a> {
    fn new(module: &'a Module) -> Self {
        let env = module.compiled_module().module();
        let mut functions = vec![u32::MAX; env.num_imported_funcs];
        let mut globals = vec![u32::MAX; env.num_imported_globals];
        for (position, initializer) in env.initializers.iter().enumerate() {
            let Initializer::Import { index, .. } = initializer;
            match *index {
                EntityIndex::Function(f) => functions[f.index()] = to_u32(position),
                EntityIndex::Global(g) => globals[g.index()] = to_u32(position),
                _ => {}
            }
        }
        PlannedInstance {
            module,
            functions,
            globals,
        }
    }
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).expect("a component's imports fit in u32")
}
