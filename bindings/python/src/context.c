/*
 * context.c — _tessera.Context: one KV cache and sampler over a Model, and
 * the generation loop the Python package drives one token at a time:
 *
 *     ctx.start(prompt_tokens, max_tokens, **sampling)  # decode the prompt
 *     while (r := ctx.next())[0] is not None: ...       # (token, bytes)
 *
 * Decoding and sampling run with the GIL released. The prompt is decoded
 * in n_batch chunks with a signal check between them, so Ctrl-C stops a
 * long prompt too; the cache then holds what was decoded.
 *
 * start(..., reuse_prefix=True) decodes only what follows the longest common
 * prefix of the prompt and what the cache holds (a chat's next turn). Off
 * by default: a token decoded alone and the same token decoded within a
 * prompt batch go through different kernels, whose sums round differently,
 * so greedy output could depend on what was decoded before.
 */
#include "pytessera.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int ctx_init(pyt_context *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"model",  "n_ctx",      "n_batch", "n_threads", "flash_attn",
                            "type_k", "type_v",     "embeddings", "pooling", NULL};
    pyt_model *model;
    unsigned int n_ctx = 0, n_batch = 0;
    int n_threads = 0, flash_attn = TESSERA_FLASH_ATTN_OFF, embeddings = 0;
    const char *type_k = NULL, *type_v = NULL, *pooling = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|IIiizzpz", names, &pyt_model_type, &model, &n_ctx, &n_batch,
                                     &n_threads, &flash_attn, &type_k, &type_v, &embeddings, &pooling))
        return -1;
    if (self->ctx) {
        PyErr_SetString(PyExc_RuntimeError, "Context is already created");
        return -1;
    }
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = n_ctx;
    if (n_batch) cp.n_batch = n_batch;
    cp.n_threads = n_threads;
    cp.flash_attn = (tessera_flash_attn)flash_attn;
    const char *types[2] = {type_k, type_v};
    tessera_kv_type *slots[2] = {&cp.type_k, &cp.type_v};
    for (int i = 0; i < 2; i++) {
        if (!types[i]) continue;
        int t = tessera_kv_type_from_name(types[i]);
        if (t < 0) {
            PyErr_Format(PyExc_ValueError, "%s: unknown KV cache type '%s' (f16, f32, bf16, q8_0, q4_0, ...)",
                         i ? "type_v" : "type_k", types[i]);
            return -1;
        }
        *slots[i] = (tessera_kv_type)t;
    }
    /* an embedding context (tessera_embed) instead of one giving logits */
    cp.embeddings = embeddings != 0;
    if (pooling) {
        cp.pooling = tessera_pooling_from_name(pooling);
        if (cp.pooling < 0 && strcmp(pooling, "unspecified") != 0) {
            PyErr_Format(PyExc_ValueError, "pooling: unknown '%s' (none, mean, cls, last, rank)", pooling);
            return -1;
        }
    }
    tessera_context *ctx;
    Py_BEGIN_ALLOW_THREADS
    ctx = tessera_context_new(model->model, &cp);
    Py_END_ALLOW_THREADS
    if (!ctx) {
        pyt_raise("context");
        return -1;
    }
    self->tokens = malloc(((size_t)tessera_context_n_ctx(ctx) + 1) * sizeof *self->tokens);
    if (!self->tokens) {
        tessera_context_free(ctx);
        PyErr_NoMemory();
        return -1;
    }
    self->cap_tokens = (int32_t)tessera_context_n_ctx(ctx);
    self->ctx = ctx;
    self->pending = -1;
    Py_INCREF(model);
    self->owner = model;
    return 0;
}

static void ctx_release(pyt_context *self) {
    tessera_spec_free(self->spec);
    self->spec = NULL;
    self->nq = self->qi = 0;
    Py_CLEAR(self->draft);
    if (self->sampler) tessera_sampler_free(self->sampler);
    if (self->ctx) tessera_context_free(self->ctx);
    free(self->tokens);
    self->sampler = NULL;
    self->ctx = NULL;
    self->tokens = NULL;
    self->n_tokens = self->cap_tokens = 0;
}

static void ctx_dealloc(pyt_context *self) {
    ctx_release(self);
    Py_CLEAR(self->owner);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Claim the context for this call (under the GIL); 0, or -1 with an error. */
static int ctx_enter(pyt_context *self) {
    if (!self->ctx) {
        PyErr_SetString(PyExc_RuntimeError, "Context is closed");
        return -1;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "this Context is in use by another thread (give each thread its own)");
        return -1;
    }
    self->busy = 1;
    return 0;
}

/* The sampler for one generation: settings, penalties seeded with the
 * prompt, then the grammar (accepting the prompt first keeps the grammar at
 * its start). Returns 0 or -1 with an exception. */
