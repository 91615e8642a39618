/*
 * ordered._fastproduce: the compiled send path of OrderedProducer (optional).
 *
 * route_hash() is the one C home of the KIP-253 routing formula (its Python twin is
 * linear_hash.Router.partition; tests/unit/test_router_parity.py keeps them equal):
 * r = h % high, folded back by low when r >= active, with (low, high) the moduli of
 * (initial, active) that the Python router computed.
 *
 * Router(router) is the compiled twin of a murmur3 linear_hash.Router: its partition(key)
 * hashes a bytes or ASCII str key here (murmur3_x86_32, seed 0, unsigned) and calls the
 * Python router's partition for any other key (same result, same errors).
 *
 * SendPath is the C base of the compiled producer class (ordered.producer.send): its
 * produce method is the send path, a direct C call. _bind_send_path(rd_produce, table,
 * slow) gives it confluent's bound produce, the table the Python side keeps and the
 * Python produce. For the common call produce(topic, value, key) (value/key also as
 * keywords) it looks the topic up in `table` and:
 *
 *   - table[topic] is None: a plain topic; rd_produce(topic, value, key);
 *   - table[topic] is a Router: an ordered topic routed by murmur3 with no switch under
 *     way; a bytes or ASCII str key is routed here by route_hash, then
 *     rd_produce(topic, value, key, partition);
 *   - anything else (topic missing, another argument, an unkeyed record, a key of
 *     another type): slow(self, *args, **kwargs), the pure-Python path.
 *
 * Why it is safe without the producer's lock (docs/protocol.md, "Fencing the route
 * switch"): from the table lookup to the return of rd_produce (confluent's produce,
 * which neither releases the GIL nor runs Python code; exact argument types and the
 * cyclic GC held off keep it so) this function holds the GIL and runs no Python code,
 * so the Python side's switch, which removes the entry
 * before it starts a drain, happens entirely before or entirely after it: a record
 * routed by an old entry is already in librdkafka's queue when the switch ends.
 *
 * A fourth callable, OnlyError(user), is the compiled twin of
 * ordered.producer.tracking.OnlyError (the reference): the delivery callback that
 * emulates delivery.report.only.error. confluent calls it for every delivered record
 * of an untracked send; a success (err is None) returns at once without entering
 * Python code, a failure calls user(err, msg).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>

static inline uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

static uint32_t murmur3_32(const unsigned char *data, Py_ssize_t len) {
    const uint32_t c1 = 0xcc9e2d51u, c2 = 0x1b873593u;
    uint32_t h1 = 0; /* seed 0, as mmh3.hash(key) */
    Py_ssize_t nblocks = len / 4, i;
    for (i = 0; i < nblocks; i++) {
        const unsigned char *b = data + i * 4;
        /* Little-endian blocks, assembled bytewise: the same on every machine. */
        uint32_t k1 = (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) |
                      ((uint32_t)b[3] << 24);
        k1 *= c1;
        k1 = rotl32(k1, 15);
        k1 *= c2;
        h1 ^= k1;
        h1 = rotl32(h1, 13);
        h1 = h1 * 5 + 0xe6546b64u;
    }
    const unsigned char *tail = data + nblocks * 4;
    uint32_t k1 = 0;
    switch (len & 3) {
    case 3:
        k1 ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        k1 ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        k1 ^= (uint32_t)tail[0];
        k1 *= c1;
        k1 = rotl32(k1, 15);
        k1 *= c2;
        h1 ^= k1;
    }
    h1 ^= (uint32_t)len;
    h1 ^= h1 >> 16;
    h1 *= 0x85ebca6bu;
    h1 ^= h1 >> 13;
    h1 *= 0xc2b2ae35u;
    h1 ^= h1 >> 16;
    return h1;
}

