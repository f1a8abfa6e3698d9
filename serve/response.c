/*
 * response — OpenAI-shaped results: whole responses, stream events
 * (content, reasoning, logprobs and tool-call deltas, usage, [DONE]),
 * errors of failed requests, /v1/models.
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "api_internal.h"
#include <tessera/tessera_chat.h>

/* ------------------------------------------------------------ responses */

static cJSON *response_head(const serve_api *api, const serve_call *call, const char *object) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "id", call->id);
    cJSON_AddStringToObject(root, "object", object);
    cJSON_AddNumberToObject(root, "created", (double)call->created);
    cJSON_AddStringToObject(root, "model", api->model_id);
    cJSON_AddStringToObject(root, "system_fingerprint", "tessera");
    return root;
}

/* usage over requests (several for a list of prompts). */
static void add_usage_list(cJSON *root, const serve_request *const *reqs, int n) {
    long long prompt = 0, gen = 0, cached = 0;
    for (int k = 0; k < n; k++) {
        prompt += reqs[k]->n_prompt;
        gen += serve_request_n_gen(reqs[k]);
        cached += reqs[k]->n_cached;
    }
    cJSON *u = cJSON_AddObjectToObject(root, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)gen);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(prompt + gen));
    cJSON *details = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(details, "cached_tokens", (double)cached);
}

static void add_usage(cJSON *root, const serve_request *r) { add_usage_list(root, &r, 1); }

/* ---- logprobs */

/* The bytes of token t (up to cap); its length. */
size_t serve_token_piece(const serve_api *api, tessera_token t, char *buf, size_t cap) {
    int32_t n = tessera_token_to_piece(api->model, t, buf, (int32_t)cap, false);
    if (n == INT32_MIN) return 0;
    return n < 0 ? 0 : (size_t)n;
}

static void add_token(cJSON *o, const char *piece, size_t n, bool bytes) {
    api_add_text(o, "token", piece, n);
    if (!bytes) return;
    cJSON *b = cJSON_AddArrayToObject(o, "bytes");
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(b, cJSON_CreateNumber((unsigned char)piece[i]));
}

/* The text of logprob entry lp within ch (cut where a stop string cut it). */
static size_t entry_text(const serve_choice *ch, const serve_logprob *lp, const char **s) {
    *s = ch->text + lp->offset;
    if (lp->offset >= ch->len) return 0;
    return lp->offset + lp->len > ch->len ? ch->len - lp->offset : lp->len;
}

/* Entries of ch that may be sent: until final, those whose text is ready. */
static size_t entries_ready(const serve_choice *ch, bool final) {
    size_t k = ch->n_lp;
    while (k > 0 && (final ? ch->lp[k - 1].offset >= ch->len && ch->lp[k - 1].len > 0
                           : ch->lp[k - 1].offset + ch->lp[k - 1].len > ch->n_ready))
        k--;
    return k;
}

/* Chat: {"content": [{token, logprob, bytes, top_logprobs}], "refusal": null};
 * with post_sampling_probs llama-server's prob and top_probs instead (the
 * sampler's probabilities after its filters, not logs). */
static cJSON *chat_logprobs(const serve_api *api, const serve_choice *ch, size_t from, size_t to) {
    cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, "content");
    for (size_t i = from; i < to; i++) {
        const serve_logprob *lp = &ch->lp[i];
        const char *s;
        size_t n = entry_text(ch, lp, &s);
        const char *value = lp->post_sampling ? "prob" : "logprob";
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "id", lp->token);
        add_token(e, s, n, true);
        cJSON_AddNumberToObject(e, value, lp->logprob);
        cJSON *top = cJSON_AddArrayToObject(e, lp->post_sampling ? "top_probs" : "top_logprobs");
        for (int32_t k = 0; k < lp->n_top; k++) {
            char buf[256];
            size_t pn = serve_token_piece(api, lp->top_id[k], buf, sizeof buf);
            cJSON *t = cJSON_CreateObject();
            cJSON_AddNumberToObject(t, "id", lp->top_id[k]);
            add_token(t, buf, pn, true);
            cJSON_AddNumberToObject(t, value, lp->top_lp[k]);
            cJSON_AddItemToArray(top, t);
        }
        cJSON_AddItemToArray(arr, e);
    }
    cJSON_AddNullToObject(o, "refusal");
    return o;
}

