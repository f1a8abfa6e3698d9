/* metrics — the Prometheus text exposition of the server's counters. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

typedef struct text_buf {
    char *s;
    size_t len, cap;
    bool oom;
} text_buf;

static void put(text_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text_buf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap * 2 + (size_t)n;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = true;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

static void metric(text_buf *b, const char *name, const char *type, const char *help, double v) {
    put(b, "# HELP tessera_%s %s\n# TYPE tessera_%s %s\ntessera_%s %.6g\n", name, help, name, type, name, v);
}

static void llamacpp(text_buf *b, const char *name, const char *type, const char *help, double v) {
    put(b, "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %.17g\n", name, help, name, type, name, v);
}

/* llama-server's metric names, for the dashboards and alerts written
 * against it: the same counters as ours where both have them; the
 * speculative decoding counters stay 0 when the server has no -md or
 * --spec-type. */
static void llamacpp_metrics(text_buf *b, const serve_metrics *m) {
    double prompt_s = m->prompt_ms / 1e3, gen_s = m->gen_ms / 1e3;
    llamacpp(b, "prompt_tokens_total", "counter", "Number of prompt tokens processed.", (double)m->prompt_tokens);
    llamacpp(b, "prompt_tokens_cached_total", "counter", "Prompt tokens reused from a slot's cache.",
             (double)m->prompt_tokens_cached);
    llamacpp(b, "prompt_seconds_total", "counter", "Prompt process time.", prompt_s);
    llamacpp(b, "tokens_predicted_total", "counter", "Number of generation tokens processed.",
             (double)m->gen_tokens);
    llamacpp(b, "tokens_predicted_seconds_total", "counter", "Predict process time.", gen_s);
    llamacpp(b, "n_decode_total", "counter", "Total number of llama_decode() calls.", (double)m->steps);
    llamacpp(b, "n_tokens_max", "counter", "Largest observed n_tokens.", m->n_tokens_max);
    llamacpp(b, "spec_decode_num_draft_tokens_total", "counter", "Draft tokens made (speculative decoding).",
             (double)m->spec_drafted);
    llamacpp(b, "spec_decode_num_accepted_tokens_total", "counter", "Draft tokens the target accepted.",
             (double)m->spec_accepted);
    llamacpp(b, "spec_decode_num_drafts_total", "counter", "Drafts verified.", (double)m->spec_drafts);
    llamacpp(b, "prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.",
             prompt_s > 0 ? (double)m->prompt_tokens / prompt_s : 0.0);
    llamacpp(b, "predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.",
             gen_s > 0 ? (double)m->gen_tokens / gen_s : 0.0);
    llamacpp(b, "requests_processing", "gauge", "Number of requests processing.", m->slots_busy);
    llamacpp(b, "requests_deferred", "gauge", "Number of requests deferred.", m->queued);
    llamacpp(b, "n_busy_slots_per_decode", "gauge", "Average number of busy slots per llama_decode() call.",
             m->steps ? (double)m->busy_slot_steps / (double)m->steps : 0.0);
}

/* The model server protocol of Kubernetes' inference gateway
 * (gateway-api-inference-extension: its endpoint picker scrapes these to
 * choose a replica), under vLLM's names, which it reads by default:
 * requests waiting for a slot, requests running, and KV-cache usage as a
 * 0..1 gauge (vLLM renamed gpu_cache_usage_perc to kv_cache_usage_perc;
 * both are written). Usage is what running requests keep from others: with
 * --kv-unified the cells they hold, else their slots' shares of the cache
 * (a busy slot's share is closed to other requests however much of it is
 * filled). Idle slots' cached prompts do not count: they give way. No LoRA
 * adapters, so no vllm:lora_requests_info. */
