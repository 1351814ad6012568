/* immortalize(): make the build snapshot's objects immortal (PEP 683).
 *
 * Every fresh instance starts from the build's snapshot, and the pool puts back every
 * page a run wrote before the next run may use the slot. A trivial run writes to pages
 * all over the snapshot's heap, mostly only to count references: each call increments
 * and decrements the counts of the function, its code, its globals, the builtins it
 * names, the classes it instantiates. The count ends where it began, but the page was
 * written, so it is copied back (and stays resident in the slot) after every run.
 * An immortal object's count is never written: CPython checks it before each change.
 *
 * The snapshot's objects live as long as the instance anyway (what they refer to is
 * part of the instance's starting state), so making them immortal changes only when
 * memory is reclaimed: an object of the snapshot that code drops is not freed, which
 * leaks at most the snapshot, once. CPython itself makes objects immortal this way
 * (`_Py_SetImmortal`: interned strings, code constants); it is internal, so this writes
 * the count as its 32-bit build does (Include/refcount.h): an object whose count is at
 * least 2**30 is immortal, the runtime sets 5 << 28, and counts from 6 << 28 up mark
 * statically allocated objects, which this leaves alone. app.py checks at build time
 * that CPython sees the objects as immortal (`sys._is_immortal`) and that using them
 * leaves their counts alone, so a CPython that changed this fails the guest's build.
 *
 * The walk also computes the hash of every string, bytes, tuple and frozenset it meets:
 * those keep their hash once computed, and a run that hashed one would write its page.
 */
#include "stable_abi.h"

_Static_assert(sizeof(void *) == 4, "immortal.c writes the reference count of a 32-bit CPython");

#define IMMORTAL_MINIMUM ((Py_ssize_t)(1L << 30))
#define IMMORTAL_INITIAL ((Py_ssize_t)(5L << 28))

/* What is left to traverse: objects the collector does not track, which the walk
 * reaches only through others (the tracked ones are all among the roots). */
typedef struct {
    PyObject **stack;
    Py_ssize_t size, capacity, made;
    PyTypeObject *code_type;
} walk_state;

static int is_mortal(PyObject *object) {
    return object->ob_refcnt < IMMORTAL_MINIMUM;
}

static void make_immortal(walk_state *walk, PyObject *object) {
    object->ob_refcnt = IMMORTAL_INITIAL;
    walk->made++;
}

/* The visitproc: an untracked mortal object is made immortal at once (which is also
 * what marks it seen) and kept to be traversed in turn. */
static int visit(PyObject *object, void *arg) {
    walk_state *walk = arg;
    if (object == 0 || !is_mortal(object) || PyObject_GC_IsTracked(object)) {
        return 0;
    }
    if (walk->size == walk->capacity) {
        Py_ssize_t capacity = walk->capacity ? 2 * walk->capacity : 256;
        PyObject **stack = PyMem_Realloc(walk->stack, (unsigned long)capacity * sizeof *stack);
        if (stack == 0) {
            PyErr_NoMemory();
            return -1;
        }
        walk->stack = stack;
        walk->capacity = capacity;
    }
    make_immortal(walk, object);
    walk->stack[walk->size++] = object;
    return 0;
}

/* What `object` refers to, through its type's tp_traverse (as gc.get_referents), and a
 * code object's constants, which it does not traverse. */
static int traverse(walk_state *walk, PyObject *object) {
    PyTypeObject *type = Py_TYPE(object);
    if (type == &PyUnicode_Type || type == &PyBytes_Type || type == &PyTuple_Type || type == &PyFrozenSet_Type) {
        /* These keep their hash once computed: computed here, a run does not write it. */
        if (PyObject_Hash(object) == -1) {
            PyErr_Clear(); /* a tuple holding something unhashable */
        }
    }
    if (type == walk->code_type) {
        PyObject *constants = PyObject_GetAttrString(object, "co_consts");
        int status = constants == 0 ? -1 : visit(constants, walk);
        Py_DecRef(constants);
        return status;
    }
    traverseproc tp_traverse = (traverseproc)PyType_GetSlot(type, Py_tp_traverse);
    return tp_traverse == 0 ? 0 : tp_traverse(object, visit, walk);
}

static PyObject *immortalize(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2 || !PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "immortalize() takes gc.get_objects() and types.CodeType");
        return 0;
    }
    PyObject *roots = args[0];
    walk_state walk = {0, 0, 0, 0, (PyTypeObject *)args[1]};
    int status = 0;
    Py_ssize_t count = PyList_Size(roots);
    for (Py_ssize_t i = 0; i < count && status == 0; i++) {
        PyObject *root = PyList_GetItem(roots, i);
        if (root == roots) {
            continue;
        }
        if (is_mortal(root)) {
            make_immortal(&walk, root);
        }
        status = traverse(&walk, root);
        while (walk.size > 0 && status == 0) {
            status = traverse(&walk, walk.stack[--walk.size]);
        }
    }
    PyMem_Free(walk.stack);
    return status == 0 ? PyLong_FromLongLong(walk.made) : 0;
}

static PyMethodDef immortal_methods[] = {
    {"immortalize", (PyCFunction)(void (*)(void))immortalize, METH_FASTCALL,
     "immortalize(objects, code_type, /)\n--\n\n"
     "Make immortal every object of `objects` (gc.get_objects(): what the collector tracks)\n"
     "and every untracked object they reach, code objects' constants included; answer how\n"
     "many were not already."},
    {0, 0, 0, 0},
};

int immortal_add_to(PyObject *module) {
    return PyModule_AddFunctions(module, immortal_methods);
}
