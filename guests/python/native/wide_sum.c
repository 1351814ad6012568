/* sum() with the 64-bit integer fast path that native CPython has.
 *
 * CPython's sum() adds exact ints in a C `long` while the total fits, and falls back to
 * adding int objects (a new one per term, through the allocator) once it does not. A
 * C `long` is 64 bits on every native 64-bit build, but 32 bits in wasm32: in the guest a
 * total past 2**31 - 1 (two billion: a few seconds in milliseconds, a file size, an id)
 * took the slow path, a new int object, for every later term: a large part of
 * sum(i * i for i in range(1_000_000)) (docs/performance.md, "W4").
 *
 * This sum() keeps its total in a `long long` instead and is otherwise CPython's: any
 * call it does not take whole (a `start` that is not an int, unusual arguments) goes to
 * the builtin, and when an item is not an int, or the total would leave 64 bits, it adds
 * that item to the total by the number protocol and hands the rest of the iterator to
 * the builtin, as CPython's own fast path does. The guest installs it as builtins.sum
 * (guests/python/app.py); the tests compare it with the builtin it replaces.
 */
#include "stable_abi.h"

/* The builtin sum(), called for everything this one does not do itself. */
static PyObject *builtin_sum;

/* An int of one digit, read in place as CPython's own sum() does: CPython 3.12's
 * PyUnstable_Long_IsCompact and PyUnstable_Long_CompactValue (cpython/longintrepr.h),
 * static inline functions there, so written out here for its layout: after the object
 * header a tag (the sign in its low two bits, the number of 30-bit digits above its
 * third) and the digits. Calling PyLong_AsLongLongAndOverflow for every term instead
 * made summing small ints slower than with the builtin. check_compact_layout() holds the
 * layout to what this CPython does when the module is made, so a CPython that changed it
 * fails the guest's build instead of summing wrongly. */
typedef struct {
    PyObject ob_base;
    unsigned long lv_tag;
    unsigned int ob_digit[1];
} compact_int;

static int is_compact(PyObject *op) {
    return ((compact_int *)op)->lv_tag < (2u << 3);
}

static long long compact_value(PyObject *op) {
    const compact_int *i = (const compact_int *)op;
    return (1 - (long long)(i->lv_tag & 3)) * (long long)i->ob_digit[0];
}

static int check_compact_layout(void) {
    static const long long samples[] = {0, 1, -1, 7, -7, (1 << 30) - 1, -((1 << 30) - 1), 1 << 30, -(1 << 30)};
    for (unsigned k = 0; k < sizeof samples / sizeof samples[0]; k++) {
        PyObject *o = PyLong_FromLongLong(samples[k]);
        if (o == 0) {
            return -1;
        }
        int one_digit = samples[k] > -(1 << 30) && samples[k] < (1 << 30);
        int right = is_compact(o) == one_digit && (!one_digit || compact_value(o) == samples[k]);
        Py_DecRef(o);
        if (!right) {
            PyErr_SetString(PyExc_ImportError, "this CPython's ints are not laid out as wide_sum.c reads them");
            return -1;
        }
    }
    return 0;
}

/* builtin_sum's doc string, so that help(), inspect.signature() and __text_signature__
 * answer as they did; app.py checks at build time that it is still the builtin's. */
static const char wide_sum_doc[] =
    "sum($module, iterable, /, start=0)\n"
    "--\n"
    "\n"
    "Return the sum of a 'start' value (default: 0) plus an iterable of numbers\n"
    "\n"
    "When the iterable is empty, return the start value.\n"
    "This function is intended specifically for use with numeric values and may\n"
    "reject non-numeric types.";

/* True when sum(a + b, ...) would be a str, bytes or bytearray start, which the builtin
 * refuses as a start value but CPython's loop keeps adding to. */
static int is_text_or_bytes(PyObject *o) {
    unsigned long flags = PyType_GetFlags(Py_TYPE(o));
    return (flags & (Py_TPFLAGS_UNICODE_SUBCLASS | Py_TPFLAGS_BYTES_SUBCLASS)) != 0 ||
           PyType_IsSubtype(Py_TYPE(o), &PyByteArray_Type);
}

/* The rest of `iter` added to `total` (a new reference, consumed), as CPython's sum()
 * goes on after its fast path gives up. */
