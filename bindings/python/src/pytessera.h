/*
 * pytessera.h — what the three files of the _tessera extension module share:
 * the module's exception, the Model and Context types.
 *
 * _tessera is the thin layer over the public C API (tessera/tessera.h);
 * the Python package tessera/ (pure Python) gives it Python's idioms.
 * Every call that decodes releases the GIL; one Context is used by one
 * thread at a time (a second thread gets an error, never a data race).
 */
#ifndef PYTESSERA_H
#define PYTESSERA_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <tessera/tessera.h>
#include <tessera/tessera_mtmd.h>

/* tessera.TesseraError: raised with tessera_last_error() of the failing call. */
extern PyObject *pyt_error;
/* Raise pyt_error with "what: <engine message>" (what may be NULL); NULL. */
PyObject *pyt_raise(const char *what);

/* log.c: the engine's log lines to logging.getLogger("tessera"). */
int pyt_log_attach(void);
PyObject *pyt_log_flush(PyObject *self, PyObject *unused);
PyObject *pyt_log_detach(PyObject *self, PyObject *unused);

typedef struct {
    PyObject_HEAD
    tessera_model *model;
    tessera_chat_template *tmpl; /* the model's, built on first use */
    tessera_lora **loras;        /* load_lora's, by id (freed with the model) */
    int32_t n_loras;
} pyt_model;

typedef struct {
    PyObject_HEAD
    pyt_model *owner; /* strong reference: the model outlives the context */
    tessera_context *ctx;
    tessera_sampler *sampler;
    tessera_token *tokens; /* what the KV cache holds, positions 0..n_tokens */
    int32_t n_tokens, cap_tokens;
    tessera_token pending; /* sampled, not yet decoded; -1 none */
    int32_t n_generated, max_tokens;
    int busy;              /* set (under the GIL) while a call runs without it */
    /* speculate(): tessera_spec_step replaces next()'s decode; queue holds
     * a step's tokens not given out yet (all but its last in the cache) */
    tessera_spec *spec;
    PyObject *draft;       /* the draft Context, kept alive (NULL: n-grams) */
    tessera_token queue[64];
    int32_t nq, qi;
} pyt_context;

/* mtmd.c: a model's multimodal projector, and a prompt split into text and
 * media chunks by it (its media owned; the projector kept alive). */
typedef struct {
    PyObject_HEAD
    pyt_model *owner;
    tessera_mtmd *mm;
} pyt_projector;

typedef struct {
    PyObject_HEAD
    pyt_projector *proj;
    tessera_mtmd_chunks *chunks;
    tessera_media **media;
    int32_t n_media;
} pyt_chunks;

extern PyTypeObject pyt_projector_type;
extern PyTypeObject pyt_chunks_type;

/* A sequence of ints as a malloc'd token array (*n its length); NULL with an
 * exception. */
tessera_token *pyt_tokens_from_list(PyObject *seq, int32_t *n);

extern PyTypeObject pyt_model_type;
extern PyTypeObject pyt_context_type;
/* vocab.c: a vocabulary-only file's tokenizer, and gguf_metadata() */
extern PyTypeObject pyt_vocab_type;
PyObject *pyt_gguf_metadata(PyObject *self, PyObject *args);

#endif