static int ctx_make_sampler(pyt_context *self, tessera_sampler_params *sp, PyObject *bias,
                            const char *gbnf, const char *schema, int json_object, const tessera_token *prompt,
                            int32_t n_prompt) {
    tessera_logit_bias *lb = NULL;
    Py_ssize_t n_bias = bias && bias != Py_None ? PySequence_Size(bias) : 0;
    if (n_bias < 0) return -1;
    if (n_bias) {
        lb = calloc((size_t)n_bias, sizeof *lb);
        if (!lb) return PyErr_NoMemory(), -1;
        for (Py_ssize_t i = 0; i < n_bias; i++) {
            PyObject *item = PySequence_GetItem(bias, i);
            int ok = item && PyArg_ParseTuple(item, "if", &lb[i].token, &lb[i].bias);
            Py_XDECREF(item);
            if (!ok) {
                free(lb);
                return -1;
            }
        }
    }
    sp->logit_bias = lb;
    sp->n_logit_bias = (int32_t)n_bias;
    tessera_sampler *s = tessera_sampler_new_model(self->owner->model, sp);
    free(lb);
    if (!s) return pyt_raise("sampler"), -1;
    for (int32_t i = 0; i < n_prompt; i++) tessera_sampler_accept(s, prompt[i]);
    tessera_grammar *g = NULL;
    if (gbnf) g = tessera_grammar_parse(gbnf, strlen(gbnf), NULL);
    else if (schema) g = tessera_grammar_from_json_schema(schema, strlen(schema));
    else if (json_object) g = tessera_grammar_json_object();
    if ((gbnf || schema || json_object) &&
        (!g || tessera_sampler_set_grammar(s, self->owner->model, g) != 0)) {
        pyt_raise(gbnf ? "grammar" : "json_schema");
        tessera_grammar_free(g);
        tessera_sampler_free(s);
        return -1;
    }
    tessera_grammar_free(g);
    if (self->sampler) tessera_sampler_free(self->sampler);
    self->sampler = s;
    return 0;
}

/* Decode prompt[from..n) in n_batch chunks; between chunks, a pending
 * signal (Ctrl-C) stops it. 0, or -1 with an exception; the cache and
 * self->tokens then hold what was decoded. */
static int ctx_decode_prompt(pyt_context *self, const tessera_token *prompt, int32_t from, int32_t n) {
    int32_t chunk = (int32_t)tessera_context_n_batch(self->ctx);
    if (chunk <= 0) chunk = 512;
    self->n_tokens = from;
    if (tessera_kv_truncate(self->ctx, from) != 0 || tessera_kv_len(self->ctx) != from) {
        /* a sliding-window cache may have forgotten everything: start over */
        tessera_kv_truncate(self->ctx, 0);
        self->n_tokens = from = 0;
    }
    for (int32_t at = from; at < n; at += chunk) {
        int32_t len = n - at < chunk ? n - at : chunk;
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = tessera_decode(self->ctx, prompt + at, len, at, 0);
        Py_END_ALLOW_THREADS
        if (rc != 0) {
            int32_t kept = tessera_kv_len(self->ctx);
            self->n_tokens = kept < at ? kept : at;
            return pyt_raise("decode"), -1;
        }
        memcpy(self->tokens + at, prompt + at, (size_t)len * sizeof *prompt);
        self->n_tokens = at + len;
        if (at + len < n && PyErr_CheckSignals() != 0) return -1;
    }
    return 0;
}

