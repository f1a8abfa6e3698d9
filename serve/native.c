/*
 * native — llama-server's own endpoints and response shapes, for the tools
 * written against it: POST /completion and /infill results (content,
 * tokens, stop_type, timings, completion_probabilities...), their streams
 * (one JSON object per event, no [DONE]), /tokenize and /detokenize.
 * Requests are parsed by api.c (kinds SERVE_NATIVE and SERVE_INFILL).
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "format.h"

/* ------------------------------------------------------------ pieces */

/* A token's bytes as JSON: a string when they are valid UTF-8, else the
 * byte values (llama-server's with_pieces does the same). */
static cJSON *piece_json(const serve_api *api, tessera_token t, bool bytes_only) {
    char buf[256];
    int32_t got = tessera_token_to_piece(api->model, t, buf, sizeof buf, true); /* special tokens as their text */
    size_t n = got > 0 ? (size_t)got : 0;
    if (!bytes_only && serve_utf8_complete(buf, n) == n && serve_utf8_valid(buf, n)) {
        char *s = malloc(n + 1);
        if (!s) return NULL;
        memcpy(s, buf, n);
        s[n] = '\0';
        cJSON *j = cJSON_CreateString(s);
        free(s);
        return j;
    }
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr && i < n; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber((unsigned char)buf[i]));
    return arr;
}

/* {id, token, logprob or prob (post_sampling_probs), bytes} */
static void add_prob_entry(const serve_api *api, cJSON *o, tessera_token id, float logprob, bool post_sampling) {
    char buf[256];
    size_t n = serve_token_piece(api, id, buf, sizeof buf);
    cJSON_AddNumberToObject(o, "id", id);
    serve_json_add_text(o, "token", buf, n);
    cJSON_AddNumberToObject(o, post_sampling ? "prob" : "logprob", logprob);
    cJSON *b = cJSON_AddArrayToObject(o, "bytes");
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(b, cJSON_CreateNumber((unsigned char)buf[i]));
}

/* completion_probabilities entries [from, to) of ch. */
static cJSON *probs_json(const serve_api *api, const serve_choice *ch, size_t from, size_t to) {
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = from; arr && i < to; i++) {
        const serve_logprob *lp = &ch->lp[i];
        cJSON *e = cJSON_CreateObject();
        add_prob_entry(api, e, lp->token, lp->logprob, lp->post_sampling);
        cJSON *top = cJSON_AddArrayToObject(e, lp->post_sampling ? "top_probs" : "top_logprobs");
        for (int32_t k = 0; k < lp->n_top; k++) {
            cJSON *t = cJSON_CreateObject();
            add_prob_entry(api, t, lp->top_id[k], lp->top_lp[k], lp->post_sampling);
            cJSON_AddItemToArray(top, t);
        }
        cJSON_AddItemToArray(arr, e);
    }
    return arr;
}

static cJSON *tokens_json(const tessera_token *t, int32_t from, int32_t to) {
    cJSON *arr = cJSON_CreateArray();
    for (int32_t i = from; arr && i < to; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(t[i]));
    return arr;
}


/* ------------------------------------------------------------ results */

