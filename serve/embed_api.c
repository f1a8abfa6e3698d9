/* The embedding and reranking endpoints (embed_api.h). */
#include "embed_api.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cJSON.h>

#include "format.h"

struct serve_embed {
    tessera_model *model;
    tessera_context *ctx;
    char *model_id;
    serve_engine *engine; /* decodes on its thread (NULL: on the caller's, one at a time) */
    pthread_mutex_t lock; /* ctx without an engine; the counters */
    /* what /metrics counts for embeddings and reranking (under lock): each
     * input is one decode of its prompt tokens; nothing is generated */
    uint64_t prompt_tokens, decodes;
    double decode_ms;
};

void serve_embed_metrics_add(serve_embed *se, serve_metrics *m) {
    if (!se) return;
    pthread_mutex_lock(&se->lock);
    m->prompt_tokens += se->prompt_tokens;
    m->steps += se->decodes;
    m->batch_tokens += se->prompt_tokens;
    m->decode_ms += se->decode_ms;
    m->prompt_ms += se->decode_ms;
    pthread_mutex_unlock(&se->lock);
}

serve_embed *serve_embed_new(tessera_model *model, tessera_context *ctx, const char *model_id) {
    serve_embed *se = calloc(1, sizeof *se);
    if (!se || !(se->model_id = strdup(model_id ? model_id : ""))) {
        free(se);
        return NULL;
    }
    se->model = model;
    se->ctx = ctx;
    pthread_mutex_init(&se->lock, NULL);
    return se;
}

void serve_embed_set_engine(serve_embed *se, serve_engine *e) {
    if (se) se->engine = e;
}

void serve_embed_free(serve_embed *se) {
    if (!se) return;
    tessera_context_free(se->ctx);
    pthread_mutex_destroy(&se->lock);
    free(se->model_id);
    free(se);
}

/* ------------------------------------------------------------ errors */