static PyObject *ctx_start(pyt_context *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"tokens", "max_tokens", "seed", "temperature", "top_k", "top_p", "min_p",
                            "typical_p", "repeat_last_n", "repeat_penalty", "frequency_penalty",
                            "presence_penalty", "logit_bias", "grammar", "json_schema", "json_object",
                            "reuse_prefix", "dry_multiplier", "dry_base", "dry_allowed_length",
                            "dry_penalty_last_n", "dry_sequence_breakers", "xtc_probability", "xtc_threshold",
                            "top_n_sigma", "dynatemp_range", "dynatemp_exponent", "mirostat", "mirostat_tau",
                            "mirostat_eta", "samplers", "chunks", NULL};
    PyObject *seq, *bias = NULL, *breakers = NULL, *chunks = NULL;
    tessera_sampler_params sp = tessera_sampler_default_params();
    int max_tokens = -1, json_object = 0, reuse_prefix = 0;
    const char *gbnf = NULL, *schema = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|iIfifffifffOzzppffiiOfffffiffzO", names, &seq, &max_tokens,
                                     &sp.seed, &sp.temp, &sp.top_k, &sp.top_p, &sp.min_p, &sp.typical_p,
                                     &sp.penalty_last_n, &sp.penalty_repeat, &sp.penalty_freq,
                                     &sp.penalty_present, &bias, &gbnf, &schema, &json_object, &reuse_prefix,
                                     &sp.dry_multiplier, &sp.dry_base, &sp.dry_allowed_length,
                                     &sp.dry_penalty_last_n, &breakers, &sp.xtc_probability, &sp.xtc_threshold,
                                     &sp.top_n_sigma, &sp.dynatemp_range, &sp.dynatemp_exponent, &sp.mirostat,
                                     &sp.mirostat_tau, &sp.mirostat_eta, &sp.samplers, &chunks))
        return NULL;
    if (chunks == Py_None) chunks = NULL;
    if (chunks && !PyObject_TypeCheck(chunks, &pyt_chunks_type)) {
        PyErr_SetString(PyExc_TypeError, "chunks must be a Chunks (Projector.tokenize) or None");
        return NULL;
    }
    /* DRY's breakers: a list of str (None: llama.cpp's), valid while args are. */
    const char *brs[64];
    if (breakers && breakers != Py_None) {
        Py_ssize_t nb = PyList_Check(breakers) ? PyList_Size(breakers) : -1;
        if (nb < 0 || nb > 64) {
            PyErr_SetString(PyExc_TypeError, "dry_sequence_breakers must be a list of at most 64 str, or None");
            return NULL;
        }
        for (Py_ssize_t i = 0; i < nb; i++) {
            brs[i] = PyUnicode_Check(PyList_GetItem(breakers, i)) ? PyUnicode_AsUTF8(PyList_GetItem(breakers, i)) : NULL;
            if (!brs[i]) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "dry_sequence_breakers must hold str");
                return NULL;
            }
        }
        sp.dry_sequence_breakers = brs;
        sp.n_dry_sequence_breakers = (int32_t)nb;
    }
    int32_t n;
    tessera_token *prompt = pyt_tokens_from_list(seq, &n);
    if (!prompt) return NULL;
    PyObject *result = NULL;
    if (ctx_enter(self) != 0) goto done;
    if (n <= 0) {
        PyErr_SetString(pyt_error, "the prompt gives no tokens");
    } else if (n > self->cap_tokens) {
        PyErr_Format(pyt_error, "the prompt has %d tokens, the context only %d (n_ctx)", (int)n,
                     (int)self->cap_tokens);
    } else if (chunks) { /* a prompt with media: its text tokens for the penalties, then every chunk */
        pyt_chunks *ch = (pyt_chunks *)chunks;
        int32_t nt = 0, n_past = 0, rc;
        tessera_token *text = malloc((size_t)n * sizeof *text);
        for (int32_t i = 0; text && i < n; i++)
            if (prompt[i] >= 0) text[nt++] = prompt[i];
        if (!text) {
            PyErr_NoMemory();
        } else if (tessera_mtmd_chunks_n_tokens(ch->chunks) != n) {
            PyErr_SetString(PyExc_ValueError, "tokens are not chunks.tokens()");
        } else if (ctx_make_sampler(self, &sp, bias, gbnf, schema, json_object, text, nt) == 0) {
            /* with reuse_prefix, the positions the cache holds already (a
             * medium matches by its content, and is kept or decoded whole) */
            int32_t common = 0;
            while (reuse_prefix && common < self->n_tokens && common < n && self->tokens[common] == prompt[common])
                common++;
            if (common == n) common = n - 1; /* the last token's logits are needed */
            for (int32_t c = 0, at = 0; c < tessera_mtmd_chunks_count(ch->chunks); c++) {
                const int32_t cn = tessera_mtmd_chunk_n_tokens(ch->chunks, c);
                if (tessera_mtmd_chunk_type(ch->chunks, c) != TESSERA_CHUNK_TEXT && common > at && common < at + cn)
                    common = at;
                at += cn;
            }
            self->pending = -1;
            self->nq = self->qi = 0;
            self->n_generated = 0;
            self->max_tokens = max_tokens;
            self->n_tokens = 0;
            tessera_kv_truncate(self->ctx, common);
            Py_BEGIN_ALLOW_THREADS
            rc = tessera_mtmd_eval_chunks_from(ch->proj->mm, self->ctx, ch->chunks, 0, common, &n_past);
            Py_END_ALLOW_THREADS
            if (rc != 0 || n_past != n) {
                tessera_kv_truncate(self->ctx, 0);
                pyt_raise("decode");
            } else {
                /* what the cache holds, a medium's rows as their values:
                 * a later reuse_prefix stops before a different medium */
                memcpy(self->tokens, prompt, (size_t)n * sizeof *prompt);
                self->n_tokens = n;
                result = PyLong_FromLong(n - common);
            }
        }
        free(text);
    } else if (ctx_make_sampler(self, &sp, bias, gbnf, schema, json_object, prompt, n) == 0) {
        int32_t common = 0;
        while (reuse_prefix && common < self->n_tokens && common < n && self->tokens[common] == prompt[common]) common++;
        if (common == n) common = n - 1; /* the last token's logits are needed */
        self->pending = -1;
        self->nq = self->qi = 0;
        self->n_generated = 0;
        self->max_tokens = max_tokens;
        if (ctx_decode_prompt(self, prompt, common, n) == 0) result = PyLong_FromLong(n - common);
    }
    self->busy = 0;