/* The bytes of a key the fast path hashes; 0 when it must take the slow path. */
static int key_bytes(PyObject *key, const unsigned char **data, Py_ssize_t *len) {
    if (PyBytes_CheckExact(key)) {
        *data = (const unsigned char *)PyBytes_AS_STRING(key);
        *len = PyBytes_GET_SIZE(key);
        return 1;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_CheckExact(key) && PyUnicode_IS_READY(key) && PyUnicode_IS_ASCII(key)) {
#else
    if (PyUnicode_CheckExact(key) && PyUnicode_IS_ASCII(key)) {
#endif
        /* An ASCII str is its own UTF-8 encoding. */
        *data = (const unsigned char *)PyUnicode_DATA(key);
        *len = PyUnicode_GET_LENGTH(key);
        return 1;
    }
    return 0;
}

/* The KIP-253 routing formula, the one C copy (see the top of this file). */
static inline long route_hash(uint32_t h, long high, long low, long active) {
    long r = (long)(h % (uint32_t)high);
    return r >= active ? r - low : r;
}

/* Router(router): the compiled twin of a murmur3 linear_hash.Router. */
typedef struct {
    PyObject_HEAD
    PyObject *fallback; /* the Python router's bound partition */
    PyObject *initial;
    PyObject *active;
    long high, low, active_n;
} Router;

static PyTypeObject RouterType;

static long router_long(PyObject *router, const char *name) {
    PyObject *value = PyObject_GetAttrString(router, name);
    if (value == NULL)
        return -1;
    long result = PyLong_AsLong(value);
    Py_DECREF(value);
    return result;
}

static int router_init(Router *self, PyObject *args, PyObject *kwargs) {
    PyObject *router, *algorithm, *fallback, *initial, *active;
    static char *kws[] = {"router", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:Router", kws, &router))
        return -1;
    algorithm = PyObject_GetAttrString(router, "algorithm");
    if (algorithm == NULL)
        return -1;
    int murmur3 = PyUnicode_Check(algorithm) &&
                  PyUnicode_CompareWithASCIIString(algorithm, "murmur3") == 0;
    Py_DECREF(algorithm);
    if (!murmur3) {
        PyErr_SetString(PyExc_ValueError, "Router(router): only a murmur3 router is compiled");
        return -1;
    }
    long high = router_long(router, "modulus_high");
    long low = router_long(router, "modulus_low");
    long active_n = router_long(router, "active");
    if (PyErr_Occurred())
        return -1;
    if (high <= 0 || (unsigned long)high > 0xffffffffUL || low <= 0 || active_n <= 0) {
        PyErr_SetString(PyExc_ValueError, "Router(router): moduli out of the compiled range");
        return -1;
    }
    fallback = PyObject_GetAttrString(router, "partition");
    if (fallback == NULL)
        return -1;
    initial = PyObject_GetAttrString(router, "initial");
    active = PyObject_GetAttrString(router, "active");
    if (initial == NULL || active == NULL) {
        Py_DECREF(fallback);
        Py_XDECREF(initial);
        Py_XDECREF(active);
        return -1;
    }
    Py_XSETREF(self->fallback, fallback);
    Py_XSETREF(self->initial, initial);
    Py_XSETREF(self->active, active);
    self->high = high;
    self->low = low;
    self->active_n = active_n;
    return 0;
}

static PyObject *router_partition(Router *self, PyObject *key) {
    const unsigned char *data;
    Py_ssize_t len;
    if (self->fallback == NULL) { /* made by __new__ without __init__ */
        PyErr_SetString(PyExc_TypeError, "Router: no router (call __init__ first)");
        return NULL;
    }
    if (!key_bytes(key, &data, &len))
        return PyObject_CallOneArg(self->fallback, key);
    return PyLong_FromLong(route_hash(murmur3_32(data, len), self->high, self->low,
                                      self->active_n));
}

static PyObject *router_get_initial(Router *self, void *closure) {
    return Py_NewRef(self->initial ? self->initial : Py_None);
}

static PyObject *router_get_active(Router *self, void *closure) {
    return Py_NewRef(self->active ? self->active : Py_None);
}

static PyObject *router_repr(Router *self) {
    return PyUnicode_FromFormat("CompiledRouter(initial=%R, active=%R)",
                                self->initial ? self->initial : Py_None,
                                self->active ? self->active : Py_None);
}

static int router_traverse(Router *self, visitproc visit, void *arg) {
    Py_VISIT(self->fallback);
    Py_VISIT(self->initial);
    Py_VISIT(self->active);
    return 0;
}

static int router_clear(Router *self) {
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->initial);
    Py_CLEAR(self->active);
    return 0;
}

static void router_dealloc(Router *self) {
    PyObject_GC_UnTrack(self);
    router_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef router_methods[] = {
    {"partition", (PyCFunction)router_partition, METH_O,
     "partition(key) -> the linear-hashing partition of key (as linear_hash.Router)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef router_getset[] = {
    {"initial", (getter)router_get_initial, NULL, "N.", NULL},
    {"active", (getter)router_get_active, NULL, "U.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject RouterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ordered._fastproduce.Router",
    .tp_basicsize = sizeof(Router),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)router_init,
    .tp_traverse = (traverseproc)router_traverse,
    .tp_clear = (inquiry)router_clear,
    .tp_dealloc = (destructor)router_dealloc,
    .tp_repr = (reprfunc)router_repr,
    .tp_methods = router_methods,
    .tp_getset = router_getset,
    .tp_doc = "Router(router): the compiled twin of a murmur3 linear_hash.Router.",
};

typedef struct {
    PyObject_HEAD
    PyObject *rd_produce; /* confluent's bound Producer.produce */
    PyObject *slow;       /* the pure-Python produce, unbound: slow(self, ...) */
    PyObject *table;      /* dict: topic -> None | Router */
} SendPath;

static PyObject *str_value, *str_key;

/* Call confluent's produce with the cyclic GC held off: the call allocates (its argument
 * tuple), and an automatic collection there could run finalizers, i.e. Python code, in
 * the middle of the fenced section. Collection resumes at a later allocation. */
static PyObject *fenced_call(PyObject *produce, PyObject *const *call, size_t n) {
    int enabled = PyGC_Disable();
    PyObject *result = PyObject_Vectorcall(produce, call, n, NULL);
    if (enabled)
        PyGC_Enable();
    return result;
}

/* slow(self, *args, **kwargs): the Python send path, arguments unchanged. */
static PyObject *send_slow(SendPath *self, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames) {
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    PyObject *stack[16];
    if (self->slow == NULL) { /* made by __new__, never bound */
        PyErr_SetString(PyExc_TypeError, "SendPath: not bound (call _bind_send_path first)");
        return NULL;
    }
    if (1 + nargs + nkw > 16) {
        PyErr_SetString(PyExc_TypeError, "produce: too many arguments");
        return NULL;
    }
    stack[0] = (PyObject *)self;
    for (Py_ssize_t i = 0; i < nargs + nkw; i++)
        stack[1 + i] = args[i];
    return PyObject_Vectorcall(self->slow, stack, 1 + nargs, kwnames);
}

static PyObject *send_produce(SendPath *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames) {
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    PyObject *topic, *value = Py_None, *key = Py_None;
    Py_ssize_t i;

    if (nargs < 1 || nargs > 3 || self->table == NULL)
        return send_slow(self, args, nargs, kwnames);
    topic = args[0];
    if (nargs >= 2)
        value = args[1];
    if (nargs == 3)
        key = args[2];
    for (i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        /* Keyword names are interned: identity first, then equality. */
        if ((name == str_value || PyUnicode_CompareWithASCIIString(name, "value") == 0) &&
            nargs < 2)
            value = args[nargs + i];
        else if ((name == str_key || PyUnicode_CompareWithASCIIString(name, "key") == 0) &&
                 nargs < 3)
            key = args[nargs + i];
        else
            return send_slow(self, args, nargs, kwnames);
    }
    /* Exact types only: a subclass, or (3.12+) a Python-level buffer, could run Python
     * code inside confluent's argument parsing, and so let another thread switch. */
    if (!PyUnicode_CheckExact(topic) ||
        !(value == Py_None || PyBytes_CheckExact(value) || PyUnicode_CheckExact(value)))
        return send_slow(self, args, nargs, kwnames);
    /* An exact str key: the lookup runs no Python code. */
    PyObject *entry = PyDict_GetItemWithError(self->table, topic);
    if (entry == NULL) {
        if (PyErr_Occurred())
            return NULL;
        return send_slow(self, args, nargs, kwnames);
    }
    PyObject *call[4];
    call[0] = topic;
    call[1] = value;
    call[2] = key;
    if (entry == Py_None)
        return fenced_call(self->rd_produce, call, 3);
    if (!Py_IS_TYPE(entry, &RouterType) || ((Router *)entry)->fallback == NULL)
        return send_slow(self, args, nargs, kwnames);
    const unsigned char *data;
    Py_ssize_t len;
    if (key == Py_None || !key_bytes(key, &data, &len))
        return send_slow(self, args, nargs, kwnames);
    Router *router = (Router *)entry;
    PyObject *partition = PyLong_FromLong(
        route_hash(murmur3_32(data, len), router->high, router->low, router->active_n));
    if (partition == NULL)
        return NULL;
    call[3] = partition;
    PyObject *result = fenced_call(self->rd_produce, call, 4);
    Py_DECREF(partition);
    return result;
}

static PyObject *send_bind(SendPath *self, PyObject *args, PyObject *kwargs) {
    PyObject *rd_produce, *table, *slow;
    static char *kws[] = {"rd_produce", "table", "slow", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!O:_bind_send_path", kws, &rd_produce,
                                     &PyDict_Type, &table, &slow))
        return NULL;
    Py_INCREF(rd_produce);
    Py_INCREF(table);
    Py_INCREF(slow);
    Py_XSETREF(self->rd_produce, rd_produce);
    Py_XSETREF(self->table, table);
    Py_XSETREF(self->slow, slow);
    Py_RETURN_NONE;
}

static int send_traverse(SendPath *self, visitproc visit, void *arg) {
    Py_VISIT(self->rd_produce);
    Py_VISIT(self->slow);
    Py_VISIT(self->table);
    return 0;
}

static int send_clear(SendPath *self) {
    Py_CLEAR(self->rd_produce);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->table);
    return 0;
}

static void send_dealloc(SendPath *self) {
    PyObject_GC_UnTrack(self);
    send_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *fast_partition(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    /* partition(key, high, low, active): route_hash of murmur3(key) by explicit moduli
     * (callers that hold a layout's moduli; Router(router).partition is the usual way). */
    const unsigned char *data;
    Py_ssize_t len;
    long high, low, active;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "partition(key, high, low, active)");
        return NULL;
    }
    if (!key_bytes(args[0], &data, &len)) {
        PyErr_SetString(PyExc_TypeError, "key must be bytes or an ASCII str");
        return NULL;
    }
    high = PyLong_AsLong(args[1]);
    low = PyLong_AsLong(args[2]);
    active = PyLong_AsLong(args[3]);
    if (PyErr_Occurred())
        return NULL;
    if (high <= 0 || (unsigned long)high > 0xffffffffUL) {
        PyErr_SetString(PyExc_ValueError, "high must be in [1, 2**32)");
        return NULL;
    }
    return PyLong_FromLong(route_hash(murmur3_32(data, len), high, low, active));
}