static char *fail(int *status, int code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static char *fail(int *status, int code, const char *param, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    *status = code;
    return serve_api_error_json(msg, code >= 500 && code != 501 ? "server_error"
                                     : code == 501                ? "not_supported_error"
                                                                  : "invalid_request_error",
                                param, NULL);
}

/* ------------------------------------------------------------ inputs */

/* The token lists of a request's inputs. */
typedef struct embed_inputs {
    tessera_token **toks;
    int32_t *n;
    int count, cap;
    int64_t n_tokens; /* over all inputs (usage) */
} embed_inputs;

static void inputs_free(embed_inputs *in) {
    for (int i = 0; i < in->count; i++) free(in->toks[i]);
    free(in->toks);
    free(in->n);
    memset(in, 0, sizeof *in);
}

/* Append one input (takes toks); -1 when out of memory (toks freed). */
static int inputs_push(embed_inputs *in, tessera_token *toks, int32_t n) {
    if (in->count == in->cap) {
        int cap = in->cap ? 2 * in->cap : 8;
        tessera_token **t = realloc(in->toks, (size_t)cap * sizeof *t);
        if (t) in->toks = t;
        int32_t *nn = t ? realloc(in->n, (size_t)cap * sizeof *nn) : NULL;
        if (!nn) {
            free(toks);
            return -1;
        }
        in->n = nn;
        in->cap = cap;
    }
    in->toks[in->count] = toks;
    in->n[in->count++] = n;
    in->n_tokens += n;
    return 0;
}

/* Tokens of text (with special: the vocabulary's BOS/EOS; special tokens
 * parsed, as llama-server does); NULL with *n INT32_MIN on error. */
static tessera_token *tokenize(const tessera_model *m, const char *text, size_t len, bool special, int32_t *n) {
    int32_t need = tessera_tokenize(m, text, len, NULL, 0, special, true);
    if (need == INT32_MIN) return *n = INT32_MIN, NULL;
    need = need < 0 ? -need : need;
    tessera_token *t = malloc((size_t)(need > 0 ? need : 1) * sizeof *t);
    if (!t) return *n = INT32_MIN, NULL;
    *n = tessera_tokenize(m, text, len, t, need, special, true);
    if (*n < 0) {
        free(t);
        *n = INT32_MIN;
        return NULL;
    }
    return t;
}

/* A growing token list (one input being built). */
typedef struct tok_buf {
    tessera_token *t;
    int32_t n, cap;
} tok_buf;

static int buf_append(tok_buf *b, const tessera_token *t, int32_t n) {
    if (b->n + n > b->cap) {
        int32_t cap = b->cap ? b->cap : 16;
        while (cap < b->n + n) cap *= 2;
        tessera_token *nt = realloc(b->t, (size_t)cap * sizeof *nt);
        if (!nt) return -1;
        b->t = nt;
        b->cap = cap;
    }
    if (n) memcpy(b->t + b->n, t, (size_t)n * sizeof *t);
    b->n += n;
    return 0;
}

/* One element of a mixed array appended to b: a string tokenized (with
 * the vocabulary's BOS/EOS when it opens the array), or a token id. */
static char *mixed_element(const serve_embed *se, const cJSON *e, int index, int k, tok_buf *b, int *status) {
    const int32_t n_vocab = tessera_model_n_vocab(se->model);
    int rc;
    if (cJSON_IsString(e)) {
        int32_t n;
        tessera_token *t = tokenize(se->model, e->valuestring, strlen(e->valuestring), k == 0, &n);
        if (!t) return fail(status, 400, "input", "input %d: %s", index, tessera_last_error());
        rc = buf_append(b, t, n);
        free(t);
    } else {
        double d = cJSON_IsNumber(e) ? e->valuedouble : -1.0;
        if (!cJSON_IsNumber(e) || d != floor(d) || d < 0 || d >= n_vocab)
            return fail(status, 400, "input",
                        "input %d: element %d is not a token id of the vocabulary (0..%d) nor a string", index, k,
                        n_vocab - 1);
        tessera_token t = (tessera_token)d;
        rc = buf_append(b, &t, 1);
    }
    return rc != 0 ? fail(status, 500, "input", "out of memory") : NULL;
}

/* An array of token ids and strings as one input (llama-server's mixed
 * prompt); NULL, or an error body. */
static char *mixed_array(const serve_embed *se, const cJSON *arr, int index, embed_inputs *in, int *status) {
    tok_buf b = {0};
    int k = 0;
    for (const cJSON *e = arr->child; e; e = e->next, k++) {
        char *err = mixed_element(se, e, index, k, &b, status);
        if (err) {
            free(b.t);
            return err;
        }
    }
    if (inputs_push(in, b.t, b.n) != 0) return fail(status, 500, "input", "out of memory");
    return NULL;
}

/* The checks of an object input's content parts: each {"type": "text",
 * "text": STRING}; NULL, or an error body (media: this server takes text). */
static char *check_parts(const cJSON *content, int index, size_t *len, int *status) {
    int k = 0;
    *len = 0;
    for (const cJSON *part = content->child; part; part = part->next, k++) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (cJSON_IsString(type) && !strcmp(type->valuestring, "text") && cJSON_IsString(text)) {
            *len += strlen(text->valuestring);
            continue;
        }
        const char *t = cJSON_IsString(type) ? type->valuestring : "(none)";
        if (!strcmp(t, "image_url") || !strcmp(t, "input_audio") || !strcmp(t, "input_video"))
            return fail(status, 400, "input", "input %d: content part %d: this model takes text only, not %s", index,
                        k, t);
        return fail(status, 400, "input",
                    "input %d: content part %d: type '%.40s' is not a text part ({\"type\": \"text\", \"text\": ...})",
                    index, k, t);
    }
    return NULL;
}

/* The text of an object input: {"prompt_string": TEXT} or {"content":
 * [{"type": "text", "text": ...}...]} (the parts joined as they are, as
 * llama-server does); NULL with *err set otherwise. */