/* Completions (legacy): tokens, token_logprobs, top_logprobs, text_offset. */
static cJSON *legacy_logprobs(const serve_api *api, const serve_choice *ch, size_t from, size_t to) {
    cJSON *o = cJSON_CreateObject();
    cJSON *toks = cJSON_AddArrayToObject(o, "tokens"), *lps = cJSON_AddArrayToObject(o, "token_logprobs");
    cJSON *tops = cJSON_AddArrayToObject(o, "top_logprobs"), *offs = cJSON_AddArrayToObject(o, "text_offset");
    for (size_t i = from; i < to; i++) {
        const serve_logprob *lp = &ch->lp[i];
        const char *s;
        size_t n = entry_text(ch, lp, &s);
        char *clean = api_utf8_clean(s, n);
        cJSON_AddItemToArray(toks, cJSON_CreateString(clean ? clean : ""));
        free(clean);
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(lp->logprob));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)lp->offset));
        cJSON *top = cJSON_CreateObject();
        for (int32_t k = 0; k < lp->n_top; k++) {
            char buf[256];
            size_t pn = serve_token_piece(api, lp->top_id[k], buf, sizeof buf);
            char *key = api_utf8_clean(buf, pn);
            if (key && !cJSON_GetObjectItemCaseSensitive(top, key))
                cJSON_AddNumberToObject(top, key, lp->top_lp[k]);
            free(key);
        }
        cJSON_AddItemToArray(tops, top);
    }
    return o;
}

static cJSON *logprobs_json(const serve_api *api, const serve_call *call, const serve_choice *ch, size_t from,
                            size_t to) {
    return call->kind == SERVE_CHAT ? chat_logprobs(api, ch, from, to) : legacy_logprobs(api, ch, from, to);
}

/* ---- the reply of a finished chat choice */

typedef struct reply {
    const char *content;
    size_t content_len;
    const char *reasoning;
    size_t reasoning_len;
    tessera_tool_reply parsed; /* tool calls (and harmony's reasoning) */
    size_t n_calls;
} reply;

/* Split a finished choice into content, reasoning and tool calls. */
static int reply_final(const serve_call *call, const serve_request *r, const serve_choice *ch, reply *out) {
    memset(out, 0, sizeof *out);
    serve_split sp;
    const char *text = ch->text ? ch->text : "";
    serve_reply_split(&r->rules, text, ch->len, true, &sp);
    out->reasoning = text + sp.reasoning_at;
    out->reasoning_len = sp.reasoning_end - sp.reasoning_at;
    out->content = text + sp.content_at;
    out->content_len = sp.content_end - sp.content_at;
    if (!r->rules.tools) return 0;
    if (tessera_tool_parse((tessera_tool_format)r->rules.tool_format, out->content, out->content_len,
                        (const char *const *)r->rules.tool_names, (size_t)r->rules.n_tool_names,
                        &out->parsed) != 0)
        return -1;
    out->n_calls = out->parsed.n_calls;
    if (call->single_tool_call && out->n_calls > 1) out->n_calls = 1;
    if (out->n_calls > 0) {
        out->content = out->parsed.content;
        out->content_len = strlen(out->parsed.content);
    }
    if (out->parsed.reasoning && !out->reasoning_len) {
        out->reasoning = out->parsed.reasoning;
        out->reasoning_len = strlen(out->parsed.reasoning);
    }
    return 0;
}

static const char *finish_of(const serve_choice *ch, const reply *rp) {
    if (rp && rp->n_calls > 0) return "tool_calls";
    return ch->finish_reason ? ch->finish_reason : "stop";
}

