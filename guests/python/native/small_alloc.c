/* A small-object allocator for the guest's CPython, in the manner of pymalloc.
 *
 * componentize-py's CPython is configured without pymalloc, so every object, frame
 * and buffer went to wasi-libc's general-purpose dlmalloc, a large share of a
 * CPU-bound run's time (docs/performance.md). install_small_alloc() wraps CPython's
 * object and PyMem allocators (PyMem_SetAllocator) with this one: requests of at most
 * SMALL_MAX bytes come from pools of equal blocks; everything else, and every block
 * this allocator did not hand out (all that was allocated before it was installed), goes
 * to the allocator it wraps, as the C API asks of an allocator installed after
 * initialisation.
 *
 * The layout is pymalloc's, smaller: 256 KiB arenas taken from the libc; 16 KiB pools
 * inside them, aligned to their size, each serving one size class (8-byte steps, as
 * pymalloc on 32-bit targets) with its own free list; pools with free blocks on a list
 * per class; empty pools back to their arena, for any class, and an arena whose pools
 * are all empty back to the libc, so memory freed in small blocks can serve a large one.
 * A bit per pool-sized piece of the wasm32 address space (4 GiB) says whether an address
 * is ours.
 *
 * The guest is single-threaded, so there is no lock.
 */
#include "stable_abi.h"

typedef unsigned long size_t;
typedef unsigned int uint32_t;
typedef unsigned long uintptr_t;

void *aligned_alloc(size_t alignment, size_t size);
void free(void *ptr);
void *memcpy(void *dest, const void *src, size_t n);
void *memset(void *dest, int c, size_t n);

#define SMALL_MAX 512
#define ALIGNMENT_SHIFT 3
#define CLASSES (SMALL_MAX >> ALIGNMENT_SHIFT)
#define POOL_SHIFT 14
#define POOL_SIZE (1u << POOL_SHIFT)
#define POOLS_PER_ARENA 16u
#define ARENA_SIZE (POOLS_PER_ARENA * POOL_SIZE)

struct arena;

typedef struct pool {
    void *free;           /* the first free block, or NULL when the pool is full */
    struct pool *next;    /* in its class's list of pools with a free block, or its */
    struct pool *prev;    /* arena's list of empty pools (singly linked) */
    struct arena *owner;  /* the arena it is part of */
    uint32_t in_use;      /* blocks handed out */
    uint32_t block_size;
    uint32_t next_offset; /* the first block never handed out */
    uint32_t max_offset;  /* the last block's offset */
} pool;

/* An arena's own header, in its first pool, after that pool's header. */
typedef struct arena {
    char *base;         /* its first pool, as the libc gave it */
    struct arena *next; /* in the list of arenas with an empty or never-used pool */
    struct arena *prev;
    pool *empty;        /* its empty pools */
    uint32_t empties;   /* how many */
    uint32_t carved;    /* pools ever used; the rest have never been touched */
} arena;

/* Each block's offset is a multiple of 8 from the pool, so headers are padded to that. */
#define PAD8(n) (((n) + 7u) & ~7u)
#define POOL_HEADER PAD8(sizeof(pool))
#define ARENA_HEADER PAD8(sizeof(arena))

static pool *used[CLASSES]; /* per class: pools with a free block */
static arena *roomy;        /* arenas with a pool to give */
/* A bit per pool-sized piece of the 4 GiB wasm32 address space: is it one of our pools? */
static unsigned char ours[1u << (32 - POOL_SHIFT - 3)];

static int is_ours(const void *p) {
    uintptr_t piece = (uintptr_t)p >> POOL_SHIFT;
    return (ours[piece >> 3] >> (piece & 7)) & 1;
}

/* Marks (or unmarks) an arena's pools as ours. */
static void mark_arena(const char *base, int mine) {
    for (uintptr_t piece = (uintptr_t)base >> POOL_SHIFT, end = piece + POOLS_PER_ARENA; piece < end; piece++) {
        unsigned char bit = (unsigned char)(1u << (piece & 7));
        ours[piece >> 3] = mine ? ours[piece >> 3] | bit : ours[piece >> 3] & ~bit;
    }
}

static pool *pool_of(const void *p) {
    return (pool *)((uintptr_t)p & ~(uintptr_t)(POOL_SIZE - 1));
}

static void link_roomy(arena *a) {
    a->prev = 0;
    a->next = roomy;
    if (roomy != 0) {
        roomy->prev = a;
    }
    roomy = a;
}

static void unlink_roomy(arena *a) {
    if (a->prev != 0) {
        a->prev->next = a->next;
    } else {
        roomy = a->next;
    }
    if (a->next != 0) {
        a->next->prev = a->prev;
    }
}

/* An empty pool: one given back, else one never used, from the first roomy arena, else
 * from a new arena; NULL when the libc has no memory left. */
