/*
 * model.c — _tessera.Model: a loaded GGUF model (tessera_model), its
 * metadata, tokenizer and chat template. Loading releases the GIL.
 */
#include "pytessera.h"

#include <stdlib.h>
#include <string.h>

/* tensor_overrides: None or a sequence of "PATTERN=DEVICE" str, as a
 * NULL-terminated array of UTF-8 pointers into the list's items (*keep
 * holds the list while they are used). */
static const char **override_list(PyObject *seq, PyObject **keep) {
    *keep = NULL;
    if (!seq || seq == Py_None) return NULL;
    PyObject *list = PySequence_Fast(seq, "tensor_overrides must be a list of 'PATTERN=DEVICE' strings");
    if (!list) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(list);
    const char **out = calloc((size_t)n + 1, sizeof *out);
    if (!out) {
        Py_DECREF(list);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(list, i);
        out[i] = PyUnicode_Check(it) ? PyUnicode_AsUTF8(it) : NULL;
        if (!out[i]) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "tensor_overrides must be a list of str");
            free(out);
            Py_DECREF(list);
            return NULL;
        }
    }
    *keep = list;
    return out;
}

static int model_init(pyt_model *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"path", "devices", "n_gpu_layers", "use_mmap", "use_mlock", "tensor_overrides",
                            "n_cpu_moe", NULL};
    const char *path, *devices = NULL;
    int n_gpu_layers = TESSERA_NGL_AUTO, use_mmap = 1, use_mlock = 0, n_cpu_moe = 0;
    PyObject *overrides = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|zippOi", names, &path, &devices, &n_gpu_layers, &use_mmap,
                                     &use_mlock, &overrides, &n_cpu_moe))
        return -1;
    if (self->model) {
        PyErr_SetString(PyExc_RuntimeError, "Model is already loaded");
        return -1;
    }
    PyObject *keep;
    const char **ot = override_list(overrides, &keep);
    if (!ot && PyErr_Occurred()) return -1;
    tessera_model_params mp = tessera_model_default_params();
    mp.devices = devices;
    mp.n_gpu_layers = n_gpu_layers;
    mp.no_mmap = !use_mmap;
    mp.use_mlock = use_mlock;
    mp.tensor_overrides = ot;
    mp.n_cpu_moe = n_cpu_moe;
    tessera_model *m;
    Py_BEGIN_ALLOW_THREADS
    m = tessera_model_load(path, &mp);
    Py_END_ALLOW_THREADS
    free(ot);
    Py_XDECREF(keep);
    if (!m) {
        pyt_raise(NULL);
        return -1;
    }
    self->model = m;
    return 0;
}