static char *object_text(const cJSON *v, int index, char **err, int *status) {
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(v, "prompt_string");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(v, "content");
    const cJSON *media = cJSON_GetObjectItemCaseSensitive(v, "multimodal_data");
    if (cJSON_IsArray(media) && media->child) {
        *err = fail(status, 400, "input", "input %d: this model takes text only, not multimodal_data", index);
        return NULL;
    }
    if (cJSON_IsString(ps)) return strdup(ps->valuestring);
    if (!cJSON_IsArray(content)) {
        *err = fail(status, 400, "input",
                    "input %d: an object input needs 'prompt_string' (a string) or 'content' (an array of "
                    "{\"type\": \"text\", \"text\": ...} parts)",
                    index);
        return NULL;
    }
    size_t len;
    if ((*err = check_parts(content, index, &len, status))) return NULL;
    char *out = malloc(len + 1), *p = out;
    if (!out) {
        *err = fail(status, 500, "input", "out of memory");
        return NULL;
    }
    for (const cJSON *part = content->child; part; part = part->next) {
        const char *t = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
        memcpy(p, t, strlen(t));
        p += strlen(t);
    }
    *p = '\0';
    return out;
}

static char *one_input(const serve_embed *se, const cJSON *v, int index, embed_inputs *in, int *status) {
    if (cJSON_IsArray(v)) return mixed_array(se, v, index, in, status);
    char *err = NULL, *owned = NULL;
    const char *text = cJSON_IsString(v) ? v->valuestring : NULL;
    if (cJSON_IsObject(v) && !(text = owned = object_text(v, index, &err, status))) return err;
    if (!text)
        return fail(status, 400, "input", "input %d must be a string, an array of token ids or an object", index);
    int32_t n;
    tessera_token *t = tokenize(se->model, text, strlen(text), true, &n);
    free(owned);
    if (!t) return fail(status, 400, "input", "input %d: %s", index, tessera_last_error());
    if (inputs_push(in, t, n) != 0) return fail(status, 500, "input", "out of memory");
    return NULL;
}

/* input (or llama-server's content): a string, an object, an array of token
 * ids and strings holding at least one id (one mixed input), or an array
 * of inputs (strings, such arrays, objects). */
static char *parse_inputs(const serve_embed *se, const cJSON *root, embed_inputs *in, int *status) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "input");
    if (!v) v = cJSON_GetObjectItemCaseSensitive(root, "content");
    if (!v || cJSON_IsNull(v)) return fail(status, 400, "input", "'input' is required");
    if (!cJSON_IsArray(v)) return one_input(se, v, 0, in, status);
    if (!v->child) return fail(status, 400, "input", "'input' is an empty list");
    bool flat = true, any_number = false;
    for (const cJSON *e = v->child; e; e = e->next) {
        flat = flat && (cJSON_IsNumber(e) || cJSON_IsString(e));
        any_number = any_number || cJSON_IsNumber(e);
    }
    if (flat && any_number) return mixed_array(se, v, 0, in, status);
    int i = 0;
    for (const cJSON *e = v->child; e; e = e->next, i++) {
        char *err = one_input(se, e, i, in, status);
        if (err) return err;
    }
    return NULL;
}

/* ------------------------------------------------------------ computing */

/* One input's decode, on the engine thread (or the caller's, under the lock). */
typedef struct embed_job {
    serve_embed *se;
    const tessera_token *t;
    int32_t n, norm;
    float *v;
    int64_t cap, n_out;
    char err[400];
} embed_job;

static void embed_run(void *arg) {
    embed_job *j = arg;
    serve_embed *se = j->se;
    const double t0 = serve_now_ms();
    j->n_out = tessera_embed(se->ctx, j->t, j->n, j->norm, j->v, j->cap);
    const double dt = serve_now_ms() - t0;
    if (j->n_out < 0) {
        snprintf(j->err, sizeof j->err, "%s", tessera_last_error());
        return;
    }
    pthread_mutex_lock(&se->lock);
    se->decode_ms += dt;
    se->prompt_tokens += (uint64_t)j->n;
    se->decodes++;
    pthread_mutex_unlock(&se->lock);
}