static void gateway_metrics(text_buf *b, const serve_metrics *m, const char *model_name) {
    char label[160];
    size_t k = 0;
    for (const char *c = model_name ? model_name : ""; *c && k + 2 < sizeof label; c++) {
        if (*c == '"' || *c == '\\') label[k++] = '\\';
        label[k++] = *c == '\n' ? ' ' : *c;
    }
    label[k] = '\0';
    const struct {
        const char *name, *help;
        double v;
    } g[] = {
        {"num_requests_waiting", "Requests waiting for a slot.", m->queued},
        {"num_requests_running", "Requests being generated.", m->requests_running},
        {"kv_cache_usage_perc", "KV-cache usage, 0..1 (1: full).", m->kv_usage},
        {"gpu_cache_usage_perc", "KV-cache usage, 0..1 (vLLM's older name).", m->kv_usage},
    };
    for (size_t i = 0; i < sizeof g / sizeof *g; i++)
        put(b, "# HELP vllm:%s %s\n# TYPE vllm:%s gauge\nvllm:%s{model_name=\"%s\"} %.6g\n", g[i].name, g[i].help,
            g[i].name, g[i].name, label, g[i].v);
}

char *serve_metrics_render(const serve_metrics *m, double uptime_ms, int32_t n_slots, const char *model_name,
                           size_t *len) {
    text_buf b = {.cap = 4096};
    b.s = malloc(b.cap);
    if (!b.s) return NULL;
    b.s[0] = '\0';
    put(&b, "# HELP tessera_requests_total HTTP requests answered, by status class.\n"
            "# TYPE tessera_requests_total counter\n");
    static const char *const cls[] = {"0xx", "1xx", "2xx", "3xx", "4xx", "5xx"};
    for (int c = 2; c < 6; c++)
        put(&b, "tessera_requests_total{status=\"%s\"} %llu\n", cls[c], (unsigned long long)m->requests[c]);
    metric(&b, "completions_total", "counter", "Generations finished.", (double)m->completions);
    metric(&b, "requests_cancelled_total", "counter", "Generations dropped because the client went away.",
           (double)m->cancelled);
    metric(&b, "prompt_tokens_total", "counter", "Prompt tokens decoded.", (double)m->prompt_tokens);
    metric(&b, "tokens_generated_total", "counter", "Tokens generated.", (double)m->gen_tokens);
    metric(&b, "decode_steps_total", "counter", "Batched decode calls.", (double)m->steps);
    metric(&b, "batch_tokens_total", "counter", "Tokens over all decode calls.", (double)m->batch_tokens);
    metric(&b, "decode_seconds_total", "counter", "Time spent decoding.", m->decode_ms / 1e3);
    double up_s = uptime_ms / 1e3;
    metric(&b, "tokens_per_second", "gauge", "Generated tokens per second of decode time.",
           m->decode_ms > 0 ? (double)m->gen_tokens * 1e3 / m->decode_ms : 0.0);
    metric(&b, "uptime_seconds", "gauge", "Seconds since the server started.", up_s);
    metric(&b, "slots_total", "gauge", "Parallel slots (--parallel).", n_slots);
    metric(&b, "slots_busy", "gauge", "Slots serving a request now.", m->slots_busy);
    metric(&b, "slot_utilization", "gauge", "Average share of slots busy since start.",
           up_s > 0 && n_slots > 0 ? m->busy_slot_ms / (uptime_ms * n_slots) : 0.0);
    metric(&b, "requests_queued", "gauge", "Requests waiting for a slot.", m->queued);
    metric(&b, "kv_cells_used", "gauge", "KV cache cells in use.", m->kv_cells_used);
    metric(&b, "requests_running", "gauge", "Requests being generated.", m->requests_running);
    metric(&b, "kv_cache_usage_ratio", "gauge", "KV cache held by running requests, 0..1.", m->kv_usage);
    metric(&b, "connections_open", "gauge", "Connections being served.", (double)m->conn_open);
    metric(&b, "connections_refused_total", "counter",
           "Connections answered 429 or 503 over a connection limit.", (double)m->conn_refused);
    metric(&b, "request_timeouts_total", "counter", "408s: request line, headers or body too late.",
           (double)m->conn_timeouts);
    metric(&b, "bad_request_lines_total", "counter", "Malformed request lines refused.",
           (double)m->bad_request_lines);
    llamacpp_metrics(&b, m);
    gateway_metrics(&b, m, model_name);
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    *len = b.len;
    return b.s;
}