static PyObject *add_rest(PyObject *iter, PyObject *total) {
    if (!is_text_or_bytes(total)) {
        PyObject *sum = PyObject_CallFunctionObjArgs(builtin_sum, iter, total, (PyObject *)0);
        Py_DecRef(total);
        return sum;
    }
    for (;;) {
        PyObject *item = PyIter_Next(iter);
        if (item == 0) {
            if (PyErr_Occurred()) {
                Py_DecRef(total);
                return 0;
            }
            return total;
        }
        PyObject *next = PyNumber_Add(total, item);
        Py_DecRef(total);
        Py_DecRef(item);
        if (next == 0) {
            return 0;
        }
        total = next;
    }
}

/* `start` from sum(iterable), sum(iterable, start) or sum(iterable, start=...); false for
 * any other shape, which the builtin answers (with its own error). */
static int parse_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **start) {
    Py_ssize_t nkw = kwnames ? PyTuple_Size(kwnames) : 0;
    if (nargs == 1 && nkw == 0) {
        *start = 0;
        return 1;
    }
    if (nargs == 2 && nkw == 0) {
        *start = args[1];
        return 1;
    }
    if (nargs == 1 && nkw == 1 && PyUnicode_CompareWithASCIIString(PyTuple_GetItem(kwnames, 0), "start") == 0) {
        *start = args[1];
        return 1;
    }
    return 0;
}

static PyObject *wide_sum(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    (void)self;
    PyObject *start;
    long long total = 0;
    int overflow = 0;
    if (!parse_args(args, nargs, kwnames, &start)) {
        return PyObject_Vectorcall(builtin_sum, args, (unsigned long)nargs, kwnames);
    }
    if (start != 0) {
        /* Exact ints only, as in CPython: sum([], True) is True, and strings are refused. */
        if (!PyLong_CheckExact(start)) {
            return PyObject_Vectorcall(builtin_sum, args, (unsigned long)nargs, kwnames);
        }
        total = PyLong_AsLongLongAndOverflow(start, &overflow);
        if (overflow) {
            return PyObject_Vectorcall(builtin_sum, args, (unsigned long)nargs, kwnames);
        }
    }
    PyObject *iter = PyObject_GetIter(args[0]);
    if (iter == 0) {
        return 0;
    }
    for (;;) {
        PyObject *item = PyIter_Next(iter);
        if (item == 0) {
            Py_DecRef(iter);
            return PyErr_Occurred() ? 0 : PyLong_FromLongLong(total);
        }
        if (PyLong_CheckExact(item) || PyBool_Check(item)) {
            /* Cannot fail for an int: a value outside 64 bits only sets `overflow`. */
            long long value = is_compact(item) ? compact_value(item) : PyLong_AsLongLongAndOverflow(item, &overflow);
            long long next;
            if (!overflow && !__builtin_add_overflow(total, value, &next)) {
                total = next;
                Py_DecRef(item);
                continue;
            }
        }
        PyObject *so_far = PyLong_FromLongLong(total);
        PyObject *result = so_far ? PyNumber_Add(so_far, item) : 0;
        Py_DecRef(so_far);
        Py_DecRef(item);
        if (result == 0) {
            Py_DecRef(iter);
            return 0;
        }
        if (PyLong_CheckExact(result)) {
            /* An int subclass's item came back as a plain int: add on in 64 bits if it fits
             * (the same value CPython's loop reaches, one int object at a time). */
            long long value = PyLong_AsLongLongAndOverflow(result, &overflow);
            if (!overflow) {
                total = value;
                Py_DecRef(result);
                continue;
            }
        }
        PyObject *sum = add_rest(iter, result);
        Py_DecRef(iter);
        return sum;
    }
}

static PyMethodDef wide_sum_def = {
    "sum",
    (PyCFunction)(void (*)(void))wide_sum,
    METH_FASTCALL | METH_KEYWORDS,
    wide_sum_doc,
};

/* Adds `sum` (made as a function of the builtins module, so that its repr, __module__,
 * __self__ and __reduce__ are the builtin's) and `builtin_sum`, the original. */
int wide_sum_add_to(PyObject *module) {
    int status = -1;
    PyObject *builtins = 0, *builtins_name = 0, *function = 0;
    if (check_compact_layout() < 0 || (builtins = PyImport_ImportModule("builtins")) == 0 ||
        (builtin_sum = PyObject_GetAttrString(builtins, "sum")) == 0 ||
        (builtins_name = PyUnicode_FromString("builtins")) == 0 ||
        (function = PyCFunction_NewEx(&wide_sum_def, builtins, builtins_name)) == 0) {
        goto done;
    }
    if (PyModule_AddObjectRef(module, "sum", function) == 0 &&
        PyModule_AddObjectRef(module, "builtin_sum", builtin_sum) == 0) {
        status = 0;
    }
done:
    Py_DecRef(function);
    Py_DecRef(builtins_name);
    Py_DecRef(builtins);
    return status;
}