static PyObject *fast_hash(PyObject *mod, PyObject *key) {
    /* murmur3_x86_32(key, seed 0), unsigned: as mmh3.hash(key, 0, False). */
    const unsigned char *data;
    Py_ssize_t len;
    if (!key_bytes(key, &data, &len)) {
        PyErr_SetString(PyExc_TypeError, "key must be bytes or an ASCII str");
        return NULL;
    }
    return PyLong_FromUnsignedLong(murmur3_32(data, len));
}

static PyMethodDef send_methods[] = {
    {"produce", (PyCFunction)(void (*)(void))send_produce, METH_FASTCALL | METH_KEYWORDS,
     "produce(topic, value=None, key=None, ...): the compiled send path; any other call "
     "goes to the Python produce."},
    {"_bind_send_path", (PyCFunction)(void (*)(void))send_bind, METH_VARARGS | METH_KEYWORDS,
     "_bind_send_path(rd_produce, table, slow): the send path's confluent produce, table "
     "and Python produce."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SendPathType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ordered._fastproduce.SendPath",
    .tp_basicsize = sizeof(SendPath),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_traverse = (traverseproc)send_traverse,
    .tp_clear = (inquiry)send_clear,
    .tp_dealloc = (destructor)send_dealloc,
    .tp_methods = send_methods,
    .tp_doc = "SendPath: the base of the compiled producer class; its produce is the "
              "compiled send path.",
};

/* OnlyError(user): calls user(err, msg) when err is not None, else nothing. */
typedef struct {
    PyObject_HEAD
    PyObject *user;
} OnlyError;

static PyObject *only_error_call(OnlyError *self, PyObject *args, PyObject *kwargs) {
    static char *kws[] = {"err", "msg", NULL};
    PyObject *err, *msg;
    /* confluent's call: a tuple of two, no keywords. Anything else is parsed as the
     * Python twin's signature __call__(self, err, msg) would take it. */
    if (kwargs == NULL && PyTuple_CheckExact(args) && PyTuple_GET_SIZE(args) == 2) {
        err = PyTuple_GET_ITEM(args, 0);
        msg = PyTuple_GET_ITEM(args, 1);
    } else if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:OnlyError", kws, &err, &msg)) {
        return NULL;
    }
    if (err == Py_None)
        Py_RETURN_NONE;
    if (self->user == NULL) { /* made by __new__ without __init__ */
        PyErr_SetString(PyExc_TypeError, "OnlyError: no callback (call __init__ first)");
        return NULL;
    }
    PyObject *result = PyObject_CallFunctionObjArgs(self->user, err, msg, NULL);
    if (result == NULL)
        return NULL;
    Py_DECREF(result);
    Py_RETURN_NONE;
}