done:
    free(prompt);
    return result;
}

/* Claim the context for next() or next_with(): 0, or -1 with an error
 * (closed, in use, not started). */
static int ctx_enter_next(pyt_context *self, const char *what) {
    if (ctx_enter(self) != 0) return -1;
    if (self->sampler) return 0;
    self->busy = 0;
    PyErr_Format(PyExc_RuntimeError, "%s before start()", what);
    return -1;
}

/* "length" when the generation may not take another token (max_tokens, or
 * the context is full), else NULL. */
static const char *ctx_limit(const pyt_context *self) {
    if (self->max_tokens >= 0 && self->n_generated >= self->max_tokens) return "length";
    if (self->n_tokens + (self->pending >= 0) >= self->cap_tokens) return "length";
    return NULL;
}

/* next()'s answer for a sampled token t: (None, "stop") at the end of
 * generation, else (t, its bytes) with t pending for the next decode. */
static PyObject *ctx_give(pyt_context *self, tessera_token t) {
    const tessera_model *m = self->owner->model;
    if (tessera_token_is_eog(m, t)) return Py_BuildValue("(Os)", Py_None, "stop");
    self->pending = t;
    self->n_generated++;
    char buf[256];
    int32_t len = tessera_token_to_piece(m, t, buf, sizeof buf, 0);
    if (len < 0) len = 0;
    return Py_BuildValue("(iy#)", t, buf, (Py_ssize_t)len);
}

/* next() -> (token, piece bytes), or (None, "stop" | "length"). */
static PyObject *ctx_next(pyt_context *self, PyObject *unused) {
    (void)unused;
    if (ctx_enter_next(self, "next()") != 0) return NULL;
    const char *stop = ctx_limit(self);
    int rc = 0;
    tessera_token t = -1;
    if (!stop && self->spec && (self->qi < self->nq || self->pending >= 0)) {
        /* Speculation: the step's tokens, one per call; those before its
         * last are in the cache already. */
        if (self->qi == self->nq) {
            int32_t max = self->cap_tokens - self->n_tokens - 1, k;
            if (self->max_tokens >= 0 && self->max_tokens - self->n_generated < max)
                max = self->max_tokens - self->n_generated;
            if (max > 64) max = 64;
            if (max < 1) max = 1;
            self->tokens[self->n_tokens] = self->pending;
            Py_BEGIN_ALLOW_THREADS
            k = tessera_spec_step(self->spec, 0, self->sampler, self->tokens, self->n_tokens + 1, self->queue, max,
                                  NULL);
            Py_END_ALLOW_THREADS
            self->busy = 0;
            self->pending = -1;
            if (k < 1) return pyt_raise("speculative step");
            self->n_tokens++;
            self->nq = k;
            self->qi = 0;
        }
        self->busy = 0;
        t = self->queue[self->qi++];
        PyObject *r = ctx_give(self, t);
        if (r && self->pending >= 0 && self->qi < self->nq) { /* in the cache already */
            self->tokens[self->n_tokens++] = self->pending;
            self->pending = -1;
        }
        return r;
    }
    if (!stop) {
        Py_BEGIN_ALLOW_THREADS
        if (self->pending >= 0) rc = tessera_decode(self->ctx, &self->pending, 1, self->n_tokens, 0);
        if (rc == 0) {
            if (self->pending >= 0) self->tokens[self->n_tokens++] = self->pending;
            t = tessera_sampler_sample(self->sampler, tessera_logits(self->ctx, -1));
            if (t >= 0) tessera_sampler_accept(self->sampler, t);
        }
        Py_END_ALLOW_THREADS
        self->pending = -1;
    }
    self->busy = 0;
    if (stop) return Py_BuildValue("(Os)", Py_None, stop);
    if (rc != 0) return pyt_raise("decode");
    if (t < 0) return pyt_raise("sample");
    return ctx_give(self, t);
}