/* Embed one input into *out (malloc'd, *n_out floats); NULL, or an error body. */
static char *run_one(serve_embed *se, const tessera_token *t, int32_t n, int index, int32_t norm, float **out,
                     int64_t *n_out, int *status) {
    if (n <= 0) return fail(status, 400, "input", "input %d has no tokens", index);
    const int32_t dim = tessera_model_n_embd(se->model) > tessera_embed_dim(se->ctx) ? tessera_model_n_embd(se->model)
                                                                                     : tessera_embed_dim(se->ctx);
    int64_t cap = (tessera_context_pooling(se->ctx) == TESSERA_POOLING_NONE ? (int64_t)n : 1) * dim;
    float *v = malloc((size_t)cap * sizeof *v);
    if (!v) return fail(status, 500, "input", "out of memory");
    embed_job job = {.se = se, .t = t, .n = n, .norm = norm, .v = v, .cap = cap};
    if (!se->engine) {
        static pthread_mutex_t alone = PTHREAD_MUTEX_INITIALIZER; /* one decode at a time on ctx */
        pthread_mutex_lock(&alone);
        embed_run(&job);
        pthread_mutex_unlock(&alone);
    } else if (serve_engine_run(se->engine, embed_run, &job) != 0) {
        free(v);
        return fail(status, 503, NULL, "the server is shutting down");
    }
    *n_out = job.n_out;
    if (*n_out < 0) {
        free(v);
        return fail(status, strstr(job.err, "out of memory") ? 500 : 400, "input", "input %d: %s", index, job.err);
    }
    *out = v;
    return NULL;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The bytes of v[0..n) (little-endian f32, as OpenAI's base64) in base64. */
static char *base64_floats(const float *v, int64_t n) {
    const unsigned char *s = (const unsigned char *)v;
    const size_t len = (size_t)n * 4, olen = (len + 2) / 3 * 4;
    char *o = malloc(olen + 1), *p = o;
    if (!o) return NULL;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t x = (uint32_t)s[i] << 16 | (i + 1 < len ? (uint32_t)s[i + 1] << 8 : 0) |
                     (i + 2 < len ? s[i + 2] : 0);
        *p++ = b64[x >> 18 & 63];
        *p++ = b64[x >> 12 & 63];
        *p++ = i + 1 < len ? b64[x >> 6 & 63] : '=';
        *p++ = i + 2 < len ? b64[x & 63] : '=';
    }
    *p = '\0';
    return o;
}

static cJSON *vector_json(const float *v, int64_t n, bool base64) {
    if (!base64) return cJSON_CreateFloatArray(v, (int)n);
    char *s = base64_floats(v, n);
    cJSON *j = s ? cJSON_CreateString(s) : NULL;
    free(s);
    return j;
}

static cJSON *usage_json(int64_t n_tokens) {
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)n_tokens);
    cJSON_AddNumberToObject(u, "total_tokens", (double)n_tokens);
    return u;
}

/* ------------------------------------------------------------ endpoints */

/* Options of an embeddings request: encoding_format and embd_normalize. */
static char *embed_options(const cJSON *root, bool *base64, int32_t *norm, int *status) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "encoding_format");
    *base64 = false;
    if (f && !cJSON_IsNull(f)) {
        if (!cJSON_IsString(f) || (strcmp(f->valuestring, "float") && strcmp(f->valuestring, "base64")))
            return fail(status, 400, "encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
        *base64 = !strcmp(f->valuestring, "base64");
    }
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(root, "embd_normalize");
    *norm = TESSERA_EMBD_NORM_L2;
    if (en && !cJSON_IsNull(en)) {
        if (!cJSON_IsNumber(en) || en->valuedouble != floor(en->valuedouble) || en->valuedouble < -1 ||
            en->valuedouble > 1000)
            return fail(status, 400, "embd_normalize", "'embd_normalize' must be an integer in -1..1000");
        *norm = (int32_t)en->valuedouble;
    }
    return NULL;
}