static int only_error_init(OnlyError *self, PyObject *args, PyObject *kwargs) {
    PyObject *user;
    static char *kws[] = {"user", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:OnlyError", kws, &user))
        return -1;
    if (!PyCallable_Check(user)) {
        PyErr_SetString(PyExc_TypeError, "OnlyError(user): user must be callable");
        return -1;
    }
    Py_INCREF(user);
    Py_XSETREF(self->user, user);
    return 0;
}

static int only_error_traverse(OnlyError *self, visitproc visit, void *arg) {
    Py_VISIT(self->user);
    return 0;
}

static int only_error_clear(OnlyError *self) {
    Py_CLEAR(self->user);
    return 0;
}

static void only_error_dealloc(OnlyError *self) {
    PyObject_GC_UnTrack(self);
    only_error_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *only_error_repr(OnlyError *self) {
    return PyUnicode_FromFormat("OnlyError(%R)", self->user);
}

static PyTypeObject OnlyErrorType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ordered._fastproduce.OnlyError",
    .tp_basicsize = sizeof(OnlyError),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_call = (ternaryfunc)only_error_call,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)only_error_init,
    .tp_traverse = (traverseproc)only_error_traverse,
    .tp_clear = (inquiry)only_error_clear,
    .tp_dealloc = (destructor)only_error_dealloc,
    .tp_repr = (reprfunc)only_error_repr,
    .tp_doc = "OnlyError(user): a delivery callback calling user(err, msg) for failures only.",
};

