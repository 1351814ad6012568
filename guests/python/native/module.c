/* _wasmbox_native: the Python guest's C code, one extension module.
 *
 * One module and one shared library for all of it, because componentize-py links every
 * shared library as a core module of its own, and each one more costs every run a little
 * (its instantiation and set-up: docs/performance.md, "Session 10"). Each file of this
 * folder adds its functions to it:
 * - small_alloc.c: install_small_alloc(), small_alloc_fresh_pools(), small_alloc_arenas();
 * - wide_sum.c: sum(), builtin_sum;
 * - random_state.c: seed_random();
 * - immortal.c: immortalize();
 * - plain_json.c: plain_json_encoder().
 */
#include "stable_abi.h"

int small_alloc_add_to(PyObject *module);
int wide_sum_add_to(PyObject *module);
int random_state_add_to(PyObject *module);
int immortal_add_to(PyObject *module);
int plain_json_add_to(PyObject *module);

static PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "_wasmbox_native",
    "The Python guest's C code; see guests/python/native/.",
    -1,
    0,
    0,
    0,
    0,
    0,
};

__attribute__((visibility("default"))) PyObject *PyInit__wasmbox_native(void) {
    PyObject *module = PyModule_Create2(&module_def, PYTHON_ABI_VERSION);
    if (module != 0 &&
        (small_alloc_add_to(module) < 0 || wide_sum_add_to(module) < 0 || random_state_add_to(module) < 0 ||
         immortal_add_to(module) < 0 || plain_json_add_to(module) < 0)) {
        Py_DecRef(module);
        module = 0;
    }
    return module;
}