/* /v1/embeddings (oai: OpenAI's shape) and /embeddings (llama-server's). */
static char *handle_embeddings(serve_embed *se, const cJSON *root, bool oai, int *status) {
    const int32_t pooling = tessera_context_pooling(se->ctx);
    if (pooling == TESSERA_POOLING_RANK)
        return fail(status, 400, NULL, "the server runs a reranker (--reranking): use /v1/rerank");
    if (oai && pooling == TESSERA_POOLING_NONE)
        return fail(status, 400, NULL, "pooling type 'none' gives one vector per token, which the OpenAI API "
                                       "cannot carry: use /embeddings, or start the server with --pooling mean, "
                                       "cls or last");
    bool base64;
    int32_t norm;
    embed_inputs in = {0};
    char *err = embed_options(root, &base64, &norm, status);
    if (pooling == TESSERA_POOLING_NONE) norm = TESSERA_EMBD_NORM_NONE; /* token states as they are (llama-server) */
    if (!err) err = parse_inputs(se, root, &in, status);
    cJSON *out = oai ? cJSON_CreateObject() : cJSON_CreateArray();
    cJSON *data = oai ? cJSON_CreateArray() : out;
    const int64_t E = tessera_model_n_embd(se->model);
    for (int i = 0; !err && i < in.count; i++) {
        float *v = NULL;
        int64_t n = 0;
        err = run_one(se, in.toks[i], in.n[i], i, norm, &v, &n, status);
        if (err) break;
        cJSON *item = cJSON_CreateObject();
        if (oai) cJSON_AddStringToObject(item, "object", "embedding");
        cJSON_AddNumberToObject(item, "index", i);
        if (oai) {
            cJSON_AddItemToObject(item, "embedding", vector_json(v, n, base64));
        } else { /* rows: one per token with pooling none, else one */
            cJSON *rows = cJSON_CreateArray();
            for (int64_t r = 0; r < n / E; r++) cJSON_AddItemToArray(rows, vector_json(v + r * E, E, base64));
            cJSON_AddItemToObject(item, "embedding", rows);
        }
        cJSON_AddItemToArray(data, item);
        free(v);
    }
    if (!err && oai) {
        cJSON_AddStringToObject(out, "object", "list");
        cJSON_AddItemToObject(out, "data", data);
        cJSON_AddStringToObject(out, "model", se->model_id);
        cJSON_AddItemToObject(out, "usage", usage_json(in.n_tokens));
        data = NULL;
    }
    char *body = err ? err : cJSON_PrintUnformatted(out);
    if (!err) *status = body ? 200 : 500;
    if (oai && data) cJSON_Delete(data);
    cJSON_Delete(out);
    inputs_free(&in);
    return body ? body : fail(status, 500, NULL, "out of memory");
}

typedef struct rerank_result {
    int index;
    float score;
} rerank_result;

static int by_score(const void *a, const void *b) {
    const rerank_result *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? 1 : -1;
    return x->index - y->index;
}

/* A document's text: a string, or an object with a string "text" (the
 * shape of Cohere's and Jina's document objects); NULL otherwise. */
static const char *doc_text(const cJSON *d) {
    if (cJSON_IsString(d)) return d->valuestring;
    const cJSON *t = cJSON_IsObject(d) ? cJSON_GetObjectItemCaseSensitive(d, "text") : NULL;
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

/* The score of each document against query and the prompt tokens used;
 * NULL (results filled) or an error body. */
static char *rerank_scores(serve_embed *se, const char *q, const cJSON *docs, rerank_result *res, int64_t *n_tokens,
                           int *status) {
    int i = 0;
    for (const cJSON *d = docs->child; d; d = d->next, i++) {
        const char *t = doc_text(d);
        int32_t need = tessera_rerank_tokens_server(se->model, q, strlen(q), t, strlen(t), NULL, 0);
        if (need == INT32_MIN) return fail(status, 400, "documents", "document %d: %s", i, tessera_last_error());
        need = need < 0 ? -need : need;
        tessera_token *toks = malloc((size_t)(need > 0 ? need : 1) * sizeof *toks);
        if (!toks) return fail(status, 500, NULL, "out of memory");
        int32_t n = tessera_rerank_tokens_server(se->model, q, strlen(q), t, strlen(t), toks, need);
        float *v = NULL;
        int64_t got = 0;
        char *err = run_one(se, toks, n, i, TESSERA_EMBD_NORM_NONE, &v, &got, status);
        free(toks);
        if (err) return err;
        res[i] = (rerank_result){.index = i, .score = v[0]};
        *n_tokens += n;
        free(v);
    }
    return NULL;
}

/* The response: {"results": [{index, relevance_score, document?}], usage}
 * (Jina's and Cohere's shape), or for a request that named its documents
 * "texts" (Hugging Face TEI's /rerank) a bare [{index, score, text?}]. */
static cJSON *rerank_json(const serve_embed *se, const cJSON *root, const cJSON *docs, const rerank_result *res,
                          int top_n, int64_t n_tokens, bool tei) {
    const bool with_text =
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, tei ? "return_text" : "return_documents"));
    cJSON *results = cJSON_CreateArray();
    for (int i = 0; i < top_n; i++) {
        cJSON *item = cJSON_CreateObject();
        const char *text = doc_text(cJSON_GetArrayItem(docs, res[i].index));
        cJSON_AddNumberToObject(item, "index", res[i].index);
        if (with_text && tei) cJSON_AddStringToObject(item, "text", text);
        if (with_text && !tei) {
            cJSON *doc = cJSON_CreateObject();
            cJSON_AddStringToObject(doc, "text", text);
            cJSON_AddItemToObject(item, "document", doc);
        }
        cJSON_AddNumberToObject(item, tei ? "score" : "relevance_score", res[i].score);
        cJSON_AddItemToArray(results, item);
    }
    if (tei) return results;
    cJSON *out = cJSON_CreateObject();
    cJSON_AddStringToObject(out, "model", se->model_id);
    cJSON_AddStringToObject(out, "object", "list");
    cJSON_AddItemToObject(out, "usage", usage_json(n_tokens));
    cJSON_AddItemToObject(out, "results", results);
    return out;
}

