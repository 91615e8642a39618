/*
 * ordered._fastconsume: the compiled judgement of a fetched batch (OrderedConsumer; optional).
 *
 * split(batch, held) -> free | None (the C twin of ordered.consumer.scan.split_batch) sorts a
 * batch's records of held partitions out of it, in one pass (see fc_split).
 *
 * scan(batch, every, limits, spans, header, route) -> (n, last) | None is the C twin of
 * ordered.consumer.scan.scan_batch (the reference; tests/unit/test_fastconsume.py runs
 * both on generated batches and compares every result). It walks the batch once, in C:
 *
 *   - a record with an error, of a partition not in `limits`, or at or past its
 *     partition's limit (a gate, or a paused partition: limit -1) ends the scan;
 *   - every `every`-th record (index 0, every, 2*every...) is the audit's sample when
 *     an audit is on (`header` or `route` not None): its offset must lie in its
 *     partition's span [first, end) of `spans`, its headers be None or equal `header`
 *     (header audit), its key (if any) route to its partition by `route(key)`
 *     (key audit);
 *     else the scan ends there;
 *   - `last[partition]` is the offset of the partition's last record scanned.
 *
 * n is the number of records that passed (len(batch): the batch is served whole; else
 * the slow path takes over at index n). None: the batch holds an object that is not a
 * confluent Message of the bound layout, or a partition past MAX_PARTITION; the caller
 * runs the reference.
 *
 * Records are read through confluent-kafka's Message struct (partition, offset, key and
 * error are plain fields there, stable since confluent-kafka 1.0): bind(probe, partition,
 * offset, key) checks that layout on a Message built by the Python side with those
 * values (bind_message_layout in coordinator/kernel/confluent_private.py, the one place
 * that knows confluent's private parts; tests/unit/test_confluent_private.py says when
 * an upgrade moves them) and, only when every field reads back, binds scan() to that
 * type (unbound, scan() returns None). Headers are read through the headers() method (librdkafka's
 * headers are converted on first use), for the sampled records only.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The start of confluent-kafka's Message (confluent_kafka.h, with RD_KAFKA_V_HEADERS). */
typedef struct {
    PyObject_HEAD
    PyObject *topic;
    PyObject *value;
    PyObject *key;
    PyObject *headers;
    void *c_headers;
    PyObject *error;
    int32_t partition;
    int64_t offset;
} MessageHead;

#define MAX_PARTITION 65535
#define STACK_PARTITIONS 64

static PyTypeObject *message_type = NULL; /* bound by bind() */
static PyObject *str_headers;

static int as_bound(PyObject *value, int64_t *out) {
    /* An offset bound (an int, or a float such as math.inf): the least integer offset
     * o with o >= value, clamped to int64. */
    if (PyLong_Check(value)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (v == -1 && PyErr_Occurred())
            return -1;
        *out = overflow > 0 ? INT64_MAX : overflow < 0 ? INT64_MIN : (int64_t)v;
        return 0;
    }
    double d = PyFloat_AsDouble(value);
    if (d == -1.0 && PyErr_Occurred())
        return -1;
    if (isnan(d)) {
        *out = INT64_MAX; /* o >= nan is never true */
        return 0;
    }
    d = ceil(d);
    *out = d >= 9.2e18 ? INT64_MAX : d <= -9.2e18 ? INT64_MIN : (int64_t)d;
    return 0;
}

static PyObject *fc_bind(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "bind(probe, partition, offset, key)");
        return NULL;
    }
    PyObject *probe = args[0];
    long long partition = PyLong_AsLongLong(args[1]);
    long long offset = PyLong_AsLongLong(args[2]);
    if (PyErr_Occurred())
        return NULL;
    PyTypeObject *type = Py_TYPE(probe);
    if (type->tp_basicsize < (Py_ssize_t)sizeof(MessageHead) || type->tp_itemsize != 0)
        Py_RETURN_FALSE;
    MessageHead *m = (MessageHead *)probe;
    if (m->partition != partition || m->offset != offset)
        Py_RETURN_FALSE;
    if (m->key == NULL || PyObject_RichCompareBool(m->key, args[3], Py_EQ) != 1) {
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    if (m->error != NULL && m->error != Py_None)
        Py_RETURN_FALSE;
    Py_INCREF(type);
    Py_XSETREF(message_type, type);
    Py_RETURN_TRUE;
}