static pool *take_pool(void) {
    arena *a = roomy;
    if (a == 0) {
        /* Pools are aligned to their size, so a block finds its pool header; the arena
         * need not be aligned to its own size, which would cost the libc's memalign up
         * to a whole arena of padding each. */
        char *base = aligned_alloc(POOL_SIZE, ARENA_SIZE);
        if (base == 0) {
            return 0;
        }
        mark_arena(base, 1);
        a = (arena *)(base + POOL_HEADER);
        a->base = base;
        a->empty = 0;
        a->empties = 0;
        a->carved = 0;
        link_roomy(a);
    }
    pool *p;
    if (a->empty != 0) {
        p = a->empty;
        a->empty = p->next;
        a->empties--;
    } else {
        p = (pool *)(a->base + a->carved * POOL_SIZE);
        p->owner = a;
        a->carved++;
    }
    if (a->empties == 0 && a->carved == POOLS_PER_ARENA) {
        unlink_roomy(a);
    }
    return p;
}

/* `p` is empty: back to its arena, and the arena back to the libc once all of it is
 * empty, unless it is the only arena with room (so that a block made and dropped over
 * and over does not take and give back an arena each time). */
static void give_pool(pool *p) {
    arena *a = p->owner;
    int was_roomy = a->empties > 0 || a->carved < POOLS_PER_ARENA;
    p->next = a->empty;
    a->empty = p;
    a->empties++;
    if (!was_roomy) {
        link_roomy(a);
    }
    if (a->empties == a->carved && (roomy != a || a->next != 0)) {
        unlink_roomy(a);
        char *base = a->base;
        mark_arena(base, 0);
        free(base);
    }
}

static void link_used(pool *p, unsigned cls) {
    p->prev = 0;
    p->next = used[cls];
    if (used[cls] != 0) {
        used[cls]->prev = p;
    }
    used[cls] = p;
}

static void unlink_used(pool *p, unsigned cls) {
    if (p->prev != 0) {
        p->prev->next = p->next;
    } else {
        used[cls] = p->next;
    }
    if (p->next != 0) {
        p->next->prev = p->prev;
    }
}

/* An empty pool, set up to serve class `cls` and first in the class's list; NULL when
 * memory is out. */
static pool *start_pool(unsigned cls) {
    pool *p = take_pool();
    if (p == 0) {
        return 0;
    }
    /* An arena's first pool holds the arena's header too. */
    uint32_t first = POOL_HEADER + ((char *)p == p->owner->base ? ARENA_HEADER : 0);
    p->block_size = (cls + 1) << ALIGNMENT_SHIFT;
    p->in_use = 0;
    p->free = (char *)p + first;
    *(void **)p->free = 0;
    p->next_offset = first + p->block_size;
    p->max_offset = POOL_SIZE - p->block_size;
    link_used(p, cls);
    return p;
}

/* A block of the class for `size` (1..SMALL_MAX bytes), or NULL when memory is out. */
static void *small_alloc(size_t size) {
    unsigned cls = (unsigned)((size - 1) >> ALIGNMENT_SHIFT);
    pool *p = used[cls];
    if (p == 0 && (p = start_pool(cls)) == 0) {
        return 0;
    }
    void *block = p->free;
    p->in_use++;
    p->free = *(void **)block;
    if (p->free == 0) {
        if (p->next_offset <= p->max_offset) {
            /* Carve the next block only now, so a pool's memory is touched as it is used. */
            p->free = (char *)p + p->next_offset;
            *(void **)p->free = 0;
            p->next_offset += p->block_size;
        } else {
            unlink_used(p, cls);
        }
    }
    return block;
}

static void small_free(void *block) {
    pool *p = pool_of(block);
    unsigned cls = (p->block_size >> ALIGNMENT_SHIFT) - 1;
    int was_full = p->free == 0;
    *(void **)block = p->free;
    p->free = block;
    p->in_use--;
    if (p->in_use == 0) {
        if (!was_full) {
            unlink_used(p, cls);
        }
        give_pool(p);
    } else if (was_full) {
        link_used(p, cls);
    }
}

/* ---------------------------------------------------- CPython's allocator interface */

/* PEP 445's interface: outside the limited API, but public and unchanged since 3.5. */

typedef struct {
    void *ctx;
    void *(*malloc)(void *ctx, size_t size);
    void *(*calloc)(void *ctx, size_t nelem, size_t elsize);
    void *(*realloc)(void *ctx, void *ptr, size_t new_size);
    void (*free)(void *ctx, void *ptr);
} PyMemAllocatorEx;

enum { PYMEM_DOMAIN_RAW, PYMEM_DOMAIN_MEM, PYMEM_DOMAIN_OBJ };
void PyMem_GetAllocator(int domain, PyMemAllocatorEx *allocator);
void PyMem_SetAllocator(int domain, PyMemAllocatorEx *allocator);

