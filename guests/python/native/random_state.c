/* seed_random(): fresh random state for `random`, without MT19937's seeding loop.
 *
 * Every fresh instance must draw numbers of its own, not the build snapshot's: so
 * componentize-py calls `random.seed()` once in each instance, at its first call. That
 * reads 2,496 bytes of entropy (ten reads of the host's, 256 bytes each) and then runs
 * MT19937's init_by_array over them, which mixes the key into the generator's 624 state
 * words in ~1,900 rounds: a large part of a fresh `1 + 1` run, in fuel and in time
 * (docs/performance.md, "The first call of a fresh instance").
 *
 * This takes 32 bytes of entropy instead (one read, os.urandom's) and expands them into
 * the 624 words with xoshiro256** (Blackman and Vigna's generator, its 256-bit state the
 * 32 bytes as four little-endian words; each 64-bit output gives two state words, low
 * half first). Then, as init_by_array leaves it, the first word is 0x80000000
 * (only its top bit is used: the state is never all zero) and the next draw regenerates
 * the words first (index 624). 256 bits are as much entropy as `random.seed(a)` gets
 * from a 256-bit `a`, twice what numpy's MT19937 draws by default (128 bits, expanded
 * into the state words by its SeedSequence): no two instances will share a state, and
 * none can be guessed from another's. An all-zero key, which xoshiro256** cannot run
 * from, counts as 1 (once in 2**256).
 *
 * This reaches into CPython's RandomObject (Modules/_randommodule.c: the object header,
 * `int index`, `uint32_t state[624]`), unchanged since 2002 but not an API:
 * check_random_layout() holds _random.Random's size to it when the module is made, and
 * app.py checks at build time that getstate() reads back the state this writes, so a
 * CPython that changed it fails the guest's build instead of seeding wrongly.
 */
#include "stable_abi.h"

#define MT_WORDS 624

typedef struct {
    PyObject ob_base;
    int index;
    unsigned int state[MT_WORDS];
} random_object;

/* _random.Random, the type whose instances this may write to. */
static PyObject *random_type;

static int check_random_layout(void) {
    PyObject *module = PyImport_ImportModule("_random");
    PyObject *size = 0;
    int status = -1;
    if (module == 0 || (random_type = PyObject_GetAttrString(module, "Random")) == 0 ||
        (size = PyObject_GetAttrString(random_type, "__basicsize__")) == 0) {
        goto done;
    }
    int overflow = 0;
    if (PyLong_AsLongLongAndOverflow(size, &overflow) != (long long)sizeof(random_object) || overflow) {
        PyErr_SetString(PyExc_ImportError, "this CPython's _random.Random is not laid out as random_state.c writes it");
        goto done;
    }
    status = 0;
done:
    Py_DecRef(size);
    Py_DecRef(module);
    return status;
}

static unsigned long long rotl(unsigned long long x, int k) {
    return (x << k) | (x >> (64 - k));
}

static PyObject *seed_random(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    char *key;
    Py_ssize_t length;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "seed_random() takes a random.Random and 32 bytes");
        return 0;
    }
    if (!PyType_IsSubtype(Py_TYPE(args[0]), (PyTypeObject *)random_type)) {
        PyErr_SetString(PyExc_TypeError, "seed_random() needs a random.Random");
        return 0;
    }
    if (PyBytes_AsStringAndSize(args[1], &key, &length) < 0) {
        return 0;
    }
    unsigned long long s[4];
    if (length != (Py_ssize_t)sizeof s) {
        PyErr_SetString(PyExc_ValueError, "seed_random() needs 32 bytes");
        return 0;
    }
    __builtin_memcpy(s, key, sizeof s);
    if ((s[0] | s[1] | s[2] | s[3]) == 0) {
        s[0] = 1;
    }
    random_object *random = (random_object *)args[0];
    for (int i = 0; i < MT_WORDS; i += 2) {
        unsigned long long out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = rotl(s[3], 45);
        random->state[i] = (unsigned int)out;
        random->state[i + 1] = (unsigned int)(out >> 32);
    }
    random->state[0] = 0x80000000u;
    random->index = MT_WORDS;
    Py_IncRef(Py_None);
    return Py_None;
}

static PyMethodDef random_state_methods[] = {
    {"seed_random", (PyCFunction)(void (*)(void))seed_random, METH_FASTCALL,
     "seed_random(generator, key, /)\n--\n\n"
     "Give generator's Mersenne Twister the state xoshiro256** expands key (32 bytes) into:\n"
     "624 words, the first set to 0x80000000, to be regenerated before the next draw."},
    {0, 0, 0, 0},
};

int random_state_add_to(PyObject *module) {
    if (check_random_layout() < 0) {
        return -1;
    }
    return PyModule_AddFunctions(module, random_state_methods);
}