/* next_with(fn) -> as next(), but the row of logits goes through fn first:
 * fn(row: bytes of n_vocab float32) returns a buffer of n_vocab float32,
 * which the sampler (its settings, penalties, grammar) picks from:
 * llama-cpp-python's logits processors. fn runs with the GIL held and the
 * context claimed (it must not use this Context). */
static PyObject *ctx_next_with(pyt_context *self, PyObject *args) {
    PyObject *fn;
    if (!PyArg_ParseTuple(args, "O", &fn)) return NULL;
    if (ctx_enter_next(self, "next_with()") != 0) return NULL;
    const int32_t n_vocab = tessera_model_n_vocab(self->owner->model);
    const char *stop = ctx_limit(self);
    if (stop) {
        self->busy = 0;
        return Py_BuildValue("(Os)", Py_None, stop);
    }
    if (self->pending >= 0) {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = tessera_decode(self->ctx, &self->pending, 1, self->n_tokens, 0);
        Py_END_ALLOW_THREADS
        if (rc == 0) self->tokens[self->n_tokens++] = self->pending;
        self->pending = -1;
        if (rc != 0) {
            self->busy = 0;
            return pyt_raise("decode");
        }
    }
    const float *row = tessera_logits(self->ctx, -1);
    if (!row) {
        self->busy = 0;
        return pyt_raise("logits");
    }
    PyObject *in = PyBytes_FromStringAndSize((const char *)row, (Py_ssize_t)n_vocab * (Py_ssize_t)sizeof(float));
    PyObject *out = in ? PyObject_CallFunctionObjArgs(fn, in, NULL) : NULL;
    Py_XDECREF(in);
    tessera_token t = -1;
    if (out) {
        Py_buffer view;
        if (PyObject_GetBuffer(out, &view, PyBUF_SIMPLE) == 0) {
            if (view.len != (Py_ssize_t)n_vocab * (Py_ssize_t)sizeof(float)) {
                PyErr_Format(PyExc_ValueError, "the logits processor gave %zd bytes, not %d float32 values",
                             view.len, (int)n_vocab);
            } else {
                float *scores = malloc((size_t)view.len);
                if (!scores) {
                    PyErr_NoMemory();
                } else {
                    memcpy(scores, view.buf, (size_t)view.len);
                    t = tessera_sampler_sample(self->sampler, scores);
                    if (t >= 0) tessera_sampler_accept(self->sampler, t);
                    else pyt_raise("sample");
                    free(scores);
                }
            }
            PyBuffer_Release(&view);
        }
        Py_DECREF(out);
    }
    self->busy = 0;
    return t < 0 ? NULL : ctx_give(self, t);
}

static PyObject *ctx_tokens(pyt_context *self, PyObject *unused) {
    (void)unused;
    PyObject *list = PyList_New(self->n_tokens);
    for (int32_t i = 0; list && i < self->n_tokens; i++) PyList_SET_ITEM(list, i, PyLong_FromLong(self->tokens[i]));
    return list;
}

static PyObject *ctx_save(pyt_context *self, PyObject *args) {
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path)) return NULL;
    if (ctx_enter(self) != 0) return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = tessera_state_save_file(self->ctx, -1, path, self->tokens, self->n_tokens, NULL);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (rc != 0) return pyt_raise("save_state");
    Py_RETURN_NONE;
}

static PyObject *ctx_load(pyt_context *self, PyObject *args) {
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path)) return NULL;
    if (ctx_enter(self) != 0) return NULL;
    int32_t n = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = tessera_state_load_file(self->ctx, -1, path, self->tokens, self->cap_tokens, &n, NULL);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (rc != 0) {
        self->n_tokens = 0;
        tessera_kv_truncate(self->ctx, 0);
        return pyt_raise("load_state");
    }
    self->n_tokens = n;
    self->pending = -1;
    return PyLong_FromLong(n);
}

static PyObject *ctx_reset(pyt_context *self, PyObject *unused) {
    (void)unused;
    if (ctx_enter(self) != 0) return NULL;
    tessera_kv_truncate(self->ctx, 0);
    self->n_tokens = 0;
    self->pending = -1;
    self->busy = 0;
    Py_RETURN_NONE;
}

static PyObject *ctx_close(pyt_context *self, PyObject *unused) {
    (void)unused;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "this Context is in use by another thread");
        return NULL;
    }
    ctx_release(self);
    Py_RETURN_NONE;
}

/* embed(tokens, normalize=2) -> (floats, dim): one sequence through an
 * embedding context (tessera_embed), the GIL released; with pooling none
 * the floats are one row of dim per token. */
