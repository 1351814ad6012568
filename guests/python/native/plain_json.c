/* plain_json(): strict JSON text for a value made only of the exact JSON types, in one
 * pass in C.
 *
 * Every tool call encodes its arguments, and most are a dict of a few strings and
 * numbers. In Python that was a check that the value holds only exact JSON types
 * (app.py's _plainly_json, an interpreted walk) and then json's C encoder, each about a
 * quarter of what the call cost in the guest (docs/performance.md, "A tool call's
 * arguments (session 31)"). This function does both at once.
 *
 * `plain_json_encoder(max_depth)` makes the function; `encoder(value)` answers the text
 * json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":")) gives,
 * or None when `value` is anything else than dicts with str keys, lists, tuples, str,
 * int, float, bool and None of exactly those types, containers nested under
 * `max_depth` levels, finite floats and strings without lone surrogates. None only means
 * "not this path": app.py then takes its walk, which encodes what JSON can carry (an int
 * subclass, say) and names what it cannot. So every refusal here is a fallback, never an
 * error of its own; only running out of memory raises.
 *
 * Nothing here runs Python code (the repr of a float, UTF-8 of a str; ints past 64 bits
 * are left to app.py), so no dict or list can change while it is read: the walk holds
 * borrowed references only. The tests compare it with json.dumps on
 * generated values (tests/all/python_guest.rs).
 */
#include "stable_abi.h"

/* The text so far: in `small` until it outgrows it, then in a block of PyMem's. */
typedef struct {
    char *data;
    Py_ssize_t length;
    Py_ssize_t capacity;
    char small[512];
} writer;

/* True, found once (the stable ABI names it by a call, not a symbol). */
static PyObject *true_object;

/* The longest text written: Py_ssize_t is 32 bits in wasm32, and past a quarter of that
 * the buffer's doubling would overflow (the guest's memory cap refuses far less anyway). */
#define MAX_TEXT_BYTES 0x1fffffff

/* Answers of write_value besides "written". */
enum { WRITTEN = 0, NOT_PLAIN = 1, FAILED = -1 };

static int reserve(writer *w, Py_ssize_t more) {
    if (more <= w->capacity - w->length) {
        return WRITTEN;
    }
    if (more > MAX_TEXT_BYTES - w->length) {
        PyErr_NoMemory();
        return FAILED;
    }
    Py_ssize_t capacity = w->capacity * 2;
    while (capacity < w->length + more) {
        capacity *= 2;
    }
    char *grown = PyMem_Realloc(w->data == w->small ? 0 : w->data, (unsigned long)capacity);
    if (grown == 0) {
        PyErr_NoMemory();
        return FAILED;
    }
    if (w->data == w->small) {
        for (Py_ssize_t i = 0; i < w->length; i++) {
            grown[i] = w->small[i];
        }
    }
    w->data = grown;
    w->capacity = capacity;
    return WRITTEN;
}

static int put(writer *w, const char *bytes, Py_ssize_t n) {
    if (reserve(w, n) != WRITTEN) {
        return FAILED;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        w->data[w->length + i] = bytes[i];
    }
    w->length += n;
    return WRITTEN;
}

static int put_char(writer *w, char c) {
    return put(w, &c, 1);
}

/* A str as a JSON string: json's escapes for ensure_ascii=False (`"`, `\`, the short
 * forms of \b \f \n \r \t, \u00xx in lower-case hex for the other control characters),
 * everything else as its UTF-8. A string with a lone surrogate has no UTF-8: not plain. */
static int write_string(writer *w, PyObject *s) {
    Py_ssize_t n;
    const char *utf8 = PyUnicode_AsUTF8AndSize(s, &n);
    if (utf8 == 0) {
        PyErr_Clear();
        return NOT_PLAIN;
    }
    /* what the escapes add: one byte for a short form, five for \u00xx */
    unsigned long long extra = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)utf8[i];
        if (c < 0x20 || c == '"' || c == '\\') {
            extra += (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t') ? 1 : 5;
        }
    }
    if ((unsigned long long)n + extra > MAX_TEXT_BYTES) {
        PyErr_NoMemory();
        return FAILED;
    }
    if (reserve(w, n + (Py_ssize_t)extra + 2) != WRITTEN) {
        return FAILED;
    }
    static const char hex[] = "0123456789abcdef";
    char *out = w->data + w->length;
    *out++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)utf8[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *out++ = (char)c;
            continue;
        }
        *out++ = '\\';
        switch (c) {
        case '"': *out++ = '"'; break;
        case '\\': *out++ = '\\'; break;
        case '\b': *out++ = 'b'; break;
        case '\f': *out++ = 'f'; break;
        case '\n': *out++ = 'n'; break;
        case '\r': *out++ = 'r'; break;
        case '\t': *out++ = 't'; break;
        default:
            *out++ = 'u';
            *out++ = '0';
            *out++ = '0';
            *out++ = hex[c >> 4];
            *out++ = hex[c & 15];
        }
    }
    *out++ = '"';
    w->length = out - w->data;
    return WRITTEN;
}

/* The repr of an exact float, which is what json writes for it (float_repr: no Python
 * code runs). */
static int write_repr(writer *w, PyObject *o) {
    PyObject *text = PyObject_Repr(o);
    if (text == 0) {
        return FAILED;
    }
    Py_ssize_t n;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &n);
    int status = utf8 == 0 ? FAILED : put(w, utf8, n);
    Py_DecRef(text);
    return status;
}