static void add_settings(const serve_api *api, cJSON *o, const serve_request *r, const serve_choice *ch) {
    cJSON *g = cJSON_AddObjectToObject(o, "generation_settings");
    cJSON_AddNumberToObject(g, "n_predict", r->max_tokens);
    cJSON_AddNumberToObject(g, "seed", ch->sampler ? tessera_sampler_seed(ch->sampler) : 0);
    serve_json_add_sampling(g, &r->sampling);
    cJSON_AddNumberToObject(g, "n_probs", r->top_logprobs > 0 ? r->top_logprobs : 0);
    cJSON_AddBoolToObject(g, "post_sampling_probs", r->post_sampling_probs);
    cJSON_AddBoolToObject(g, "cache_prompt", r->cache_prompt);
    cJSON_AddNumberToObject(g, "id_slot", r->id_slot);
    cJSON_AddStringToObject(g, "model", api->model_id);
    /* llama.cpp's adaptive-p sampler, which Tessera does not have: off */
    cJSON_AddNumberToObject(g, "adaptive_target", -1.0);
    cJSON_AddNullToObject(g, "adaptive_decay");
    cJSON *stop = cJSON_AddArrayToObject(g, "stop");
    for (int i = 0; i < r->n_stop; i++) cJSON_AddItemToArray(stop, cJSON_CreateString(r->stop[i]));
    /* [{bias, token}], a ban (-inf) as null: llama-server's shape */
    cJSON *bias = cJSON_AddArrayToObject(g, "logit_bias");
    for (int32_t i = 0; i < r->n_logit_bias; i++) {
        cJSON *e = cJSON_CreateObject();
        float b = r->logit_bias[i].bias;
        cJSON_AddItemToObject(e, "bias", isinf(b) ? cJSON_CreateNull() : cJSON_CreateNumber(b));
        cJSON_AddNumberToObject(e, "token", r->logit_bias[i].token);
        cJSON_AddItemToArray(bias, e);
    }
    cJSON_AddBoolToObject(g, "ignore_eos", r->ignore_eos);
}

/* The fields of a finished choice beside its content. */
static void add_final_fields(const serve_api *api, cJSON *o, const serve_call *call, const serve_request *r,
                             const serve_choice *ch) {
    cJSON_AddStringToObject(o, "model", api->model_id);
    cJSON_AddNumberToObject(o, "tokens_predicted", ch->n_gen);
    cJSON_AddNumberToObject(o, "tokens_evaluated", r->n_prompt);
    add_settings(api, o, r, ch);
    serve_json_add_prompt(api, o, "prompt", r);
    cJSON_AddBoolToObject(o, "has_new_line", ch->text && memchr(ch->text, '\n', ch->len) != NULL);
    cJSON_AddBoolToObject(o, "truncated", ch->truncated);
    const char *st = ch->stop_type ? ch->stop_type : r->cut ? "limit" : "none";
    cJSON_AddStringToObject(o, "stop_type", st);
    cJSON_AddStringToObject(o, "stopping_word", "");
    cJSON_AddNumberToObject(o, "tokens_cached", r->n_prompt + ch->n_gen);
    serve_json_add_timings(o, r, ch);
    (void)call;
}

/* {"a": ..., "b": ...} keeping only the names of call->response_fields;
 * "x/y" reaches into object x and is kept under the key "x/y". */
static cJSON *project(cJSON *full, const char *fields_json) {
    cJSON *names = cJSON_Parse(fields_json), *out = cJSON_CreateObject();
    const cJSON *n;
    cJSON_ArrayForEach(n, names) {
        if (!cJSON_IsString(n)) continue;
        const cJSON *at = full;
        char path[256];
        snprintf(path, sizeof path, "%s", n->valuestring);
        for (char *part = strtok(path, "/"); part && at; part = strtok(NULL, "/"))
            at = cJSON_GetObjectItemCaseSensitive(at, part);
        if (at) cJSON_AddItemToObject(out, n->valuestring, cJSON_Duplicate(at, 1));
    }
    cJSON_Delete(names);
    cJSON_Delete(full);
    return out;
}

/* response_fields given and not empty ([] keeps everything, as llama-server). */
static bool has_projection(const serve_call *call) {
    return call->response_fields[0] && strcmp(call->response_fields, "[]") != 0;
}

static cJSON *native_result(const serve_api *api, const serve_call *call, const serve_request *r) {
    const serve_choice *ch = &r->choices[0];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", call->prompt_index);
    serve_json_add_text(o, "content", ch->text, ch->len);
    cJSON_AddItemToObject(o, "tokens", call->return_tokens ? tokens_json(ch->toks, 0, ch->n_toks) : cJSON_CreateArray());
    cJSON_AddNumberToObject(o, "id_slot", ch->slot);
    cJSON_AddBoolToObject(o, "stop", true);
    add_final_fields(api, o, call, r, ch);
    if (call->n_probs > 0) cJSON_AddItemToObject(o, "completion_probabilities", probs_json(api, ch, 0, ch->n_lp));
    return has_projection(call) ? project(o, call->response_fields) : o;
}