static void model_dealloc(pyt_model *self) {
    if (self->tmpl) tessera_chat_template_free(self->tmpl);
    if (self->model) tessera_model_free(self->model); /* its adapters too */
    free(self->loras);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

#define NEED_MODEL(self)                                                     \
    do {                                                                     \
        if (!(self)->model) {                                                \
            PyErr_SetString(PyExc_RuntimeError, "Model is not loaded");      \
            return NULL;                                                     \
        }                                                                    \
    } while (0)

/* info() -> dict of the model's description and sizes. */
static PyObject *model_info(pyt_model *self, PyObject *unused) {
    (void)unused;
    NEED_MODEL(self);
    const tessera_model *m = self->model;
    return Py_BuildValue("{s:s,s:s,s:s,s:i,s:i,s:i,s:i,s:K,s:K,s:i,s:i,s:i,s:O}", "description",
                         tessera_model_desc(m), "arch", tessera_model_arch(m), "devices",
                         tessera_model_devices(m), "n_vocab", tessera_model_n_vocab(m), "n_ctx_train",
                         tessera_model_n_ctx_train(m), "n_embd", tessera_model_n_embd(m), "n_layer",
                         tessera_model_n_layer(m), "n_params", (unsigned long long)tessera_model_n_params(m),
                         "size_bytes", (unsigned long long)tessera_model_size_bytes(m), "bos",
                         tessera_token_bos(m), "eos", tessera_token_eos(m), "eot", tessera_token_eot(m),
                         "adds_bos", tessera_vocab_adds_bos(m) ? Py_True : Py_False);
}

static PyObject *model_meta(pyt_model *self, PyObject *args) {
    const char *key;
    if (!PyArg_ParseTuple(args, "s", &key)) return NULL;
    NEED_MODEL(self);
    const char *v = tessera_model_meta_str(self->model, key);
    if (!v) Py_RETURN_NONE;
    return PyUnicode_FromString(v);
}

static PyObject *model_tokenize(pyt_model *self, PyObject *args) {
    const char *text;
    Py_ssize_t len;
    int add_special = 1, parse_special = 0;
    if (!PyArg_ParseTuple(args, "s#|pp", &text, &len, &add_special, &parse_special)) return NULL;
    NEED_MODEL(self);
    int32_t n = tessera_tokenize(self->model, text, (size_t)len, NULL, 0, add_special, parse_special);
    if (n == INT32_MIN) return pyt_raise("tokenize");
    if (n < 0) n = -n;
    tessera_token *toks = malloc(((size_t)n + 1) * sizeof *toks);
    if (!toks) return PyErr_NoMemory();
    n = tessera_tokenize(self->model, text, (size_t)len, toks, n, add_special, parse_special);
    if (n < 0) {
        free(toks);
        return pyt_raise("tokenize");
    }
    PyObject *list = PyList_New(n);
    for (int32_t i = 0; list && i < n; i++) PyList_SET_ITEM(list, i, PyLong_FromLong(toks[i]));
    free(toks);
    return list;
}

/* Read a list of token ids into a malloc'd array; NULL with an exception. */
tessera_token *pyt_tokens_from_list(PyObject *seq, int32_t *n_out) {
    PyObject *fast = PySequence_Fast(seq, "tokens must be a sequence of ints");
    if (!fast) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    tessera_token *toks = malloc(((size_t)n + 1) * sizeof *toks);
    if (!toks) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
        if (v == -1 && PyErr_Occurred()) {
            free(toks);
            Py_DECREF(fast);
            return NULL;
        }
        toks[i] = (tessera_token)v;
    }
    Py_DECREF(fast);
    *n_out = (int32_t)n;
    return toks;
}

/* detokenize(tokens, remove_special, render_special) -> bytes */
static PyObject *model_detokenize(pyt_model *self, PyObject *args) {
    PyObject *seq;
    int remove_special = 0, render_special = 0;
    if (!PyArg_ParseTuple(args, "O|pp", &seq, &remove_special, &render_special)) return NULL;
    NEED_MODEL(self);
    int32_t n;
    tessera_token *toks = pyt_tokens_from_list(seq, &n);
    if (!toks) return NULL;
    int32_t need = tessera_detokenize(self->model, toks, n, NULL, 0, remove_special, render_special);
    PyObject *out = NULL;
    if (need == INT32_MIN) {
        pyt_raise("detokenize");
    } else {
        int32_t size = (need < 0 ? -need : need) + 1;
        char *buf = malloc((size_t)size);
        int32_t got = buf ? tessera_detokenize(self->model, toks, n, buf, size, remove_special, render_special)
                          : INT32_MIN;
        if (!buf) PyErr_NoMemory();
        else if (got < 0) pyt_raise("detokenize");
        else out = PyBytes_FromStringAndSize(buf, got);
        free(buf);
    }
    free(toks);
    return out;
}

static PyObject *model_piece(pyt_model *self, PyObject *args) {
    int token, render_special = 0;
    if (!PyArg_ParseTuple(args, "i|p", &token, &render_special)) return NULL;
    NEED_MODEL(self);
    char buf[256];
    int32_t n = tessera_token_to_piece(self->model, token, buf, sizeof buf, render_special);
    if (n == INT32_MIN) return pyt_raise("token_to_piece");
    if (n < 0) n = 0;
    return PyBytes_FromStringAndSize(buf, n);
}

static PyObject *model_is_eog(pyt_model *self, PyObject *args) {
    int token;
    if (!PyArg_ParseTuple(args, "i", &token)) return NULL;
    NEED_MODEL(self);
    return PyBool_FromLong(tessera_token_is_eog(self->model, token));
}

static tessera_chat_template *model_template(pyt_model *self) {
    if (!self->tmpl) self->tmpl = tessera_chat_template_from_model(self->model, NULL);
    if (!self->tmpl) pyt_raise("chat template");
    return self->tmpl;
}