static PyObject *fc_bound(PyObject *mod, PyObject *unused) {
    return PyBool_FromLong(message_type != NULL);
}

/* Fill per-partition arrays from a dict {partition: value}; 1 ok, 0 unusable, -1 error. */
static int fill_limits(PyObject *limits, Py_ssize_t size, int64_t *limit, char *known) {
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(limits, &pos, &k, &v)) {
        long p = PyLong_AsLong(k);
        if (p == -1 && PyErr_Occurred())
            return -1;
        if (p < 0 || p >= size)
            continue; /* no record can name it (the size covers every key) */
        if (as_bound(v, &limit[p]) < 0)
            return -1;
        known[p] = 1;
    }
    return 1;
}

static int fill_spans(PyObject *spans, Py_ssize_t size, int64_t *lo, int64_t *hi, char *has) {
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(spans, &pos, &k, &v)) {
        long p = PyLong_AsLong(k);
        if (p == -1 && PyErr_Occurred())
            return -1;
        if (p < 0 || p >= size)
            continue;
        if (!PyTuple_Check(v) || PyTuple_GET_SIZE(v) != 2) {
            PyErr_SetString(PyExc_TypeError, "a span is a (first, end) tuple");
            return -1;
        }
        if (as_bound(PyTuple_GET_ITEM(v, 0), &lo[p]) < 0 ||
            as_bound(PyTuple_GET_ITEM(v, 1), &hi[p]) < 0)
            return -1;
        has[p] = 1;
    }
    return 1;
}