static void add_tool_calls(cJSON *obj, const serve_call *call, const serve_choice *ch, const reply *rp,
                           bool delta) {
    cJSON *arr = cJSON_AddArrayToObject(obj, "tool_calls");
    for (size_t k = 0; k < rp->n_calls; k++) {
        const tessera_tool_call *tc = &rp->parsed.calls[k];
        cJSON *c = cJSON_CreateObject();
        if (delta) cJSON_AddNumberToObject(c, "index", (double)k);
        char id[96];
        snprintf(id, sizeof id, "call_%s_%d_%zu",
                 strchr(call->id, '-') ? strchr(call->id, '-') + 1 : call->id, (int)ch->index, k);
        cJSON_AddStringToObject(c, "id", tc->id ? tc->id : id);
        cJSON_AddStringToObject(c, "type", "function");
        cJSON *fn = cJSON_AddObjectToObject(c, "function");
        api_add_text(fn, "name", tc->name, strlen(tc->name));
        api_add_text(fn, "arguments", tc->arguments, strlen(tc->arguments));
        cJSON_AddItemToArray(arr, c);
    }
}

/* One finished choice of a response. NULL when its tool calls cannot be parsed. */
static cJSON *choice_json(const serve_api *api, const serve_call *call, const serve_request *r,
                          const serve_choice *ch) {
    bool chat = call->kind == SERVE_CHAT;
    cJSON *choice = cJSON_CreateObject();
    cJSON_AddNumberToObject(choice, "index", ch->index);
    reply rp;
    if (chat) {
        if (reply_final(call, r, ch, &rp) != 0) {
            cJSON_Delete(choice);
            return NULL;
        }
        cJSON *msg = cJSON_AddObjectToObject(choice, "message");
        cJSON_AddStringToObject(msg, "role", "assistant");
        if (rp.n_calls > 0 && rp.content_len == 0) cJSON_AddNullToObject(msg, "content");
        else api_add_text(msg, "content", rp.content, rp.content_len);
        if (rp.reasoning_len > 0) api_add_text(msg, "reasoning_content", rp.reasoning, rp.reasoning_len);
        if (rp.n_calls > 0) add_tool_calls(msg, call, ch, &rp, false);
    } else {
        api_add_text(choice, "text", ch->text, ch->len);
    }
    if (r->top_logprobs >= 0)
        cJSON_AddItemToObject(choice, "logprobs", logprobs_json(api, call, ch, 0, entries_ready(ch, true)));
    else cJSON_AddNullToObject(choice, "logprobs");
    cJSON_AddStringToObject(choice, "finish_reason", finish_of(ch, chat ? &rp : NULL));
    if (chat) tessera_tool_reply_free(&rp.parsed);
    return choice;
}

/* llama-server's "__verbose" (asked by "verbose" or --verbose): the prompt
 * as the model read it (its tokens as text, special ones written out) and
 * each choice's whole generated text before any reasoning or tool-call
 * split: what to look at when a template or a parser surprises. */
static void add_verbose(const serve_api *api, cJSON *root, const serve_request *r) {
    cJSON *v = cJSON_AddObjectToObject(root, "__verbose");
    serve_json_add_prompt(api, v, "prompt", r);
    cJSON_AddNumberToObject(v, "n_prompt_tokens", r->n_prompt);
    cJSON *texts = cJSON_AddArrayToObject(v, "content");
    for (int32_t i = 0; i < r->n_choices; i++) {
        char *clean = api_utf8_clean(r->choices[i].text ? r->choices[i].text : "", r->choices[i].len);
        cJSON_AddItemToArray(texts, cJSON_CreateString(clean ? clean : ""));
        free(clean);
    }
}

char *serve_api_response(const serve_api *api, const serve_call *call, const serve_request *r) {
    return serve_api_response_list(api, call, &r, 1);
}

