/* The part of CPython's stable ABI (PEP 384, PEP 652) that the guest's native modules
 * use, declared by hand.
 *
 * Why not <Python.h>: componentize-py ships its CPython 3.14 for wasm32-wasi inside its
 * own binary, without headers, and a host's headers describe the host (64-bit `long`,
 * its pyconfig.h). The stable ABI fixes these signatures and the layout of PyObject,
 * PyMethodDef and PyModuleDef for every CPython 3.x, so declaring them for wasm32 (ILP32:
 * `long` and pointers are 32 bits, `long long` 64) is exact. Only functions and objects
 * that CPython exports are named here; nothing reaches into its internals.
 */
#ifndef WASMBOX_STABLE_ABI_H
#define WASMBOX_STABLE_ABI_H

typedef long Py_ssize_t;
typedef struct _typeobject PyTypeObject;

/* PyObject_HEAD of a build without free threading, as componentize-py's is. */
typedef struct _object {
    Py_ssize_t ob_refcnt;
    PyTypeObject *ob_type;
} PyObject;

#define Py_TYPE(op) (((PyObject *)(op))->ob_type)

typedef PyObject *(*PyCFunction)(PyObject *, PyObject *);
typedef struct PyMethodDef {
    const char *ml_name;
    PyCFunction ml_meth;
    int ml_flags;
    const char *ml_doc;
} PyMethodDef;

#define METH_FASTCALL 0x0080
#define METH_KEYWORDS 0x0002
#define METH_NOARGS 0x0004
#define METH_O 0x0008

typedef struct PyModuleDef_Base {
    PyObject ob_base;
    PyObject *(*m_init)(void);
    Py_ssize_t m_index;
    PyObject *m_copy;
} PyModuleDef_Base;

typedef struct PyModuleDef {
    PyModuleDef_Base m_base;
    const char *m_name;
    const char *m_doc;
    Py_ssize_t m_size;
    PyMethodDef *m_methods;
    void *m_slots;
    void *m_traverse;
    void *m_clear;
    void *m_free;
} PyModuleDef;

#define PyModuleDef_HEAD_INIT {{1, 0}, 0, 0, 0}
/* PYTHON_ABI_VERSION, unchanged since Python 3.2. */
#define PYTHON_ABI_VERSION 3

#define Py_TPFLAGS_BYTES_SUBCLASS (1UL << 27)
#define Py_TPFLAGS_UNICODE_SUBCLASS (1UL << 28)

extern PyTypeObject PyLong_Type, PyBool_Type, PyByteArray_Type, PyList_Type;
extern PyTypeObject PyUnicode_Type, PyBytes_Type, PyTuple_Type, PyFrozenSet_Type;
extern PyTypeObject PyDict_Type, PyFloat_Type;
extern PyObject *PyExc_ImportError, *PyExc_TypeError, *PyExc_ValueError;
extern PyObject _Py_NoneStruct; /* what CPython's own Py_None macro names */
#define Py_None (&_Py_NoneStruct)

PyObject *PyModule_Create2(PyModuleDef *def, int api_version);
int PyModule_AddObjectRef(PyObject *module, const char *name, PyObject *value);
int PyModule_AddFunctions(PyObject *module, PyMethodDef *functions);
PyObject *PyImport_ImportModule(const char *name);
PyObject *PyObject_GetAttrString(PyObject *o, const char *name);
PyObject *PyCFunction_NewEx(PyMethodDef *def, PyObject *self, PyObject *module);
PyObject *PyUnicode_FromString(const char *s);
int PyUnicode_CompareWithASCIIString(PyObject *s, const char *ascii);
const char *PyUnicode_AsUTF8AndSize(PyObject *s, Py_ssize_t *size);
PyObject *PyUnicode_FromStringAndSize(const char *utf8, Py_ssize_t size);
PyObject *PyObject_Repr(PyObject *o);
PyObject *PyBool_FromLong(long value);
double PyFloat_AsDouble(PyObject *o);
int PyDict_Next(PyObject *dict, Py_ssize_t *position, PyObject **key, PyObject **value); /* borrowed */

typedef int (*visitproc)(PyObject *object, void *arg);
typedef int (*traverseproc)(PyObject *self, visitproc visit, void *arg);
#define Py_tp_traverse 71 /* typeslots.h, fixed by the stable ABI */
void *PyType_GetSlot(PyTypeObject *type, int slot);
int PyObject_GC_IsTracked(PyObject *o);
void *PyMem_Realloc(void *ptr, unsigned long size);
void PyMem_Free(void *ptr);
PyObject *PyErr_NoMemory(void);
void PyErr_Clear(void);
Py_ssize_t PyObject_Hash(PyObject *o);

void Py_IncRef(PyObject *o);
void Py_DecRef(PyObject *o); /* NULL is ignored, as Py_XDECREF does */
unsigned long PyType_GetFlags(PyTypeObject *type);
int PyType_IsSubtype(PyTypeObject *a, PyTypeObject *b);

PyObject *PyObject_GetIter(PyObject *o);
PyObject *PyIter_Next(PyObject *iter);
PyObject *PyErr_Occurred(void);
void PyErr_SetString(PyObject *type, const char *message);
PyObject *PyNumber_Add(PyObject *a, PyObject *b);
PyObject *PyObject_CallFunctionObjArgs(PyObject *callable, ...);
PyObject *PyObject_Vectorcall(PyObject *callable, PyObject *const *args, unsigned long nargsf, PyObject *kwnames);

int PyBytes_AsStringAndSize(PyObject *bytes, char **buffer, Py_ssize_t *length);

Py_ssize_t PyTuple_Size(PyObject *tuple);
PyObject *PyTuple_GetItem(PyObject *tuple, Py_ssize_t index); /* borrowed */

Py_ssize_t PyList_Size(PyObject *list);
PyObject *PyList_GetItem(PyObject *list, Py_ssize_t index); /* borrowed */

long long PyLong_AsLongLongAndOverflow(PyObject *o, int *overflow);
PyObject *PyLong_FromLongLong(long long value);

#define PyLong_CheckExact(op) (Py_TYPE(op) == &PyLong_Type)
#define PyBool_Check(op) (Py_TYPE(op) == &PyBool_Type)
#define PyList_CheckExact(op) (Py_TYPE(op) == &PyList_Type)

#endif
