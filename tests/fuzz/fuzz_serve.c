/* Fuzz target: what tessera serve does with a client's bytes before and
 * after generation. The first byte picks the endpoint (chat or completion)
 * and the chat template; the rest is the request: its first line goes
 * through the gate's request-line check, all of it through the OpenAI
 * request parser, and for a request that parses, the bytes become the
 * "generated" text: stop strings, the UTF-8-safe ready length, and the JSON
 * of the response and of stream chunks are rendered from it. A chat input
 * also goes through the other dialects (Anthropic's /v1/messages and
 * count_tokens, OpenAI's /v1/responses and its input_tokens): their errors,
 * replies and event streams must be JSON too. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "dialect.h"
#include "serve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tessera_model *model;
static const char *const families[] = {"chatml", "llama2", "llama3", "gemma", "phi3", "zephyr", "mistral"};
static tessera_chat_template *templates[7];
/* The parser's view of the server: two slots, so "n" up to 2 parses (with
 * none, every request was refused at "n" and the fuzzer never got past it). */
static serve_api harness_api(const tessera_chat_template *tmpl) {
    return (serve_api){.model = model, .model_id = "fuzz", .tmpl = tmpl, .n_slots = 2, .slot_ctx = 256};
}

/* The harness itself is checked once: a plain request must parse, or the
 * fuzzer would spend its time on one refusal. */
static void check_harness(void) {
    static const char body[] = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"n\": 2}";
    serve_api api = harness_api(templates[0]);
    serve_call call;
    serve_request *r = NULL;
    serve_error err = {0, NULL};
    if (serve_api_parse(&api, SERVE_CHAT, body, sizeof body - 1, &call, &r, &err) != 0) {
        fprintf(stderr, "fuzz_serve: the harness refuses a plain request: %s\n", err.body ? err.body : "?");
        abort();
    }
    serve_request_free(r);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    tessera_init_params ip = {0};
    if (tessera_init(&ip) != 0) abort();
    const char *dir = getenv("TESSERA_SHARED");
    char path[4096];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", dir ? dir : FUZZ_SHARED_DIR);
    tessera_model_params mp = tessera_model_default_params();
    mp.devices = "ref";
    model = tessera_model_load(path, &mp);
    if (!model) {
        fprintf(stderr, "fuzz_serve: %s: %s (set TESSERA_SHARED)\n", path, tessera_last_error());
        abort();
    }
    for (int i = 0; i < 7; i++) {
        templates[i] = tessera_chat_template_builtin(families[i], "<s>", "</s>");
        if (!templates[i]) abort();
    }
    check_harness();
    return 0;
}

static void must_be_json(char *s, const char *what) {
    cJSON *j = s ? cJSON_Parse(s) : NULL;
    if (s && !j) {
        fprintf(stderr, "fuzz_serve: %s is not JSON: %.200s\n", what, s);
        abort();
    }
    cJSON_Delete(j);
    free(s);
}

/* Events "data: JSON\n\n", each JSON. */
static void must_be_sse(char *s) {
    if (!s) return; /* out of memory */
    for (char *p = s; *p;) {
        char *end = strstr(p, "\n\n");
        if (!strncmp(p, "data: [DONE]\n\n", 14)) {
            p += 14;
            continue;
        }
        if (strncmp(p, "data: ", 6) != 0 || !end) {
            fprintf(stderr, "fuzz_serve: not an SSE event: %.200s\n", p);
            abort();
        }
        *end = '\0';
        must_be_json(strdup(p + 6), "an event");
        p = end + 2;
    }
    free(s);
}

/* Events "event: NAME\ndata: JSON\n\n", each JSON. */
static void must_be_named_sse(char *s) {
    if (!s) return;
    for (char *p = s; *p;) {
        char *data = strstr(p, "\ndata: "), *end = data ? strstr(data, "\n\n") : NULL;
        if (strncmp(p, "event: ", 7) != 0 || !end) {
            fprintf(stderr, "fuzz_serve: not a named SSE event: %.200s\n", p);
            abort();
        }
        *end = '\0';
        must_be_json(strdup(data + 7), "a dialect's event");
        p = end + 2;
    }
    free(s);
}

/* A refusal: a 4xx/5xx with a JSON body, in the dialect's shape if it has one. */
static void must_be_refusal(const serve_format *d, serve_error *err) {
    if (err->status < 400 || err->status > 599 || !err->body) {
        fprintf(stderr, "fuzz_serve: %s: a refusal with status %d and no body\n", d->name, err->status);
        abort();
    }
    must_be_json(d->error_body ? d->error_body(err->status, err->body) : err->body, "a dialect's error body");
}

/* body through a dialect: parsed, its "reply" the body's own bytes (cut at
 * max tokens when ctl says), streamed in pieces of up to 7, then whole. */
