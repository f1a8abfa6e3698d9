/*
 * vocab.c — what the Python package reads from a GGUF file without loading
 * it as a model: gguf_metadata(path), the metadata's scalar and string
 * values (llama-cpp-python's Llama.metadata), and _tessera.Vocab, the
 * tokenizer of a vocabulary-only file (tessera_vocab.h; Llama(vocab_only=True)).
 */
#include "pytessera.h"

#include <string.h>

#include <tessera/tessera_gguf.h>
#include <tessera/tessera_vocab.h>

/* One scalar or string value as a Python object; NULL without an exception
 * for an array (left out). */
static PyObject *gguf_scalar(const tessera_gguf_value *v) {
    union {
        uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
        uint64_t u64; int64_t i64; float f32; double f64;
    } x;
    if (v->type == TESSERA_GGUF_STRING) return PyUnicode_DecodeUTF8(v->data, (Py_ssize_t)v->size, "replace");
    if (v->type == TESSERA_GGUF_ARRAY || v->size > sizeof x) return NULL;
    memcpy(&x, v->data, (size_t)v->size);
    switch (v->type) {
    case TESSERA_GGUF_UINT8: return PyLong_FromUnsignedLong(x.u8);
    case TESSERA_GGUF_INT8: return PyLong_FromLong(x.i8);
    case TESSERA_GGUF_UINT16: return PyLong_FromUnsignedLong(x.u16);
    case TESSERA_GGUF_INT16: return PyLong_FromLong(x.i16);
    case TESSERA_GGUF_UINT32: return PyLong_FromUnsignedLong(x.u32);
    case TESSERA_GGUF_INT32: return PyLong_FromLong(x.i32);
    case TESSERA_GGUF_UINT64: return PyLong_FromUnsignedLongLong(x.u64);
    case TESSERA_GGUF_INT64: return PyLong_FromLongLong(x.i64);
    case TESSERA_GGUF_FLOAT32: return PyFloat_FromDouble(x.f32);
    case TESSERA_GGUF_FLOAT64: return PyFloat_FromDouble(x.f64);
    case TESSERA_GGUF_BOOL: return PyBool_FromLong(x.u8);
    default: return NULL;
    }
}

/* gguf_metadata(path) -> {key: str | int | float | bool}: arrays left out. */
PyObject *pyt_gguf_metadata(PyObject *self, PyObject *args) {
    (void)self;
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path)) return NULL;
    tessera_gguf *f;
    Py_BEGIN_ALLOW_THREADS
    f = tessera_gguf_open(path);
    Py_END_ALLOW_THREADS
    if (!f) return pyt_raise(NULL);
    PyObject *d = PyDict_New();
    int64_t n = tessera_gguf_kv_count(f);
    for (int64_t i = 0; d && i < n; i++) {
        tessera_gguf_value v;
        if (tessera_gguf_kv_value(f, i, &v) != 0) continue;
        PyObject *o = gguf_scalar(&v);
        if (!o) {
            if (PyErr_Occurred()) Py_CLEAR(d);
            continue;
        }
        if (PyDict_SetItemString(d, tessera_gguf_kv_key(f, i), o) != 0) Py_CLEAR(d);
        Py_DECREF(o);
    }
    tessera_gguf_close(f);
    return d;
}

typedef struct {
    PyObject_HEAD
    tessera_vocab *vocab;
} pyt_vocab;

static int vocab_init(pyt_vocab *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"path", NULL};
    const char *path;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s", names, &path)) return -1;
    if (self->vocab) {
        PyErr_SetString(PyExc_RuntimeError, "Vocab is already loaded");
        return -1;
    }
    tessera_vocab *v;
    Py_BEGIN_ALLOW_THREADS
    v = tessera_vocab_load(path);
    Py_END_ALLOW_THREADS
    if (!v) {
        pyt_raise(NULL);
        return -1;
    }
    self->vocab = v;
    return 0;
}

static void vocab_dealloc(pyt_vocab *self) {
    tessera_vocab_free(self->vocab);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* tokenize(text: bytes, add_special, parse_special) -> list of ids */
static PyObject *vocab_tokenize(pyt_vocab *self, PyObject *args) {
    const char *text;
    Py_ssize_t len;
    int add_special = 1, parse_special = 0;
    if (!PyArg_ParseTuple(args, "y#|pp", &text, &len, &add_special, &parse_special)) return NULL;
    int32_t cap = (int32_t)len + 8, n;
    tessera_token *toks = NULL;
    for (;;) {
        tessera_token *t = realloc(toks, (size_t)cap * sizeof *toks);
        if (!t) {
            free(toks);
            return PyErr_NoMemory();
        }
        toks = t;
        n = tessera_vocab_tokenize(self->vocab, text, (size_t)len, toks, cap, add_special, parse_special);
        if (n >= 0 || n == INT32_MIN) break;
        cap = -n;
    }
    if (n == INT32_MIN) {
        free(toks);
        return pyt_raise("tokenize");
    }
    PyObject *list = PyList_New(n);
    for (int32_t i = 0; list && i < n; i++) PyList_SET_ITEM(list, i, PyLong_FromLong(toks[i]));
    free(toks);
    return list;
}

/* piece(token, render_special) -> bytes */
static PyObject *vocab_piece(pyt_vocab *self, PyObject *args) {
    int token, render_special = 0;
    if (!PyArg_ParseTuple(args, "i|p", &token, &render_special)) return NULL;
    size_t len = 0;
    const char *p = tessera_vocab_piece(self->vocab, token, render_special, &len);
    if (!p) return pyt_raise("piece");
    return PyBytes_FromStringAndSize(p, (Py_ssize_t)len);
}

static PyObject *vocab_n_tokens(pyt_vocab *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromLong(tessera_vocab_n_tokens(self->vocab));
}

static PyMethodDef vocab_methods[] = {
    {"tokenize", (PyCFunction)vocab_tokenize, METH_VARARGS, "tokenize(text, add_special, parse_special)"},
    {"piece", (PyCFunction)vocab_piece, METH_VARARGS, "the bytes of one token"},
    {"n_tokens", (PyCFunction)vocab_n_tokens, METH_NOARGS, "the vocabulary's size"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject pyt_vocab_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_tessera.Vocab",
    .tp_basicsize = sizeof(pyt_vocab),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Vocab(path): the tokenizer of a GGUF file, weights not loaded",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)vocab_init,
    .tp_dealloc = (destructor)vocab_dealloc,
    .tp_methods = vocab_methods,
};