char *serve_api_response_list(const serve_api *api, const serve_call *call, const serve_request *const *reqs,
                              int n) {
    bool chat = call->kind == SERVE_CHAT;
    cJSON *root = response_head(api, call, chat ? "chat.completion" : "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(root, "choices");
    for (int k = 0; k < n; k++)
        for (int32_t i = 0; i < reqs[k]->n_choices; i++) {
            cJSON *choice = choice_json(api, call, reqs[k], &reqs[k]->choices[i]);
            if (!choice) {
                cJSON_Delete(root);
                return NULL;
            }
            cJSON_AddItemToArray(choices, choice);
        }
    add_usage_list(root, reqs, n);
    if (n == 1) serve_json_add_timings(root, reqs[0], &reqs[0]->choices[0]); /* llama-server's */
    if (call->verbose) add_verbose(api, root, reqs[0]);
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

/* A chunk for one choice: *delta (chat) to fill; returns the choice object. */
static cJSON *chunk_new(const serve_api *api, const serve_call *call, const serve_choice *ch, cJSON **root,
                        cJSON **delta) {
    bool chat = call->kind == SERVE_CHAT;
    *root = response_head(api, call, chat ? "chat.completion.chunk" : "text_completion");
    cJSON *choice = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(*root, "choices"), choice);
    cJSON_AddNumberToObject(choice, "index", ch->index);
    *delta = chat ? cJSON_AddObjectToObject(choice, "delta") : NULL;
    return choice;
}

/* timed: the choice's request asked for timings_per_token (NULL: not, or
 * the opening chunk, which llama-server sends without them). */
static char *chunk_finish(char *out, cJSON *root, cJSON *choice, cJSON *logprobs, const char *finish,
                          const serve_choice *timed) {
    if (timed) serve_json_add_timings(root, timed->req, timed);
    if (logprobs) cJSON_AddItemToObject(choice, "logprobs", logprobs);
    else cJSON_AddNullToObject(choice, "logprobs");
    if (finish) cJSON_AddStringToObject(choice, "finish_reason", finish);
    else cJSON_AddNullToObject(choice, "finish_reason");
    return serve_sse_append(out, root);
}

/* What of one choice is new since the last call. */
static char *choice_events(const serve_api *api, const serve_call *call, const serve_request *r,
                           serve_choice *ch, char *out) {
    bool chat = call->kind == SERVE_CHAT, final = ch->state == SERVE_DONE;
    cJSON *root, *delta, *choice;
    if (chat && !ch->opened) {
        choice = chunk_new(api, call, ch, &root, &delta);
        cJSON_AddStringToObject(delta, "role", "assistant");
        cJSON_AddNullToObject(delta, "content"); /* as llama-server; the openai client reads null as none */
        out = chunk_finish(out, root, choice, NULL, NULL, NULL);
    }
    ch->opened = true;
    const serve_choice *timed = call->timings_per_token ? ch : NULL;
    if (ch->closed) return out;
    const char *text = ch->text ? ch->text : "";
    size_t lp_to = r->top_logprobs >= 0 ? entries_ready(ch, final) : 0;
    cJSON *lp = lp_to > ch->sent_lp ? logprobs_json(api, call, ch, ch->sent_lp, lp_to) : NULL;
    if (lp_to > ch->sent_lp) ch->sent_lp = lp_to;
    reply rp = {0};
    if (!chat) {
        size_t to = final ? ch->len : ch->n_ready;
        if (to > ch->sent_content || lp) {
            choice = chunk_new(api, call, ch, &root, &delta);
            api_add_text(choice, "text", text + ch->sent_content, to - ch->sent_content);
            ch->sent_content = to;
            out = chunk_finish(out, root, choice, lp, NULL, timed);
            lp = NULL;
        }
    } else {
        /* Reasoning and content: what the split shows now, past what was sent. */
        serve_split sp;
        serve_reply_split(&r->rules, text, final ? ch->len : ch->n_ready, final, &sp);
        const char *content = text + sp.content_at;
        size_t content_len = sp.content_end - sp.content_at;
        if (final && reply_final(call, r, ch, &rp) == 0 && rp.n_calls > 0) {
            /* Content beside calls is what the parse kept; send only what
             * extends what was sent. */
            bool extends =
                rp.content_len >= ch->sent_content &&
                !memcmp(rp.content, content, ch->sent_content < content_len ? ch->sent_content : content_len);
            content = rp.content;
            content_len = extends ? rp.content_len : ch->sent_content;
        }
        size_t r_len = sp.reasoning_end - sp.reasoning_at;
        bool new_r = r_len > ch->sent_reasoning, new_c = content_len > ch->sent_content;
        if (new_r || new_c || lp) {
            choice = chunk_new(api, call, ch, &root, &delta);
            if (new_r) api_add_text(delta, "reasoning_content", text + sp.reasoning_at + ch->sent_reasoning,
                                r_len - ch->sent_reasoning);
            if (new_c) api_add_text(delta, "content", content + ch->sent_content, content_len - ch->sent_content);
            if (new_r) ch->sent_reasoning = r_len;
            if (new_c) ch->sent_content = content_len;
            out = chunk_finish(out, root, choice, lp, NULL, timed);
            lp = NULL;
        }
        if (final && rp.n_calls > 0) {
            choice = chunk_new(api, call, ch, &root, &delta);
            add_tool_calls(delta, call, ch, &rp, true);
            out = chunk_finish(out, root, choice, NULL, NULL, timed);
        }
    }
    cJSON_Delete(lp);
    if (final) {
        choice = chunk_new(api, call, ch, &root, &delta);
        if (!chat) api_add_text(choice, "text", "", 0);
        out = chunk_finish(out, root, choice, NULL, finish_of(ch, chat ? &rp : NULL), timed);
        ch->closed = true;
    }
    tessera_tool_reply_free(&rp.parsed);
    return out;
}

int serve_grammar_failure_status(const char *error) { return strstr(error, "out of memory") ? 500 : 400; }

int serve_request_error_status(const serve_request *r) { return r->error_status ? r->error_status : 500; }

char *serve_request_error_json(const serve_request *r) {
    const int status = serve_request_error_status(r);
    if (status < 500) return serve_api_error_json(r->error, "invalid_request_error", r->grammar_param, NULL);
    return serve_api_error_json(r->error, "server_error", NULL, status == 503 ? "shutting_down" : NULL);
}

char *serve_api_stream_next(const serve_api *api, const serve_call *call, serve_request *r, uint64_t *seen,
                            bool *finished) {
    *seen = r->progress;
    char *out = NULL;
    if (r->state == SERVE_DONE && r->error[0]) {
        char *ej = serve_request_error_json(r);
        char *ev = ej ? serve_sse_append_text(NULL, ej) : NULL;
        free(ej);
        *finished = true;
        return serve_sse_append_text(ev, "[DONE]");
    }
    for (;;) { /* return_progress: llama-server's prompt_progress chunks, without choices */
        cJSON *ev = response_head(api, call, call->kind == SERVE_CHAT ? "chat.completion.chunk" : "text_completion");
        cJSON_AddArrayToObject(ev, "choices");
        if (!serve_json_add_progress(ev, r, call->timings_per_token)) {
            cJSON_Delete(ev);
            break;
        }
        out = serve_sse_append(out, ev);
    }
    for (int32_t i = 0; i < r->n_choices; i++) out = choice_events(api, call, r, &r->choices[i], out);
    if (r->state == SERVE_DONE) {
        if (call->include_usage) {
            cJSON *u = response_head(api, call,
                                     call->kind == SERVE_CHAT ? "chat.completion.chunk" : "text_completion");
            cJSON_AddArrayToObject(u, "choices");
            add_usage(u, r);
            serve_json_add_timings(u, r, &r->choices[0]); /* as llama-server's last chunk */
            out = serve_sse_append(out, u);
        }
        out = serve_sse_append_text(out, "[DONE]");
        *finished = true;
    }
    return out;
}

/* A comma-separated list (--alias, --tags) as a JSON array of its names. */
static cJSON *name_list(const char *list, const char *fallback) {
    cJSON *arr = cJSON_CreateArray();
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list ? list : fallback ? fallback : "");
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (*t) cJSON_AddItemToArray(arr, cJSON_CreateString(t));
    return arr;
}