static PyMethodDef module_methods[] = {
    {"partition", (PyCFunction)(void (*)(void))fast_partition, METH_FASTCALL,
     "partition(key, high, low, active) -> route_hash of murmur3(key) by these moduli."},
    {"hash", (PyCFunction)fast_hash, METH_O, "murmur3_x86_32(key, seed 0), unsigned."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ordered._fastproduce",
    "The compiled send path of OrderedProducer (see ordered/_fastproduce.c).", -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__fastproduce(void) {
    PyObject *m;
    if (PyType_Ready(&SendPathType) < 0 || PyType_Ready(&OnlyErrorType) < 0 ||
        PyType_Ready(&RouterType) < 0)
        return NULL;
    str_value = PyUnicode_InternFromString("value");
    str_key = PyUnicode_InternFromString("key");
    if (str_value == NULL || str_key == NULL)
        return NULL;
    m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&SendPathType);
    if (PyModule_AddObject(m, "SendPath", (PyObject *)&SendPathType) < 0) {
        Py_DECREF(&SendPathType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&RouterType);
    if (PyModule_AddObject(m, "Router", (PyObject *)&RouterType) < 0) {
        Py_DECREF(&RouterType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&OnlyErrorType);
    if (PyModule_AddObject(m, "OnlyError", (PyObject *)&OnlyErrorType) < 0) {
        Py_DECREF(&OnlyErrorType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