/* The allocators wrapped, one per domain; each is its wrapper's `ctx`. */
static PyMemAllocatorEx wrapped_mem, wrapped_obj;

static void *wrap_malloc(void *ctx, size_t size) {
    if (size - 1 < SMALL_MAX) { /* 0 wraps around: the wrapped allocator's business */
        void *block = small_alloc(size);
        if (block != 0) {
            return block;
        }
    }
    PyMemAllocatorEx *next = ctx;
    return next->malloc(next->ctx, size);
}

static void *wrap_calloc(void *ctx, size_t nelem, size_t elsize) {
    if (elsize != 0 && nelem <= SMALL_MAX / elsize && nelem * elsize != 0) {
        void *block = small_alloc(nelem * elsize);
        if (block != 0) {
            return memset(block, 0, nelem * elsize);
        }
    }
    PyMemAllocatorEx *next = ctx;
    return next->calloc(next->ctx, nelem, elsize);
}

static void wrap_free(void *ctx, void *ptr) {
    if (ptr != 0 && is_ours(ptr)) {
        small_free(ptr);
        return;
    }
    PyMemAllocatorEx *next = ctx;
    next->free(next->ctx, ptr);
}

static void *wrap_realloc(void *ctx, void *ptr, size_t new_size) {
    if (ptr == 0) {
        return wrap_malloc(ctx, new_size);
    }
    PyMemAllocatorEx *next = ctx;
    if (!is_ours(ptr)) {
        /* Allocated before installation, or too large: it stays the wrapped allocator's. */
        return next->realloc(next->ctx, ptr, new_size);
    }
    size_t size = pool_of(ptr)->block_size;
    /* Staying, or shrinking by at most a quarter, keeps the block (pymalloc's rule). */
    if (new_size <= size && 4 * new_size > 3 * size) {
        return ptr;
    }
    void *moved = wrap_malloc(ctx, new_size);
    if (moved == 0) {
        return 0;
    }
    memcpy(moved, ptr, new_size < size ? new_size : size);
    small_free(ptr);
    return moved;
}

static PyObject *install(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    if (wrapped_obj.malloc == 0) {
        PyMem_GetAllocator(PYMEM_DOMAIN_MEM, &wrapped_mem);
        PyMem_GetAllocator(PYMEM_DOMAIN_OBJ, &wrapped_obj);
        PyMemAllocatorEx mem = {&wrapped_mem, wrap_malloc, wrap_calloc, wrap_realloc, wrap_free};
        PyMemAllocatorEx obj = {&wrapped_obj, wrap_malloc, wrap_calloc, wrap_realloc, wrap_free};
        PyMem_SetAllocator(PYMEM_DOMAIN_MEM, &mem);
        PyMem_SetAllocator(PYMEM_DOMAIN_OBJ, &obj);
    }
    Py_IncRef(Py_None);
    return Py_None;
}

/* How many arenas the pools have taken: tests check that the allocator is in use. */
static PyObject *arenas(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    long long pools = 0;
    for (size_t i = 0; i < sizeof ours; i++) {
        pools += __builtin_popcount(ours[i]);
    }
    return PyLong_FromLongLong(pools / POOLS_PER_ARENA);
}

/* Puts an empty pool first in the list of every class that has pools with free blocks.
 * Called last at build time: the snapshot's pools have their free blocks scattered over
 * all their pages, in the order the build freed them, so a run that takes a few blocks
 * of a class wrote to as many pages, each of which the slot's reset copies back after
 * the run. From an empty pool its blocks come one after another, on as few pages as
 * they fill. The pools behind it serve the class once it is full, as before. */
static PyObject *fresh_pools(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    for (unsigned cls = 0; cls < CLASSES; cls++) {
        if (used[cls] != 0 && start_pool(cls) == 0) {
            return PyErr_NoMemory();
        }
    }
    Py_IncRef(Py_None);
    return Py_None;
}

static PyMethodDef small_alloc_methods[] = {
    {"install_small_alloc", install, METH_NOARGS,
     "install_small_alloc()\n--\n\n"
     "Serve CPython's PyMem and object allocations of at most 512 bytes from pools."},
    {"small_alloc_fresh_pools", fresh_pools, METH_NOARGS,
     "small_alloc_fresh_pools()\n--\n\n"
     "Put an empty pool first for every size class that has pools with free blocks."},
    {"small_alloc_arenas", arenas, METH_NOARGS,
     "small_alloc_arenas()\n--\n\nHow many 256 KiB arenas the pools have taken."},
    {0, 0, 0, 0},
};

int small_alloc_add_to(PyObject *module) {
    return PyModule_AddFunctions(module, small_alloc_methods);
}