char *serve_native_response(const serve_api *api, const serve_call *calls, serve_request *const *reqs, int n) {
    cJSON *root = n == 1 ? native_result(api, &calls[0], reqs[0]) : cJSON_CreateArray();
    for (int i = 0; n > 1 && i < n; i++) cJSON_AddItemToArray(root, native_result(api, &calls[i], reqs[i]));
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

/* ------------------------------------------------------------ streams */

static cJSON *partial(const serve_call *call, const serve_choice *ch, const char *text, size_t n) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", call->prompt_index);
    serve_json_add_text(o, "content", text, n);
    cJSON_AddNumberToObject(o, "id_slot", ch->slot);
    cJSON_AddBoolToObject(o, "stop", false);
    return o;
}

/* A stream's new events: with n_probs one per token (its text and its
 * probabilities), else what text became ready; then the final result with
 * empty content, stop true and the statistics. */
char *serve_native_stream_next(const serve_api *api, const serve_call *call, serve_request *r, uint64_t *seen,
                               bool *finished) {
    *seen = r->progress;
    serve_choice *ch = &r->choices[0];
    if (r->state == SERVE_DONE && r->error[0]) {
        *finished = true;
        char *ej = serve_request_error_json(r);
        cJSON *e = ej ? cJSON_Parse(ej) : NULL;
        free(ej);
        return e ? serve_sse_append(NULL, e) : NULL;
    }
    bool final = ch->state == SERVE_DONE;
    char *out = NULL;
    for (;;) { /* return_progress: prompt_progress events with no content */
        cJSON *o = partial(call, ch, "", 0);
        if (!serve_json_add_progress(o, r, call->timings_per_token)) {
            cJSON_Delete(o);
            break;
        }
        out = serve_sse_append(out, o);
    }
    if (call->n_probs > 0) {
        size_t to = ch->n_lp;
        while (!final && to > ch->sent_lp && ch->lp[to - 1].offset + ch->lp[to - 1].len > ch->n_ready) to--;
        for (size_t i = ch->sent_lp; i < to; i++) {
            const serve_logprob *lp = &ch->lp[i];
            size_t end = lp->offset + lp->len < ch->len ? lp->offset + lp->len : ch->len;
            size_t at = lp->offset < end ? lp->offset : end;
            cJSON *o = partial(call, ch, ch->text + at, end - at);
            cJSON_AddItemToObject(o, "completion_probabilities", probs_json(api, ch, i, i + 1));
            cJSON_AddItemToObject(o, "tokens", tokens_json(&lp->token, 0, 1));
            if (call->timings_per_token) serve_json_add_timings(o, r, ch);
            out = serve_sse_append(out, o);
            ch->sent_content = end;
        }
        ch->sent_lp = to;
    } else {
        size_t to = final ? ch->len : ch->n_ready;
        if (to > ch->sent_content) {
            cJSON *o = partial(call, ch, ch->text + ch->sent_content, to - ch->sent_content);
            cJSON_AddItemToObject(o, "tokens", tokens_json(ch->toks, ch->sent_toks, ch->n_toks));
            if (call->timings_per_token) serve_json_add_timings(o, r, ch);
            out = serve_sse_append(out, o);
            ch->sent_content = to;
            ch->sent_toks = ch->n_toks;
        }
    }
    if (final) {
        cJSON *o = partial(call, ch, "", 0);
        cJSON_ReplaceItemInObject(o, "stop", cJSON_CreateBool(true));
        cJSON_AddItemToObject(o, "tokens", cJSON_CreateArray());
        add_final_fields(api, o, call, r, ch);
        out = serve_sse_append(out, has_projection(call) ? project(o, call->response_fields) : o);
        *finished = true;
    }
    return out;
}

/* ------------------------------------------------------------ tokenizer */

static cJSON *parse_body(const char *body, size_t len, serve_error *err) {
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        serve_fail(err, 400, NULL, NULL, "the request body must be a JSON object");
        return NULL;
    }
    return root;
}

/* POST /tokenize {"content", "add_special" (false), "parse_special" (true),
 * "with_pieces" (false)} -> {"tokens": [id...]} or [{"id", "piece"}...]. */