/* The sampled record's audit: 1 passes, 0 ends the scan, -1 error. */
static int audit_one(MessageHead *m, int32_t p, PyObject *header, PyObject *route) {
    if (header != Py_None) {
        PyObject *h = PyObject_CallMethodNoArgs((PyObject *)m, str_headers);
        if (h == NULL)
            return -1;
        int same = h == Py_None ? 1 : PyObject_RichCompareBool(h, header, Py_EQ);
        Py_DECREF(h);
        if (same < 0)
            return -1;
        if (!same)
            return 0;
    }
    if (route != Py_None) {
        PyObject *key = m->key;
        if (key == NULL || key == Py_None)
            return 1; /* unkeyed: nothing to route (as the audit's sample) */
        PyObject *r = PyObject_Vectorcall(route, &key, 1, NULL);
        if (r == NULL) {
            PyErr_Clear(); /* the reference: a key the router refuses ends the scan */
            return 0;
        }
        long routed = PyLong_Check(r) ? PyLong_AsLong(r) : -2;
        Py_DECREF(r);
        if (routed == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (routed != p)
            return 0;
    }
    return 1;
}

/* The per-partition arrays of one scan (size entries each). */
typedef struct {
    int64_t *limit, *lo, *hi, *last;
    char *known, *has, *seen;
    int32_t *first_seen;
    Py_ssize_t nseen;
} ScanArrays;

enum { PASS_DONE = 1, PASS_WIDER = 0, PASS_ERROR = -1, PASS_FOREIGN = 2 };

/* The scan itself over arrays of `size` partitions: PASS_DONE with *end the number of
 * records that passed; PASS_WIDER when a record names a partition >= size (only
 * reachable with wider = 1, for the stack-sized first try); PASS_FOREIGN when the batch
 * holds a non-Message or a partition past MAX_PARTITION (the records after the scan's
 * end are checked too, so the result does not depend on where it ended). */
static int scan_pass(PyObject *batch, Py_ssize_t count, Py_ssize_t size, Py_ssize_t every,
                     int audit, PyObject *header, PyObject *route, ScanArrays *a,
                     Py_ssize_t *end) {
    Py_ssize_t n, sample = audit ? 0 : count; /* the next sampled index (no division) */
    for (n = 0; n < count; n++) {
        MessageHead *m = (MessageHead *)PyList_GET_ITEM(batch, n);
        if (Py_TYPE(m) != message_type)
            return PASS_FOREIGN;
        int32_t p = m->partition;
        if (p >= size)
            return p > MAX_PARTITION ? PASS_FOREIGN : PASS_WIDER;
        if (m->error != NULL && m->error != Py_None)
            break;
        /* No partition (-1) or no offset (negative): what the methods return as None. */
        if (p < 0 || m->offset < 0 || !a->known[p] || m->offset >= a->limit[p])
            break;
        if (n == sample) {
            sample += every;
            if (!a->has[p] || m->offset < a->lo[p] || m->offset >= a->hi[p])
                break;
            int ok = audit_one(m, p, header, route);
            if (ok < 0)
                return PASS_ERROR;
            if (!ok)
                break;
        }
        if (!a->seen[p]) {
            a->seen[p] = 1;
            a->first_seen[a->nseen++] = p;
        }
        a->last[p] = m->offset;
    }
    *end = n;
    for (Py_ssize_t i = n; i < count; i++) {
        PyObject *obj = PyList_GET_ITEM(batch, i);
        if (Py_TYPE(obj) != message_type || ((MessageHead *)obj)->partition > MAX_PARTITION)
            return PASS_FOREIGN;
    }
    return PASS_DONE;
}

/* Set up `a` over mem_a/mem_b for `size` partitions and fill the limits and spans. */
static int scan_arrays(ScanArrays *a, Py_ssize_t size, int64_t *mem_a, char *mem_b,
                       int32_t *first_seen, PyObject *limits, PyObject *spans, int audit) {
    a->limit = mem_a;
    a->lo = mem_a + size;
    a->hi = mem_a + 2 * size;
    a->last = mem_a + 3 * size;
    a->known = mem_b;
    a->has = mem_b + size;
    a->seen = mem_b + 2 * size;
    a->first_seen = first_seen;
    a->nseen = 0;
    if (size == 0)
        return 0;
    memset(mem_b, 0, 3 * (size_t)size);
    if (fill_limits(limits, size, a->limit, a->known) < 0 ||
        (audit && fill_spans(spans, size, a->lo, a->hi, a->has) < 0))
        return -1;
    return 0;
}

static PyObject *fc_scan(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "scan(batch, every, limits, spans, header, route)");
        return NULL;
    }
    PyObject *batch = args[0], *limits = args[2], *spans = args[3];
    PyObject *header = args[4], *route = args[5];
    if (message_type == NULL || !PyList_CheckExact(batch))
        Py_RETURN_NONE;
    if (!PyDict_Check(limits) || !PyDict_Check(spans)) {
        PyErr_SetString(PyExc_TypeError, "limits and spans are dicts");
        return NULL;
    }
    Py_ssize_t every = PyLong_AsSsize_t(args[1]);
    if (every == -1 && PyErr_Occurred())
        return NULL;
    if (every < 1) {
        PyErr_SetString(PyExc_ValueError, "every >= 1");
        return NULL;
    }
    int audit = header != Py_None || route != Py_None;
    Py_ssize_t count = PyList_GET_SIZE(batch);
    int64_t stack_a[STACK_PARTITIONS * 4];
    char stack_b[STACK_PARTITIONS * 3];
    int32_t order[STACK_PARTITIONS];
    int64_t *mem_a = stack_a;
    char *mem_b = stack_b;
    int32_t *first_seen = order;
    PyObject *result = NULL, *out = NULL;
    ScanArrays a;
    Py_ssize_t n = 0;
    /* First in one pass over stack arrays (nearly every topic has fewer partitions);
     * a record of a partition past them starts again with arrays sized to the batch
     * (a pass over it first: no allocation sized by a dict's keys). A retried pass
     * reads the sampled headers again: reading them has no effect. */
    if (scan_arrays(&a, STACK_PARTITIONS, mem_a, mem_b, first_seen, limits, spans, audit) < 0)
        return NULL;
    int pass = scan_pass(batch, count, STACK_PARTITIONS, every, audit, header, route, &a, &n);
    if (pass == PASS_WIDER) {
        int32_t top = -1;
        for (Py_ssize_t i = 0; i < count; i++) {
            PyObject *obj = PyList_GET_ITEM(batch, i);
            if (Py_TYPE(obj) != message_type)
                Py_RETURN_NONE;
            int32_t p = ((MessageHead *)obj)->partition;
            if (p > MAX_PARTITION)
                Py_RETURN_NONE;
            if (p > top)
                top = p;
        }
        Py_ssize_t size = (Py_ssize_t)top + 1;
        mem_a = PyMem_Malloc(sizeof(int64_t) * 4 * (size_t)size);
        mem_b = PyMem_Malloc(3 * (size_t)size);
        first_seen = PyMem_Malloc(sizeof(int32_t) * (size_t)size);
        if (mem_a == NULL || mem_b == NULL || first_seen == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        if (scan_arrays(&a, size, mem_a, mem_b, first_seen, limits, spans, audit) < 0)
            goto done;
        pass = scan_pass(batch, count, size, every, audit, header, route, &a, &n);
    }
    if (pass == PASS_ERROR)
        goto done;
    if (pass == PASS_FOREIGN) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    out = PyDict_New();
    if (out == NULL)
        goto done;
    for (Py_ssize_t j = 0; j < a.nseen; j++) {
        int32_t p = a.first_seen[j];
        PyObject *key = PyLong_FromLong(p);
        PyObject *value = key == NULL ? NULL : PyLong_FromLongLong(a.last[p]);
        int failed = value == NULL || PyDict_SetItem(out, key, value) < 0;
        Py_XDECREF(key);
        Py_XDECREF(value);
        if (failed)
            goto done;
    }
    result = Py_BuildValue("(nO)", n, out);
done:
    Py_XDECREF(out);
    if (mem_a != stack_a) {
        PyMem_Free(mem_a);
        PyMem_Free(mem_b);
        PyMem_Free(first_seen);
    }
    return result;
}