/* query, documents (or TEI's texts): strings or {"text"} objects, top_n,
 * return_documents (TEI: return_text). */
static char *handle_rerank(serve_embed *se, const cJSON *root, int *status) {
    if (tessera_context_pooling(se->ctx) != TESSERA_POOLING_RANK)
        return fail(status, 501, NULL, "This server does not support reranking. Start it with `--reranking`");
    const cJSON *query = cJSON_GetObjectItemCaseSensitive(root, "query");
    const cJSON *docs = cJSON_GetObjectItemCaseSensitive(root, "documents");
    const bool tei = !docs && cJSON_HasObjectItem(root, "texts");
    const char *field = tei ? "texts" : "documents";
    if (tei) docs = cJSON_GetObjectItemCaseSensitive(root, "texts");
    const cJSON *top = cJSON_GetObjectItemCaseSensitive(root, "top_n");
    if (!cJSON_IsString(query)) return fail(status, 400, "query", "'query' must be a string");
    if (!cJSON_IsArray(docs) || !docs->child)
        return fail(status, 400, field, "'%s' must be a non-empty array of strings", field);
    int n_docs = cJSON_GetArraySize(docs), top_n = n_docs, i = 0;
    for (const cJSON *d = docs->child; d; d = d->next, i++)
        if (!doc_text(d))
            return fail(status, 400, field, "'%s' item %d must be a string (or an object with a string 'text')", field,
                        i);
    if (top && !cJSON_IsNull(top)) {
        if (!cJSON_IsNumber(top) || top->valuedouble != floor(top->valuedouble) || top->valuedouble < 0)
            return fail(status, 400, "top_n", "'top_n' must be a non-negative integer");
        if (top->valuedouble < n_docs) top_n = (int)top->valuedouble;
    }
    rerank_result *res = calloc((size_t)n_docs, sizeof *res);
    if (!res) return fail(status, 500, NULL, "out of memory");
    int64_t n_tokens = 0;
    char *err = rerank_scores(se, query->valuestring, docs, res, &n_tokens, status);
    if (err) {
        free(res);
        return err;
    }
    qsort(res, (size_t)n_docs, sizeof *res, by_score);
    cJSON *out = rerank_json(se, root, docs, res, top_n, n_tokens, tei);
    char *body = cJSON_PrintUnformatted(out);
    cJSON_Delete(out);
    free(res);
    *status = body ? 200 : 500;
    return body ? body : fail(status, 500, NULL, "out of memory");
}

/* ------------------------------------------------------------ requests */

char *serve_embed_answer(serve_embed *se, bool rerank, bool oai, const char *body, size_t len, int *status) {
    if (!se)
        return fail(status, 501, NULL, "This server does not support %s. Start it with `%s`",
                    rerank ? "reranking" : "embeddings", rerank ? "--reranking" : "--embeddings");
    cJSON *root = cJSON_ParseWithLength(body ? body : "", len);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return fail(status, 400, NULL, "the request body is not a JSON object");
    }
    char *out = rerank ? handle_rerank(se, root, status) : handle_embeddings(se, root, oai, status);
    cJSON_Delete(root);
    return out;
}