char *serve_native_tokenize(const serve_api *api, const char *body, size_t len, serve_error *err) {
    cJSON *root = parse_body(body, len, err);
    if (!root) return NULL;
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(root, "content");
    const cJSON *add = cJSON_GetObjectItemCaseSensitive(root, "add_special");
    const cJSON *special = cJSON_GetObjectItemCaseSensitive(root, "parse_special");
    const cJSON *pieces = cJSON_GetObjectItemCaseSensitive(root, "with_pieces");
    char *out = NULL;
    tessera_token *t = NULL;
    if (!cJSON_IsString(content)) {
        serve_fail(err, 400, "content", NULL, "'content' must be a string");
        goto done;
    }
    size_t n_text = strlen(content->valuestring);
    bool add_special = cJSON_IsTrue(add), parse_special = !cJSON_IsFalse(special);
    int32_t n = tessera_tokenize(api->model, content->valuestring, n_text, NULL, 0, add_special, parse_special);
    if (n == INT32_MIN) {
        serve_fail(err, 400, "content", NULL, "cannot tokenize 'content': %s", tessera_last_error());
        goto done;
    }
    n = n < 0 ? -n : n;
    t = malloc((size_t)(n ? n : 1) * sizeof *t);
    if (!t || tessera_tokenize(api->model, content->valuestring, n_text, t, n, add_special, parse_special) != n) {
        serve_fail(err, 500, NULL, NULL, "out of memory");
        goto done;
    }
    cJSON *res = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(res, "tokens");
    for (int32_t i = 0; i < n; i++) {
        if (!cJSON_IsTrue(pieces)) {
            cJSON_AddItemToArray(arr, cJSON_CreateNumber(t[i]));
            continue;
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", t[i]);
        cJSON_AddItemToObject(o, "piece", piece_json(api, t[i], false));
        cJSON_AddItemToArray(arr, o);
    }
    out = cJSON_PrintUnformatted(res);
    cJSON_Delete(res);
    if (!out) serve_fail(err, 500, NULL, NULL, "out of memory");
done:
    free(t);
    cJSON_Delete(root);
    return out;
}

/* POST /detokenize {"tokens": [id...]} -> {"content": "..."}. */
char *serve_native_detokenize(const serve_api *api, const char *body, size_t len, serve_error *err) {
    cJSON *root = parse_body(body, len, err);
    if (!root) return NULL;
    const cJSON *toks = cJSON_GetObjectItemCaseSensitive(root, "tokens"), *v;
    int32_t n_vocab = tessera_model_n_vocab(api->model), n = 0;
    tessera_token *t = NULL;
    char *text = NULL, *out = NULL;
    if (!cJSON_IsArray(toks)) {
        serve_fail(err, 400, "tokens", NULL, "'tokens' must be an array of token ids");
        goto done;
    }
    t = malloc((size_t)(cJSON_GetArraySize(toks) + 1) * sizeof *t);
    if (!t) goto oom;
    cJSON_ArrayForEach(v, toks) {
        if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= n_vocab ||
            v->valuedouble != (double)(tessera_token)v->valuedouble) {
            serve_fail(err, 400, "tokens", NULL, "'tokens' must hold token ids in 0..%d", n_vocab - 1);
            goto done;
        }
        t[n++] = (tessera_token)v->valuedouble;
    }
    int32_t need = tessera_detokenize(api->model, t, n, NULL, 0, false, true);
    need = need < 0 ? -need : need;
    text = malloc((size_t)need + 1);
    if (!text) goto oom;
    int32_t got = n ? tessera_detokenize(api->model, t, n, text, need + 1, false, true) : 0;
    cJSON *res = cJSON_CreateObject();
    serve_json_add_text(res, "content", text, got > 0 ? (size_t)got : 0);
    out = cJSON_PrintUnformatted(res);
    cJSON_Delete(res);
    if (out) goto done;
oom:
    serve_fail(err, 500, NULL, NULL, "out of memory");
done:
    free(t);
    free(text);
    cJSON_Delete(root);
    return out;
}