static PyObject *ctx_embed(pyt_context *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"tokens", "normalize", NULL};
    PyObject *seq;
    int norm = TESSERA_EMBD_NORM_L2;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|i", names, &seq, &norm)) return NULL;
    int32_t n = 0;
    tessera_token *toks = pyt_tokens_from_list(seq, &n);
    if (!toks) return NULL;
    if (ctx_enter(self) != 0) {
        free(toks);
        return NULL;
    }
    const int32_t dim = tessera_embed_dim(self->ctx);
    const int32_t pooling = tessera_context_pooling(self->ctx);
    const int64_t cap = (int64_t)(pooling == TESSERA_POOLING_NONE ? (n > 0 ? n : 1) : 1) * (dim > 0 ? dim : 1);
    float *out = malloc((size_t)cap * sizeof *out);
    int64_t got = -1;
    if (out && dim > 0) {
        Py_BEGIN_ALLOW_THREADS
        got = tessera_embed(self->ctx, toks, n, norm, out, cap);
        Py_END_ALLOW_THREADS
    }
    self->busy = 0;
    free(toks);
    if (!out) return PyErr_NoMemory();
    if (got < 0) {
        free(out);
        return pyt_raise(dim > 0 ? "embed" : "embed: not an embedding context");
    }
    PyObject *list = PyList_New((Py_ssize_t)got);
    for (int64_t i = 0; list && i < got; i++) {
        PyObject *f = PyFloat_FromDouble(out[i]);
        if (!f) Py_CLEAR(list);
        else PyList_SET_ITEM(list, (Py_ssize_t)i, f);
    }
    free(out);
    return list ? Py_BuildValue("(Ni)", list, (int)dim) : NULL;
}

/* log(sum(exp(row))) of a row of logits, in double. */
static double row_logsumexp(const float *row, int32_t n) {
    float mx = row[0];
    for (int32_t i = 1; i < n; i++)
        if (row[i] > mx) mx = row[i];
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) sum += exp((double)row[i] - mx);
    return mx + log(sum);
}

/* (logprob of token, [(id, logprob), ...] the k most likely, best first)
 * of one row of logits: llama-cpp-python's logprobs (log-softmax of the raw
 * logits, before any sampler setting). */
static PyObject *row_logprobs(const float *row, int32_t n_vocab, tessera_token token, int k) {
    const double lse = row_logsumexp(row, n_vocab);
    if (k < 0) k = 0;
    if (k > n_vocab) k = n_vocab;
    int32_t *top = k ? malloc((size_t)k * sizeof *top) : NULL;
    if (k && !top) return PyErr_NoMemory();
    int n_top = 0;
    for (int32_t i = 0; i < n_vocab && k; i++) { /* insertion into a sorted top k */
        if (n_top == k && row[i] <= row[top[k - 1]]) continue;
        int at = n_top < k ? n_top++ : k - 1;
        while (at > 0 && row[top[at - 1]] < row[i]) {
            top[at] = top[at - 1];
            at--;
        }
        top[at] = i;
    }
    PyObject *list = PyList_New(n_top);
    for (int j = 0; list && j < n_top; j++) {
        PyObject *t = Py_BuildValue("(id)", (int)top[j], (double)row[top[j]] - lse);
        if (!t) Py_CLEAR(list);
        else PyList_SET_ITEM(list, j, t);
    }
    free(top);
    if (!list) return NULL;
    double lp = token >= 0 && token < n_vocab ? (double)row[token] - lse : -INFINITY;
    return Py_BuildValue("(dN)", lp, list);
}

/* logprobs(token, k) -> (logprob, [(id, logprob), ...]): of the logits the
 * last token next() gave was sampled from (after start(): those the first
 * token will be sampled from). */
static PyObject *ctx_logprobs(pyt_context *self, PyObject *args) {
    int token, k = 0;
    if (!PyArg_ParseTuple(args, "i|i", &token, &k)) return NULL;
    if (ctx_enter(self) != 0) return NULL;
    const float *row = tessera_logits(self->ctx, -1);
    PyObject *r = row ? row_logprobs(row, tessera_model_n_vocab(self->owner->model), token, k)
                      : pyt_raise("logprobs");
    self->busy = 0;
    return r;
}

/* prompt_logprobs(tokens, k) -> [(logprob, top), ...] of tokens[1:], each
 * given those before it: decodes tokens from position 0 keeping every
 * row of logits (the cache then holds them; start(reuse_prefix=True) with
 * the same prompt decodes only its last token again). */