/* An exact int within 64 bits. Past them, not plain here: the repr of an int of
 * thousands of digits imports _pylong through builtins.__import__, which guest code can
 * replace, and this walk holds borrowed references only, so nothing it walks may change
 * meanwhile. app.py's path (json's own encoder) writes those. */
static int write_int(writer *w, PyObject *o) {
    int overflow = 0;
    long long value = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow) {
        return NOT_PLAIN;
    }
    char digits[24];
    int at = sizeof digits;
    unsigned long long magnitude = value < 0 ? 0ULL - (unsigned long long)value : (unsigned long long)value;
    do {
        digits[--at] = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude != 0);
    if (value < 0) {
        digits[--at] = '-';
    }
    return put(w, digits + at, (Py_ssize_t)sizeof digits - at);
}

static int write_value(writer *w, PyObject *v, int depth, int max_depth);

static int write_items(writer *w, PyObject *sequence, int is_list, int depth, int max_depth) {
    Py_ssize_t n = is_list ? PyList_Size(sequence) : PyTuple_Size(sequence);
    if (put_char(w, '[') != WRITTEN) {
        return FAILED;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = is_list ? PyList_GetItem(sequence, i) : PyTuple_GetItem(sequence, i);
        int status = (i == 0 ? WRITTEN : put_char(w, ','));
        if (status == WRITTEN) {
            status = write_value(w, item, depth + 1, max_depth);
        }
        if (status != WRITTEN) {
            return status;
        }
    }
    return put_char(w, ']');
}

static int write_dict(writer *w, PyObject *dict, int depth, int max_depth) {
    if (put_char(w, '{') != WRITTEN) {
        return FAILED;
    }
    Py_ssize_t position = 0;
    PyObject *key, *item;
    int first = 1;
    while (PyDict_Next(dict, &position, &key, &item)) {
        if (Py_TYPE(key) != &PyUnicode_Type) {
            return NOT_PLAIN;
        }
        int status = first ? WRITTEN : put_char(w, ',');
        first = 0;
        if (status == WRITTEN) {
            status = write_string(w, key);
        }
        if (status == WRITTEN) {
            status = put_char(w, ':');
        }
        if (status == WRITTEN) {
            status = write_value(w, item, depth + 1, max_depth);
        }
        if (status != WRITTEN) {
            return status;
        }
    }
    return put_char(w, '}');
}

static int write_value(writer *w, PyObject *v, int depth, int max_depth) {
    PyTypeObject *type = Py_TYPE(v);
    if (type == &PyUnicode_Type) {
        return write_string(w, v);
    }
    if (type == &PyLong_Type) {
        return write_int(w, v);
    }
    if (v == Py_None) {
        return put(w, "null", 4);
    }
    if (type == &PyBool_Type) {
        return v == true_object ? put(w, "true", 4) : put(w, "false", 5);
    }
    if (type == &PyFloat_Type) {
        double d = PyFloat_AsDouble(v);
        /* NaN and the infinities are not JSON (allow_nan=False) */
        return d - d == 0.0 ? write_repr(w, v) : NOT_PLAIN;
    }
    if (type != &PyDict_Type && type != &PyList_Type && type != &PyTuple_Type) {
        return NOT_PLAIN;
    }
    /* also what ends a cycle, as in app.py's check */
    if (depth >= max_depth) {
        return NOT_PLAIN;
    }
    if (type == &PyDict_Type) {
        return write_dict(w, v, depth, max_depth);
    }
    return write_items(w, v, type == &PyList_Type, depth, max_depth);
}

/* The encoder: `self` is its max_depth, an int. */
static PyObject *plain_json(PyObject *self, PyObject *value) {
    int overflow = 0;
    int max_depth = (int)PyLong_AsLongLongAndOverflow(self, &overflow);
    writer w;
    w.data = w.small;
    w.length = 0;
    w.capacity = sizeof w.small;
    int status = write_value(&w, value, 0, max_depth);
    PyObject *result = 0;
    if (status == WRITTEN) {
        result = PyUnicode_FromStringAndSize(w.data, w.length);
    } else if (status == NOT_PLAIN) {
        Py_IncRef(Py_None);
        result = Py_None;
    }
    if (w.data != w.small) {
        PyMem_Free(w.data);
    }
    return result;
}

static PyMethodDef plain_json_def = {
    "plain_json",
    plain_json,
    METH_O,
    "plain_json(value, /)\n--\n\nStrict JSON text of a value made only of the exact JSON types, else None.",
};

static PyObject *plain_json_encoder(PyObject *module, PyObject *max_depth) {
    if (!PyLong_CheckExact(max_depth)) {
        PyErr_SetString(PyExc_TypeError, "plain_json_encoder() takes an int, the deepest nesting");
        return 0;
    }
    int overflow = 0;
    long long depth = PyLong_AsLongLongAndOverflow(max_depth, &overflow);
    /* each level is a C frame or two on the guest's stack */
    if (overflow || depth < 0 || depth > 1000) {
        PyErr_SetString(PyExc_ValueError, "plain_json_encoder() takes a depth from 0 to 1000");
        return 0;
    }
    (void)module;
    return PyCFunction_NewEx(&plain_json_def, max_depth, 0);
}

static PyMethodDef plain_json_methods[] = {
    {"plain_json_encoder", plain_json_encoder, METH_O,
     "plain_json_encoder(max_depth, /)\n--\n\nMakes plain_json(value) for values nested under max_depth levels."},
    {0, 0, 0, 0},
};

int plain_json_add_to(PyObject *module) {
    true_object = PyBool_FromLong(1);
    return true_object == 0 ? -1 : PyModule_AddFunctions(module, plain_json_methods);
}