static cJSON *model_object(const serve_api *api) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", api->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)api->created);
    cJSON_AddStringToObject(m, "owned_by", api->owned_by[0] ? api->owned_by : "tessera");
    cJSON_AddItemToObject(m, "aliases", name_list(api->aliases, api->model_id));
    cJSON_AddItemToObject(m, "tags", name_list(api->tags, NULL));
    cJSON *meta = cJSON_AddObjectToObject(m, "meta");
    cJSON_AddStringToObject(meta, "description", tessera_model_desc(api->model));
    cJSON_AddNumberToObject(meta, "n_ctx_slot", api->slot_ctx);
    cJSON_AddNumberToObject(meta, "n_ctx_train", tessera_model_n_ctx_train(api->model));
    cJSON_AddNumberToObject(meta, "n_embd", tessera_model_n_embd(api->model));
    cJSON_AddNumberToObject(meta, "n_params", (double)tessera_model_n_params(api->model));
    cJSON_AddNumberToObject(meta, "size", (double)tessera_model_size_bytes(api->model));
    cJSON_AddNumberToObject(meta, "n_vocab", tessera_model_n_vocab(api->model));
    /* llama-server's input and output modalities (text, and image with a
     * vision projector: --mmproj) */
    cJSON *arch = cJSON_AddObjectToObject(m, "architecture");
    cJSON *in = cJSON_AddArrayToObject(arch, "input_modalities");
    cJSON_AddItemToArray(in, cJSON_CreateString("text"));
    if (api->mtmd && tessera_mtmd_supports_vision(api->mtmd)) cJSON_AddItemToArray(in, cJSON_CreateString("image"));
    if (api->mtmd && tessera_mtmd_supports_audio(api->mtmd)) cJSON_AddItemToArray(in, cJSON_CreateString("audio"));
    cJSON_AddItemToArray(cJSON_AddArrayToObject(arch, "output_modalities"), cJSON_CreateString("text"));
    return m;
}