static void fuzz_dialect(const serve_format *d, const serve_api *api, const char *body, size_t len, uint8_t ctl) {
    serve_error err = {0, NULL};
    if (d->answer) {
        char *out = d->answer(api, body, len, &err);
        if (out) must_be_json(out, "a dialect's answer");
        else must_be_refusal(d, &err);
        return;
    }
    serve_call call;
    serve_request *r = NULL;
    if (d->parse(api, body, len, 0, &call, &r, &err) != 0) {
        must_be_refusal(d, &err);
        return;
    }
    serve_choice *ch = &r->choices[0];
    uint64_t seen = 0;
    bool finished = false;
    void *state = NULL;
    ch->state = r->state = SERVE_RUNNING;
    for (size_t off = 0; off < len;) {
        size_t k = len - off < 7 ? len - off : 7, from = ch->len;
        if (serve_text_append(ch, body + off, k) != 0) break;
        off += k;
        bool stop = serve_text_check_stop(ch, from);
        ch->n_gen++;
        r->progress++;
        must_be_named_sse(d->stream_next(api, &call, r, &seen, &finished, &state));
        if (stop) break;
    }
    ch->state = r->state = SERVE_DONE;
    ch->finish_reason = ctl & 0x80 ? "length" : "stop";
    ch->n_ready = ch->len;
    r->n_done = r->n_choices;
    r->progress++;
    for (int i = 0; i < 4 && !finished; i++) must_be_named_sse(d->stream_next(api, &call, r, &seen, &finished, &state));
    if (state) d->free_state(state);
    if (!finished) {
        fprintf(stderr, "fuzz_serve: %s: a done request's stream does not finish\n", d->name);
        abort();
    }
    must_be_json(d->response(api, &call, &r, 1), "a dialect's response");
    serve_request_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t ctl = data[0];
    const char *body = (const char *)data + 1;
    size_t len = size - 1;

    const char *nl = memchr(body, '\n', len);
    size_t line = nl ? (size_t)(nl - body) : len;
    if (line > 0 && body[line - 1] == '\r') line--;
    (void)serve_gate_check_request_line(body, line);

    serve_api api = harness_api(templates[(ctl >> 1) % 7]);
    serve_kind kind = ctl & 1 ? SERVE_CHAT : SERVE_COMPLETION;
    serve_call call;
    serve_request *r = NULL;
    serve_error err = {0, NULL};
    /* The parser gets a NUL-terminated copy, as http.c gives it. */
    char *copy = malloc(len + 1);
    if (!copy) return 0;
    memcpy(copy, body, len);
    copy[len] = '\0';
    if (kind == SERVE_CHAT) {
        fuzz_dialect(&serve_anthropic_messages, &api, copy, len, ctl);
        fuzz_dialect(&serve_anthropic_count_tokens, &api, copy, len, ctl);
        fuzz_dialect(&serve_responses, &api, copy, len, ctl);
        fuzz_dialect(&serve_responses_input_tokens, &api, copy, len, ctl);
    }
    if (serve_api_parse(&api, kind, copy, len, &call, &r, &err) != 0) {
        if (err.status < 400 || err.status > 599 || !err.body) {
            fprintf(stderr, "fuzz_serve: a refusal with status %d and no body\n", err.status);
            abort();
        }
        must_be_json(err.body, "an error body");
        free(copy);
        return 0;
    }
    /* Each choice "generates" the request's own bytes, in pieces of up to 7;
     * the stream's events are rendered as they become ready. */
    uint64_t seen = 0;
    bool finished = false;
    for (int32_t ci = 0; ci < r->n_choices; ci++) {
        serve_choice *ch = &r->choices[ci];
        ch->state = SERVE_RUNNING;
        r->state = SERVE_RUNNING;
        for (size_t off = 0; off < len;) {
            size_t k = len - off < 7 ? len - off : 7, from = ch->len, before = ch->n_ready;
            if (serve_text_append(ch, body + off, k) != 0) break;
            off += k;
            bool stop = serve_text_check_stop(ch, from);
            if (ch->n_ready < before || ch->n_ready > ch->len) {
                fprintf(stderr, "fuzz_serve: ready length went from %zu to %zu of %zu\n", before, ch->n_ready,
                        ch->len);
                abort();
            }
            ch->n_gen++;
            r->progress++;
            must_be_sse(serve_api_stream_next(&api, &call, r, &seen, &finished));
            if (stop) break;
        }
        ch->state = SERVE_DONE;
        ch->finish_reason = ctl & 0x80 ? "length" : "stop";
        ch->n_ready = ch->len;
        r->n_done++;
        r->progress++;
    }
    r->state = SERVE_DONE;
    r->cut = ctl & 0x40;
    for (int i = 0; i < 4 && !finished; i++) must_be_sse(serve_api_stream_next(&api, &call, r, &seen, &finished));
    if (!finished) {
        fprintf(stderr, "fuzz_serve: a done request's stream does not finish\n");
        abort();
    }
    must_be_json(serve_api_response(&api, &call, r), "a response");
    serve_request_free(r);
    free(copy);
    return 0;
}