static PyObject *ctx_prompt_logprobs(pyt_context *self, PyObject *args) {
    PyObject *seq;
    int k = 0;
    if (!PyArg_ParseTuple(args, "O|i", &seq, &k)) return NULL;
    int32_t n;
    tessera_token *toks = pyt_tokens_from_list(seq, &n);
    if (!toks) return NULL;
    PyObject *out = NULL;
    if (ctx_enter(self) != 0) goto done;
    if (n > self->cap_tokens) {
        PyErr_Format(pyt_error, "the prompt has %d tokens, the context only %d (n_ctx)", (int)n,
                     (int)self->cap_tokens);
        goto leave;
    }
    const int32_t n_vocab = tessera_model_n_vocab(self->owner->model);
    const int32_t chunk = 64; /* rows of logits kept at a time */
    out = PyList_New(0);
    tessera_kv_truncate(self->ctx, 0);
    self->n_tokens = 0;
    self->pending = -1;
    for (int32_t at = 0; out && at < n; at += chunk) {
        int32_t len = n - at < chunk ? n - at : chunk;
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = tessera_decode(self->ctx, toks + at, len, at, TESSERA_DECODE_ALL_LOGITS);
        Py_END_ALLOW_THREADS
        if (rc != 0) {
            Py_CLEAR(out);
            pyt_raise("decode");
            break;
        }
        memcpy(self->tokens + at, toks + at, (size_t)len * sizeof *toks);
        self->n_tokens = at + len;
        for (int32_t j = 0; out && j < len && at + j + 1 < n; j++) {
            const float *row = tessera_logits(self->ctx, j);
            PyObject *e = row ? row_logprobs(row, n_vocab, toks[at + j + 1], k) : pyt_raise("logprobs");
            if (!e || PyList_Append(out, e) != 0) Py_CLEAR(out);
            Py_XDECREF(e);
        }
    }
leave:
    self->busy = 0;
done:
    free(toks);
    return out;
}

static PyObject *ctx_n_ctx(pyt_context *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromLong(self->cap_tokens);
}

/* pooling() -> the pooling an embedding context uses ("none", "mean",
 * "cls", "last", "rank"; the file's when it was made with "unspecified"),
 * None for a context that gives logits. */
static PyObject *ctx_pooling(pyt_context *self, PyObject *unused) {
    (void)unused;
    if (!self->ctx) {
        PyErr_SetString(PyExc_RuntimeError, "Context is closed");
        return NULL;
    }
    const char *name = tessera_pooling_name(tessera_context_pooling(self->ctx));
    if (!name) Py_RETURN_NONE;
    return PyUnicode_FromString(name);
}

/* set_threads(n): the CPU threads of this context's next decodes (n > 0). */
static PyObject *ctx_set_threads(pyt_context *self, PyObject *args) {
    int n;
    if (!PyArg_ParseTuple(args, "i", &n)) return NULL;
    if (n <= 0) {
        PyErr_Format(PyExc_ValueError, "n_threads must be a positive int, not %d", n);
        return NULL;
    }
    if (ctx_enter(self) != 0) return NULL;
    int rc = tessera_context_set_threads(self->ctx, n);
    self->busy = 0;
    if (rc != 0) return pyt_raise("n_threads");
    Py_RETURN_NONE;
}

/* speculate(draft=None, n_max=16, n_min=0, p_min=0.75, ngram_n=12,
 * ngram_m=48): next() goes through speculative steps from now on, drafts
 * from draft (a Context of a model with this one's vocabulary, as many
 * cells; it must not be used meanwhile) or, without one, from n-grams of
 * the text. The output is the same; spec_stats() -> (steps, drafted,
 * accepted). speculate(None) with n_max 0 turns it off. */
static PyObject *ctx_speculate(pyt_context *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"draft", "n_max", "n_min", "p_min", "ngram_n", "ngram_m", NULL};
    PyObject *draft = Py_None;
    tessera_spec_params p = tessera_spec_default_params();
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|Oiifii", names, &draft, &p.n_max, &p.n_min, &p.p_min, &p.ngram_n,
                                     &p.ngram_m))
        return NULL;
    if (draft != Py_None && !PyObject_TypeCheck(draft, &pyt_context_type)) {
        PyErr_SetString(PyExc_TypeError, "draft: a Context, or None for n-grams");
        return NULL;
    }
    if (ctx_enter(self) != 0) return NULL;
    self->busy = 0;
    tessera_spec_free(self->spec);
    self->spec = NULL;
    self->nq = self->qi = 0;
    Py_CLEAR(self->draft);
    if (p.n_max == 0 && draft == Py_None) Py_RETURN_NONE;
    pyt_context *d = draft != Py_None ? (pyt_context *)draft : NULL;
    if (d && !d->ctx) {
        PyErr_SetString(PyExc_RuntimeError, "draft: the Context is closed");
        return NULL;
    }
    self->spec = tessera_spec_new(self->ctx, d ? d->ctx : NULL, &p);
    if (!self->spec) return pyt_raise("speculate");
    if (d) {
        Py_INCREF(draft);
        self->draft = draft;
    }
    Py_RETURN_NONE;
}