static PyObject *fc_split(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    /* split(batch, held) -> free | None: the C twin of ordered.consumer.scan.split_batch.
     * Each record of a partition that is a key of `held` (a dict partition -> list), and
     * has no error, is appended to that list; the others, in order, make up `free`. None
     * (nothing appended) when the module is unbound or the batch holds anything but
     * bound Messages. */
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "split(batch, held)");
        return NULL;
    }
    PyObject *batch = args[0], *held = args[1];
    if (message_type == NULL || !PyList_CheckExact(batch))
        Py_RETURN_NONE;
    if (!PyDict_Check(held)) {
        PyErr_SetString(PyExc_TypeError, "held is a dict");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(batch);
    for (Py_ssize_t i = 0; i < count; i++) {
        if (Py_TYPE(PyList_GET_ITEM(batch, i)) != message_type)
            Py_RETURN_NONE;
    }
    PyObject *free_list = PyList_New(0);
    if (free_list == NULL)
        return NULL;
    int32_t run_p = -1; /* records come in runs of one partition: one lookup per run */
    PyObject *run_list = NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        MessageHead *m = (MessageHead *)PyList_GET_ITEM(batch, i);
        PyObject *target = NULL;
        if ((m->error == NULL || m->error == Py_None) && m->partition >= 0) {
            if (m->partition != run_p) {
                PyObject *key = PyLong_FromLong(m->partition);
                if (key == NULL)
                    goto fail;
                run_list = PyDict_GetItemWithError(held, key);
                Py_DECREF(key);
                if (run_list == NULL && PyErr_Occurred())
                    goto fail;
                if (run_list != NULL && !PyList_Check(run_list)) {
                    PyErr_SetString(PyExc_TypeError, "held maps partitions to lists");
                    goto fail;
                }
                run_p = m->partition;
            }
            target = run_list;
        }
        if (PyList_Append(target != NULL ? target : free_list, (PyObject *)m) < 0)
            goto fail;
    }
    return free_list;
fail:
    Py_DECREF(free_list);
    return NULL;
}

static PyMethodDef module_methods[] = {
    {"scan", (PyCFunction)(void (*)(void))fc_scan, METH_FASTCALL,
     "scan(batch, every, limits, spans, header, route) -> (n, last) or None."},
    {"split", (PyCFunction)(void (*)(void))fc_split, METH_FASTCALL,
     "split(batch, held) -> the records not held, or None; held records join held[partition]."},
    {"bind", (PyCFunction)(void (*)(void))fc_bind, METH_FASTCALL,
     "bind(probe, partition, offset, key) -> whether scan() reads this Message layout."},
    {"bound", (PyCFunction)fc_bound, METH_NOARGS, "Whether bind() succeeded."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ordered._fastconsume",
    "The compiled judgement of a fetched batch (see ordered/_fastconsume.c).", -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__fastconsume(void) {
    str_headers = PyUnicode_InternFromString("headers");
    if (str_headers == NULL)
        return NULL;
    return PyModule_Create(&module);
}