/* llama-server's Ollama-style entry of /v1/models' "models" (its fields,
 * measured on llama-server): capabilities "completion", and "multimodal"
 * with a projector. */
static cJSON *ollama_model_object(const serve_api *api) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "name", api->model_id);
    cJSON_AddStringToObject(m, "model", api->model_id);
    static const char *const empty[] = {"modified_at", "size", "digest"};
    for (size_t i = 0; i < sizeof empty / sizeof *empty; i++) cJSON_AddStringToObject(m, empty[i], "");
    cJSON_AddStringToObject(m, "type", "model");
    cJSON_AddStringToObject(m, "description", "");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(m, "tags"), cJSON_CreateString(""));
    cJSON *caps = cJSON_AddArrayToObject(m, "capabilities");
    cJSON_AddItemToArray(caps, cJSON_CreateString("completion"));
    if (api->mtmd) cJSON_AddItemToArray(caps, cJSON_CreateString("multimodal"));
    cJSON_AddStringToObject(m, "parameters", "");
    cJSON *details = cJSON_AddObjectToObject(m, "details");
    cJSON_AddStringToObject(details, "parent_model", "");
    cJSON_AddStringToObject(details, "format", "gguf");
    cJSON_AddStringToObject(details, "family", "");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(details, "families"), cJSON_CreateString(""));
    cJSON_AddStringToObject(details, "parameter_size", "");
    cJSON_AddStringToObject(details, "quantization_level", "");
    return m;
}

char *serve_api_models(const serve_api *api) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "models"), ollama_model_object(api));
    cJSON_AddStringToObject(root, "object", "list");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "data"), model_object(api));
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

char *serve_api_model(const serve_api *api, const char *id) {
    cJSON *m = model_object(api);
    const cJSON *alias;
    bool found = !strcmp(id, api->model_id);
    cJSON_ArrayForEach(alias, cJSON_GetObjectItemCaseSensitive(m, "aliases"))
        found = found || !strcmp(alias->valuestring, id);
    char *s = found ? cJSON_PrintUnformatted(m) : NULL;
    cJSON_Delete(m);
    return s;
}