/* apply_template(vars_json: str) -> (text: str, has_bos: bool) */
static PyObject *model_apply_template(pyt_model *self, PyObject *args) {
    const char *vars;
    if (!PyArg_ParseTuple(args, "s", &vars)) return NULL;
    NEED_MODEL(self);
    tessera_chat_template *t = model_template(self);
    if (!t) return NULL;
    size_t len = 0;
    char *text = tessera_chat_template_apply(t, vars, &len);
    if (!text) return pyt_raise("chat template");
    PyObject *r = Py_BuildValue("(s#O)", text, (Py_ssize_t)len,
                                tessera_chat_template_text_has_bos(t, text, len) ? Py_True : Py_False);
    free(text);
    return r;
}

/* parse_reply(text: str, tool_names: list[str]) -> str (JSON) */
static PyObject *model_parse_reply(pyt_model *self, PyObject *args) {
    const char *text;
    Py_ssize_t len;
    PyObject *names;
    if (!PyArg_ParseTuple(args, "s#O!", &text, &len, &PyList_Type, &names)) return NULL;
    NEED_MODEL(self);
    tessera_chat_template *t = model_template(self);
    if (!t) return NULL;
    Py_ssize_t n = PyList_Size(names);
    const char **c_names = calloc((size_t)n + 1, sizeof *c_names);
    if (!c_names) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        c_names[i] = PyUnicode_AsUTF8(PyList_GetItem(names, i));
        if (!c_names[i]) {
            free(c_names);
            return NULL;
        }
    }
    char *json = tessera_chat_parse_reply(t, text, (size_t)len, c_names, (size_t)n);
    free(c_names);
    if (!json) return PyErr_NoMemory();
    PyObject *r = PyUnicode_DecodeUTF8(json, (Py_ssize_t)strlen(json), "replace");
    free(json);
    return r;
}

static PyObject *model_template_source(pyt_model *self, PyObject *unused) {
    (void)unused;
    NEED_MODEL(self);
    tessera_chat_template *t = model_template(self);
    if (!t) return NULL;
    return PyUnicode_FromString(tessera_chat_template_source(t));
}

/* load_lora(path) -> id: a LoRA adapter of this model (llama.cpp's GGUF
 * adapters); Context.set_loras takes its id. */
static PyObject *model_load_lora(pyt_model *self, PyObject *args) {
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path)) return NULL;
    NEED_MODEL(self);
    tessera_lora **a = realloc(self->loras, (size_t)(self->n_loras + 1) * sizeof *a);
    if (!a) return PyErr_NoMemory();
    self->loras = a;
    tessera_lora *l;
    Py_BEGIN_ALLOW_THREADS
    l = tessera_lora_load(self->model, path);
    Py_END_ALLOW_THREADS
    if (!l) return pyt_raise(NULL);
    self->loras[self->n_loras] = l;
    return PyLong_FromLong(self->n_loras++);
}

static PyMethodDef model_methods[] = {
    {"load_lora", (PyCFunction)model_load_lora, METH_VARARGS, "load_lora(path) -> adapter id"},
    {"info", (PyCFunction)model_info, METH_NOARGS, "metadata as a dict"},
    {"meta", (PyCFunction)model_meta, METH_VARARGS, "a string value of the GGUF metadata, or None"},
    {"tokenize", (PyCFunction)model_tokenize, METH_VARARGS, "tokenize(text, add_special, parse_special)"},
    {"detokenize", (PyCFunction)model_detokenize, METH_VARARGS, "detokenize(tokens, remove_special, render_special)"},
    {"piece", (PyCFunction)model_piece, METH_VARARGS, "the bytes of one token"},
    {"is_eog", (PyCFunction)model_is_eog, METH_VARARGS, "whether a token ends generation"},
    {"apply_template", (PyCFunction)model_apply_template, METH_VARARGS, "render the chat template"},
    {"parse_reply", (PyCFunction)model_parse_reply, METH_VARARGS, "content and tool calls of a reply (JSON)"},
    {"template_source", (PyCFunction)model_template_source, METH_NOARGS, "the chat template's Jinja text"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject pyt_model_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_tessera.Model",
    .tp_basicsize = sizeof(pyt_model),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A loaded GGUF model (use tessera.Model)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)model_init,
    .tp_dealloc = (destructor)model_dealloc,
    .tp_methods = model_methods,
};
