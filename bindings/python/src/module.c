/*
 * module.c — the _tessera module: init(), devices(), the exception, and the
 * type registrations (Model in model.c, Context in context.c).
 */
#include "pytessera.h"

#include <string.h>

PyObject *pyt_error;

PyObject *pyt_raise(const char *what) {
    const char *msg = tessera_last_error();
    if (!msg || !msg[0]) msg = "unknown error";
    if (what && strncmp(msg, what, strlen(what)) != 0) /* not "grammar: grammar: ..." */
        PyErr_Format(pyt_error, "%s: %s", what, msg);
    else
        PyErr_SetString(pyt_error, msg);
    return NULL;
}

/* init(plugin_dirs: list[str], verbosity: int) — once per process; later
 * calls do nothing (tessera_init's rule). */
static PyObject *mod_init(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *dirs;
    int verbosity = 0;
    if (!PyArg_ParseTuple(args, "O!i", &PyList_Type, &dirs, &verbosity)) return NULL;
    Py_ssize_t n = PyList_Size(dirs);
    if (n > 16) n = 16;
    const char *paths[16];
    for (Py_ssize_t i = 0; i < n; i++) {
        paths[i] = PyUnicode_AsUTF8(PyList_GetItem(dirs, i));
        if (!paths[i]) return NULL;
    }
    tessera_init_params p = {.plugin_dirs = paths, .n_plugin_dirs = (int32_t)n, .verbosity = verbosity};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = tessera_init(&p);
    Py_END_ALLOW_THREADS
    if (rc != 0) return pyt_raise("tessera_init");
    Py_RETURN_NONE;
}

static PyObject *device_dict(const tessera_device_info *d) {
    return Py_BuildValue("{s:s,s:s,s:s,s:s,s:K,s:K}", "name", d->name, "kind", d->kind, "description",
                         d->description, "plugin", d->plugin_path, "memory_total",
                         (unsigned long long)d->memory_total, "memory_free",
                         (unsigned long long)d->memory_free);
}

static PyObject *mod_devices(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    tessera_device_info devs[64];
    int32_t n = tessera_devices(devs, 64);
    if (n < 0) return pyt_raise(NULL);
    if (n > 64) n = 64;
    PyObject *list = PyList_New(n);
    if (!list) return NULL;
    for (int32_t i = 0; i < n; i++) {
        PyObject *d = device_dict(&devs[i]);
        if (!d) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, d);
    }
    return list;
}

static PyObject *mod_version(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyUnicode_FromString(tessera_version());
}

/* json_schema_to_gbnf(schema: str) -> str: the grammar a JSON Schema becomes. */
static PyObject *mod_schema_gbnf(PyObject *self, PyObject *args) {
    (void)self;
    const char *schema;
    Py_ssize_t len;
    if (!PyArg_ParseTuple(args, "s#", &schema, &len)) return NULL;
    char *g = tessera_json_schema_to_gbnf(schema, (size_t)len);
    if (!g) return pyt_raise("json_schema");
    PyObject *s = PyUnicode_FromString(g);
    free(g);
    return s;
}

/* kv_types() -> the KV cache type names (what type_k and type_v take). */
static PyObject *mod_kv_types(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < TESSERA_KV_TYPE_COUNT; i++) {
        const char *name = tessera_kv_type_name((tessera_kv_type)i);
        PyObject *s = name ? PyUnicode_FromString(name) : NULL;
        if (!s || PyList_Append(list, s) < 0) Py_CLEAR(list);
        Py_XDECREF(s);
    }
    return list;
}

static PyMethodDef mod_methods[] = {
    {"kv_types", mod_kv_types, METH_NOARGS, "kv_types() -> the KV cache type names"},
    {"init", mod_init, METH_VARARGS, "init(plugin_dirs, verbosity): find the backend plugins"},
    {"devices", mod_devices, METH_NOARGS, "devices() -> list of dicts"},
    {"version", mod_version, METH_NOARGS, "the engine's version"},
    {"json_schema_to_gbnf", mod_schema_gbnf, METH_VARARGS, "the GBNF grammar of a JSON Schema"},
    {"gguf_metadata", pyt_gguf_metadata, METH_VARARGS, "a GGUF file's scalar and string metadata"},
    {"log_flush", pyt_log_flush, METH_NOARGS, "hand the engine's waiting log lines to logging now"},
    {"log_detach", pyt_log_detach, METH_NOARGS, "stop passing the engine's log to logging (atexit)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef mod_def = {
    PyModuleDef_HEAD_INIT, "_tessera", "Tessera's C API (use the tessera package)", -1, mod_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__tessera(void) {
    if (PyType_Ready(&pyt_model_type) < 0 || PyType_Ready(&pyt_context_type) < 0 ||
        PyType_Ready(&pyt_vocab_type) < 0 || PyType_Ready(&pyt_projector_type) < 0 ||
        PyType_Ready(&pyt_chunks_type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&mod_def);
    if (!m) return NULL;
    pyt_error = PyErr_NewExceptionWithDoc("tessera.TesseraError",
                                          "An error of the engine; the message names what is at fault.",
                                          PyExc_RuntimeError, NULL);
    if (!pyt_error || PyModule_AddObject(m, "TesseraError", pyt_error) < 0) goto fail;
    Py_INCREF(pyt_error); /* one reference for the module, one for pyt_error */
    Py_INCREF(&pyt_model_type);
    if (PyModule_AddObject(m, "Model", (PyObject *)&pyt_model_type) < 0) goto fail;
    Py_INCREF(&pyt_context_type);
    if (PyModule_AddObject(m, "Context", (PyObject *)&pyt_context_type) < 0) goto fail;
    Py_INCREF(&pyt_vocab_type);
    if (PyModule_AddObject(m, "Vocab", (PyObject *)&pyt_vocab_type) < 0) goto fail;
    Py_INCREF(&pyt_projector_type);
    if (PyModule_AddObject(m, "Projector", (PyObject *)&pyt_projector_type) < 0) goto fail;
    Py_INCREF(&pyt_chunks_type);
    if (PyModule_AddObject(m, "Chunks", (PyObject *)&pyt_chunks_type) < 0) goto fail;
    if (pyt_log_attach() < 0) goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