static PyObject *ctx_spec_stats(pyt_context *self, PyObject *unused) {
    (void)unused;
    tessera_spec_stats st;
    tessera_spec_stats_get(self->spec, -1, &st);
    return Py_BuildValue("(LLL)", (long long)st.n_steps, (long long)st.n_drafted, (long long)st.n_accepted);
}

/* set_loras([(id, scale), ...]): the adapters (Model.load_lora ids) the
 * next decodes use; [] none. */
static PyObject *ctx_set_loras(pyt_context *self, PyObject *args) {
    PyObject *list;
    if (!PyArg_ParseTuple(args, "O", &list)) return NULL;
    PyObject *seq = PySequence_Fast(list, "set_loras takes a list of (id, scale) pairs");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    tessera_lora **loras = calloc((size_t)n + 1, sizeof *loras);
    float *scales = calloc((size_t)n + 1, sizeof *scales);
    PyObject *ret = NULL;
    if (!loras || !scales) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int id;
        double scale;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "id", &id, &scale)) goto done;
        if (id < 0 || id >= self->owner->n_loras) {
            PyErr_Format(PyExc_ValueError, "no LoRA adapter with id %d (%d loaded with load_lora)", id,
                         (int)self->owner->n_loras);
            goto done;
        }
        loras[i] = self->owner->loras[id];
        scales[i] = (float)scale;
    }
    if (ctx_enter(self) != 0) goto done;
    int rc = tessera_context_set_loras(self->ctx, loras, scales, (int32_t)n);
    self->busy = 0;
    if (rc != 0) {
        pyt_raise("set_loras");
        goto done;
    }
    ret = Py_None;
    Py_INCREF(ret);
done:
    free(loras);
    free(scales);
    Py_DECREF(seq);
    return ret;
}

static PyMethodDef ctx_methods[] = {
    {"set_loras", (PyCFunction)ctx_set_loras, METH_VARARGS, "set_loras([(id, scale), ...]): adapters in use"},
    {"speculate", (PyCFunction)(void (*)(void))ctx_speculate, METH_VARARGS | METH_KEYWORDS,
     "speculate(draft=None, n_max=16, ...): speculative decoding from a draft Context or n-grams"},
    {"spec_stats", (PyCFunction)ctx_spec_stats, METH_NOARGS, "(steps, drafted, accepted) of speculate()"},
    {"pooling", (PyCFunction)ctx_pooling, METH_NOARGS, "the pooling of an embedding context, or None"},
    {"set_threads", (PyCFunction)ctx_set_threads, METH_VARARGS, "set_threads(n): CPU threads of the next decodes"},
    {"start", (PyCFunction)(void (*)(void))ctx_start, METH_VARARGS | METH_KEYWORDS,
     "start(tokens, max_tokens, **sampling): decode a prompt, set up sampling"},
    {"next", (PyCFunction)ctx_next, METH_NOARGS, "next() -> (token, bytes) or (None, finish_reason)"},
    {"next_with", (PyCFunction)ctx_next_with, METH_VARARGS,
     "next_with(fn) -> as next(), sampling from fn(row of float32 logits as bytes)"},
    {"tokens", (PyCFunction)ctx_tokens, METH_NOARGS, "the tokens the cache holds"},
    {"save_state", (PyCFunction)ctx_save, METH_VARARGS, "save the cache and tokens to a file"},
    {"load_state", (PyCFunction)ctx_load, METH_VARARGS, "load a file saved by save_state"},
    {"reset", (PyCFunction)ctx_reset, METH_NOARGS, "forget the cache"},
    {"close", (PyCFunction)ctx_close, METH_NOARGS, "free the context now"},
    {"n_ctx", (PyCFunction)ctx_n_ctx, METH_NOARGS, "the context size in tokens"},
    {"logprobs", (PyCFunction)ctx_logprobs, METH_VARARGS,
     "logprobs(token, k) -> (logprob, [(id, logprob)]): of the row the last token came from"},
    {"prompt_logprobs", (PyCFunction)ctx_prompt_logprobs, METH_VARARGS,
     "prompt_logprobs(tokens, k) -> [(logprob, top)] of tokens[1:]: decodes tokens, all logits kept"},
    {"embed", (PyCFunction)(void (*)(void))ctx_embed, METH_VARARGS | METH_KEYWORDS,
     "embed(tokens, normalize=2) -> (floats, dim): an embedding context's vector(s)"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject pyt_context_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_tessera.Context",
    .tp_basicsize = sizeof(pyt_context),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A KV cache and sampler over a Model (use tessera.Model / Session)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)ctx_init,
    .tp_dealloc = (destructor)ctx_dealloc,
    .tp_methods = ctx_methods,
};
