/*
 * mtmd.c — _tessera.Projector and _tessera.Chunks: a model's multimodal
 * projector (an mmproj file, tessera_mtmd.h) and a prompt split at its
 * media markers into text and media chunks, which Context.start(chunks=)
 * decodes (the media encoded, cached by content hash in the projector):
 *
 *     proj = _tessera.Projector(model, "mmproj.gguf")
 *     ch = proj.tokenize("<__media__>Describe it.", [png_bytes], True)
 *     ctx.start(ch.tokens(), chunks=ch, ...)
 *
 * Chunks.tokens() gives the text chunks' token ids and, for each row of a
 * medium, a negative value derived from its content hash (never a
 * vocabulary id: the sampler's penalties skip them).
 */
#include "pytessera.h"

#include <stdlib.h>
#include <string.h>

static int proj_init(pyt_projector *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"model", "path", "no_offload", "n_threads", NULL};
    pyt_model *model;
    const char *path;
    int no_offload = 0, n_threads = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!s|pi", names, &pyt_model_type, &model, &path, &no_offload,
                                     &n_threads))
        return -1;
    if (self->mm) {
        PyErr_SetString(PyExc_RuntimeError, "Projector is already loaded");
        return -1;
    }
    tessera_mtmd_params mp = tessera_mtmd_default_params();
    mp.no_offload = no_offload != 0;
    mp.n_threads = n_threads;
    tessera_mtmd *mm;
    Py_BEGIN_ALLOW_THREADS
    mm = tessera_mtmd_load(model->model, path, &mp);
    Py_END_ALLOW_THREADS
    if (!mm) {
        pyt_raise("mmproj");
        return -1;
    }
    self->mm = mm;
    Py_INCREF(model);
    self->owner = model;
    return 0;
}

static void proj_dealloc(pyt_projector *self) {
    tessera_mtmd_free(self->mm);
    self->mm = NULL;
    Py_CLEAR(self->owner);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* tokenize(prompt, [bytes, ...], add_special) -> Chunks: the prompt split at
 * its <__media__> markers, each medium decoded from its bytes (named
 * "image N" in errors) and matched to a marker in order. */
static PyObject *proj_tokenize(pyt_projector *self, PyObject *args) {
    const char *prompt;
    PyObject *list;
    int add_special = 1;
    if (!PyArg_ParseTuple(args, "sO!|p", &prompt, &PyList_Type, &list, &add_special)) return NULL;
    Py_ssize_t n = PyList_Size(list);
    pyt_chunks *out = PyObject_New(pyt_chunks, &pyt_chunks_type);
    if (!out) return NULL;
    out->chunks = NULL;
    out->n_media = 0;
    out->media = calloc((size_t)n + 1, sizeof *out->media);
    Py_INCREF(self);
    out->proj = self;
    if (!out->media) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_buffer b;
        if (PyObject_GetBuffer(PyList_GetItem(list, i), &b, PyBUF_SIMPLE) != 0) {
            Py_DECREF(out);
            return NULL;
        }
        char label[32];
        snprintf(label, sizeof label, "image %d", (int)i);
        tessera_media *m;
        Py_BEGIN_ALLOW_THREADS
        m = tessera_media_from_buffer(b.buf, (size_t)b.len, label);
        Py_END_ALLOW_THREADS
        PyBuffer_Release(&b);
        if (!m) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_ValueError, tessera_last_error());
            return NULL;
        }
        out->media[out->n_media++] = m;
    }
    out->chunks = tessera_mtmd_tokenize(self->mm, prompt, out->media, out->n_media, add_special != 0, true);
    if (!out->chunks) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_ValueError, tessera_last_error());
        return NULL;
    }
    return (PyObject *)out;
}

static PyObject *proj_info(pyt_projector *self, PyObject *unused) {
    (void)unused;
    return Py_BuildValue("{s:s,s:O,s:O}", "projector_type", tessera_mtmd_projector_type(self->mm), "vision",
                         tessera_mtmd_supports_vision(self->mm) ? Py_True : Py_False, "audio",
                         tessera_mtmd_supports_audio(self->mm) ? Py_True : Py_False);
}

static PyMethodDef proj_methods[] = {
    {"tokenize", (PyCFunction)proj_tokenize, METH_VARARGS,
     "tokenize(prompt, [image bytes, ...], add_special=True) -> Chunks"},
    {"info", (PyCFunction)proj_info, METH_NOARGS, "{'projector_type', 'vision', 'audio'}"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject pyt_projector_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_tessera.Projector",
    .tp_basicsize = sizeof(pyt_projector),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A model's multimodal projector (an mmproj GGUF file)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)proj_init,
    .tp_dealloc = (destructor)proj_dealloc,
    .tp_methods = proj_methods,
};

static void chunks_dealloc(pyt_chunks *self) {
    tessera_mtmd_chunks_free(self->chunks);
    for (int32_t i = 0; i < self->n_media; i++) tessera_media_free(self->media[i]);
    free(self->media);
    Py_CLEAR(self->proj);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static tessera_token pyt_media_token(const tessera_media *m) {
    unsigned long long h = strtoull(tessera_media_hash(m), NULL, 16);
    return (tessera_token)(-2 - (int32_t)(h & 0x3fffffffu));
}

/* tokens() -> [int]: text ids, and each medium's rows as its negative value. */
static PyObject *chunks_tokens(pyt_chunks *self, PyObject *unused) {
    (void)unused;
    PyObject *out = PyList_New(0);
    for (int32_t c = 0; out && c < tessera_mtmd_chunks_count(self->chunks); c++) {
        int32_t n = tessera_mtmd_chunk_n_tokens(self->chunks, c);
        const tessera_token *t = tessera_mtmd_chunk_tokens(self->chunks, c, NULL);
        tessera_token v = t ? 0 : pyt_media_token(self->media[tessera_mtmd_chunk_medium(self->chunks, c)]);
        for (int32_t i = 0; i < n; i++) {
            PyObject *x = PyLong_FromLong(t ? t[i] : v);
            if (!x || PyList_Append(out, x) != 0) {
                Py_XDECREF(x);
                Py_CLEAR(out);
                break;
            }
            Py_DECREF(x);
        }
    }
    return out;
}

static PyObject *chunks_n_media(pyt_chunks *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromLong(self->n_media);
}

static PyMethodDef chunks_methods[] = {
    {"tokens", (PyCFunction)chunks_tokens, METH_NOARGS, "the prompt's entries: token ids, media rows negative"},
    {"n_media", (PyCFunction)chunks_n_media, METH_NOARGS, "the media in the prompt"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject pyt_chunks_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_tessera.Chunks",
    .tp_basicsize = sizeof(pyt_chunks),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A prompt split into text and media chunks (Projector.tokenize)",
    .tp_dealloc = (destructor)chunks_dealloc,
    .tp_methods = chunks_methods,
};
