/*
 * engine — slots and continuous batching.
 *
 * One thread owns the context. Each step it frees the slots of finished or
 * abandoned requests, moves queued requests into free slots, and builds ONE
 * batch: the last sampled token of every generating slot plus as many prompt
 * tokens of starting slots as fit in n_batch. tessera_decode_batch runs them
 * together (slot i is sequence i of the shared KV cache); then every slot
 * whose logits came back samples its next token.
 *
 * Each slot may hold slot_ctx = n_ctx / n_slots positions, so all slots
 * together always fit the cache.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

typedef struct serve_slot {
    serve_request *req; /* NULL: free */
    int32_t n_past;     /* positions in the cache */
    int32_t n_fed;      /* prompt tokens decoded (or reused) */
    tessera_token next; /* sampled, not yet decoded */
    bool has_next;
    double t_start_ms;
    /* The tokens at positions 0..n_past-1 of the slot's sequence (slot_ctx
     * of room). A cache_prompt request leaves them in the cache when it
     * ends, for the next cache_prompt request with the same prefix. */
    tessera_token *cached;
} serve_slot;

struct serve_engine {
    serve_engine_params p;
    int32_t n_vocab, n_batch;
    pthread_t thread;
    bool started, stopping;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* new work, a cancel, or stop */
    serve_slot *slots;
    serve_request **queue; /* FIFO ring of q_cap = n_slots + max_queue */
    int32_t q_head, q_len, q_cap;
    serve_metrics m;
    double t_start_ms;
    /* batch scratch (engine thread only) */
    tessera_token *b_tok;
    int32_t *b_pos, *b_seq, *b_slot_of_row;
    bool *b_want;
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

serve_engine *serve_engine_new(const serve_engine_params *p) {
    if (p->n_slots < 1 || p->n_slots > TESSERA_MAX_SEQ || p->max_queue < 0 || p->slot_ctx < 2) return NULL;
    serve_engine *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->p = *p;
    e->n_vocab = tessera_model_n_vocab(p->model);
    e->n_batch = (int32_t)tessera_context_n_batch(p->ctx);
    if (e->n_batch < p->n_slots) e->n_batch = p->n_slots;
    e->slots = calloc((size_t)p->n_slots, sizeof *e->slots);
    for (int32_t i = 0; e->slots && i < p->n_slots; i++) {
        e->slots[i].cached = malloc((size_t)p->slot_ctx * sizeof *e->slots[i].cached);
        if (!e->slots[i].cached) {
            for (int32_t k = 0; k < i; k++) free(e->slots[k].cached);
            free(e->slots);
            e->slots = NULL;
        }
    }
    e->q_cap = p->n_slots + p->max_queue;
    e->queue = calloc((size_t)e->q_cap, sizeof *e->queue);
    size_t nb = (size_t)e->n_batch;
    e->b_tok = malloc(nb * sizeof *e->b_tok);
    e->b_pos = malloc(nb * sizeof *e->b_pos);
    e->b_seq = malloc(nb * sizeof *e->b_seq);
    e->b_slot_of_row = malloc(nb * sizeof *e->b_slot_of_row);
    e->b_want = malloc(nb * sizeof *e->b_want);
    if (!e->slots || !e->queue || !e->b_tok || !e->b_pos || !e->b_seq || !e->b_slot_of_row || !e->b_want ||
        pthread_mutex_init(&e->mu, NULL) != 0) {
        free(e->slots);
        free(e->queue);
        free(e->b_tok);
        free(e->b_pos);
        free(e->b_seq);
        free(e->b_slot_of_row);
        free(e->b_want);
        free(e);
        return NULL;
    }
    pthread_cond_init(&e->wake, NULL);
    e->t_start_ms = now_ms();
    return e;
}

void serve_engine_lock(serve_engine *e) { pthread_mutex_lock(&e->mu); }
void serve_engine_unlock(serve_engine *e) { pthread_mutex_unlock(&e->mu); }
int32_t serve_engine_slot_ctx(const serve_engine *e) { return e->p.slot_ctx; }
int32_t serve_engine_n_slots(const serve_engine *e) { return e->p.n_slots; }

/* Drop one holder of r (lock held); the last frees it. */
static void request_unref(serve_request *r) {
    if (--r->refs == 0) serve_request_free(r);
}

/* Mark r done (lock held) and wake its HTTP thread. */
static void request_finish(serve_engine *e, serve_request *r, const char *reason) {
    if (r->state == SERVE_DONE) return;
    r->state = SERVE_DONE;
    r->finish_reason = reason;
    r->n_ready = r->len;
    r->t_done_ms = now_ms();
    if (!r->error[0] && !r->cancelled) e->m.completions++;
    pthread_cond_broadcast(&r->cond);
}

/* Give slot i back (lock held): forget its sequence, drop the request. */
static void slot_free(serve_engine *e, int32_t i) {
    serve_slot *s = &e->slots[i];
    if (!s->req) return;
    /* n_past: what the cache holds; a failed or cancelled request's last
     * step may not have run, so only a clean finish keeps its tokens. */
    bool keep = s->req->cache_prompt && !s->req->error[0] && !s->req->cancelled;
    if (!keep) {
        tessera_seq_remove(e->p.ctx, i, 0);
        s->n_past = 0;
    }
    e->m.busy_slot_ms += now_ms() - s->t_start_ms;
    request_unref(s->req);
    *s = (serve_slot){.cached = s->cached, .n_past = s->n_past};
    e->m.slots_busy--;
    e->m.kv_cells_used = tessera_kv_cells_used(e->p.ctx);
}

/* Common leading tokens of a and b. */
static int32_t common_prefix(const tessera_token *a, int32_t na, const tessera_token *b, int32_t nb) {
    int32_t n = 0;
    while (n < na && n < nb && a[n] == b[n]) n++;
    return n;
}

/* A free slot for r: for a cache_prompt request the one whose cached tokens
 * share the longest prefix with its prompt (*reuse: how many, leaving at
 * least the last prompt token to decode for its logits); otherwise an empty
 * slot first, so that other slots keep their caches. -1 if none is free. */
static int32_t pick_slot(serve_engine *e, const serve_request *r, int32_t *reuse) {
    int32_t best = -1, best_len = -1;
    for (int32_t i = 0; i < e->p.n_slots; i++) {
        const serve_slot *s = &e->slots[i];
        if (s->req) continue;
        int32_t len = r->cache_prompt ? common_prefix(s->cached, s->n_past, r->prompt, r->n_prompt)
                                      : -s->n_past; /* prefer the emptiest */
        if (len > best_len) {
            best = i;
            best_len = len;
        }
    }
    *reuse = 0;
    if (best >= 0 && r->cache_prompt) *reuse = best_len < r->n_prompt ? best_len : r->n_prompt - 1;
    return best;
}

/* Free finished and abandoned slots; fill free slots from the queue. */
static void schedule(serve_engine *e) {
    for (int32_t i = 0; i < e->p.n_slots; i++) {
        serve_slot *s = &e->slots[i];
        if (!s->req) continue;
        if (s->req->cancelled && s->req->state != SERVE_DONE) {
            e->m.cancelled++;
            request_finish(e, s->req, "stop");
        }
        if (s->req->state == SERVE_DONE) slot_free(e, i);
    }
    /* Requests whose client left while queued go at once (they would hold a
     * queue place until a slot frees). */
    int32_t kept = 0;
    for (int32_t k = 0; k < e->q_len; k++) {
        serve_request *r = e->queue[(e->q_head + k) % e->q_cap];
        if (r->cancelled) {
            e->m.cancelled++;
            request_finish(e, r, "stop");
            request_unref(r);
            continue;
        }
        e->queue[(e->q_head + kept++) % e->q_cap] = r;
    }
    e->q_len = kept;
    while (e->q_len > 0) {
        serve_request *r = e->queue[e->q_head];
        int32_t reuse = 0, i = pick_slot(e, r, &reuse);
        if (i < 0) break;
        e->q_head = (e->q_head + 1) % e->q_cap;
        e->q_len--;
        serve_slot *s = &e->slots[i];
        tessera_seq_remove(e->p.ctx, i, reuse); /* forget what differs */
        *s = (serve_slot){.req = r, .t_start_ms = now_ms(), .cached = s->cached, .n_past = reuse,
                          .n_fed = reuse};
        r->state = SERVE_RUNNING;
        r->n_cached = reuse;
        e->m.slots_busy++;
    }
    e->m.queued = e->q_len;
}

/* Fill the batch (lock held). Generating slots first, one token each, then
 * prompt tokens while room is left; the slots count them as decoded (a
 * failed decode fails their requests). Returns the token count. */
static int32_t build_batch(serve_engine *e) {
    int32_t n = 0;
    for (int32_t i = 0; i < e->p.n_slots; i++) {
        serve_slot *s = &e->slots[i];
        if (!s->req || !s->has_next) continue;
        e->b_tok[n] = s->next;
        e->b_pos[n] = s->n_past;
        e->b_seq[n] = i;
        e->b_want[n] = true;
        e->b_slot_of_row[n] = i;
        s->has_next = false;
        s->cached[s->n_past++] = s->next;
        n++;
    }
    for (int32_t i = 0; i < e->p.n_slots && n < e->n_batch; i++) {
        serve_slot *s = &e->slots[i];
        serve_request *r = s->req;
        if (!r || s->has_next || s->n_fed >= r->n_prompt) continue;
        while (s->n_fed < r->n_prompt && n < e->n_batch) {
            e->b_tok[n] = r->prompt[s->n_fed];
            e->b_pos[n] = s->n_fed;
            e->b_seq[n] = i;
            e->b_want[n] = s->n_fed + 1 == r->n_prompt;
            e->b_slot_of_row[n] = i;
            s->cached[s->n_fed] = r->prompt[s->n_fed];
            s->n_fed++;
            s->n_past = s->n_fed;
            e->m.prompt_tokens++;
            n++;
        }
    }
    return n;
}

/* A sampled token for slot i (lock held). */
static void slot_take_token(serve_engine *e, int32_t i, tessera_token t) {
    serve_slot *s = &e->slots[i];
    serve_request *r = s->req;
    if (t < 0) { /* the grammar allows no token (or the sampler failed) */
        snprintf(r->error, sizeof r->error, "sampling failed: %s", tessera_last_error());
        request_finish(e, r, "stop");
        return;
    }
    tessera_sampler_accept(r->sampler, t);
    r->n_gen++;
    e->m.gen_tokens++;
    if (r->n_gen == 1) r->t_first_ms = now_ms();
    if (tessera_token_is_eog(e->p.model, t)) {
        request_finish(e, r, "stop");
        return;
    }
    char small[256], *piece = small;
    int32_t len = tessera_token_to_piece(e->p.model, t, small, sizeof small, false);
    if (len < 0 && len != INT32_MIN && (piece = malloc((size_t)-len)) != NULL) /* a long token */
        len = tessera_token_to_piece(e->p.model, t, piece, -len, false);
    size_t from = r->len;
    int app = piece && len > 0 ? serve_text_append(r, piece, (size_t)len) : 0;
    if (piece != small) free(piece);
    if (!piece || app != 0) {
        snprintf(r->error, sizeof r->error, "out of memory for the generated text");
        request_finish(e, r, "stop");
        return;
    }
    if (serve_text_check_stop(r, from)) {
        request_finish(e, r, "stop");
        return;
    }
    if ((r->max_tokens >= 0 && r->n_gen >= r->max_tokens) || s->n_past >= e->p.slot_ctx) {
        request_finish(e, r, "length");
        return;
    }
    s->next = t;
    s->has_next = true;
    pthread_cond_broadcast(&r->cond);
}

static void *engine_main(void *arg) {
    serve_engine *e = arg;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        schedule(e);
        if (e->stopping) break;
        int32_t n = build_batch(e);
        if (n == 0) {
            pthread_cond_wait(&e->wake, &e->mu);
            continue;
        }
        pthread_mutex_unlock(&e->mu);
        /* Requests cannot go away meanwhile: the engine holds a reference. */
        double t0 = now_ms();
        int rc = tessera_decode_batch(e->p.ctx, e->b_tok, e->b_pos, e->b_seq, e->b_want, n);
        double dt = now_ms() - t0;
        pthread_mutex_lock(&e->mu);
        e->m.steps++;
        e->m.batch_tokens += (uint64_t)n;
        e->m.decode_ms += dt;
        e->m.kv_cells_used = tessera_kv_cells_used(e->p.ctx);
        int32_t row = 0;
        for (int32_t k = 0; k < n; k++) {
            if (!e->b_want[k]) continue;
            int32_t i = e->b_slot_of_row[k];
            serve_request *r = e->slots[i].req;
            if (rc != 0) {
                snprintf(r->error, sizeof r->error, "%s", tessera_last_error());
                request_finish(e, r, "stop");
                continue;
            }
            const float *logits = tessera_logits(e->p.ctx, row++);
            if (r->state == SERVE_DONE || r->cancelled) continue;
            slot_take_token(e, i, tessera_sampler_sample(r->sampler, logits));
        }
        if (rc != 0) /* prompt chunks without logits fail with the rest of their request */
            for (int32_t k = 0; k < n; k++) {
                serve_request *r = e->slots[e->b_slot_of_row[k]].req;
                if (r->state == SERVE_DONE) continue;
                snprintf(r->error, sizeof r->error, "%s", tessera_last_error());
                request_finish(e, r, "stop");
            }
    }
    /* Stopping: fail what is still running or queued. */
    for (int32_t i = 0; i < e->p.n_slots; i++)
        if (e->slots[i].req) {
            serve_request *r = e->slots[i].req;
            if (r->state != SERVE_DONE) snprintf(r->error, sizeof r->error, "the server is shutting down");
            request_finish(e, r, "stop");
            slot_free(e, i);
        }
    while (e->q_len > 0) {
        serve_request *r = e->queue[e->q_head];
        e->q_head = (e->q_head + 1) % e->q_cap;
        e->q_len--;
        snprintf(r->error, sizeof r->error, "the server is shutting down");
        request_finish(e, r, "stop");
        request_unref(r);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

int serve_engine_start(serve_engine *e) {
    if (pthread_create(&e->thread, NULL, engine_main, e) != 0) return -1;
    e->started = true;
    return 0;
}

void serve_engine_stop(serve_engine *e) {
    if (!e->started) return;
    pthread_mutex_lock(&e->mu);
    e->stopping = true;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->thread, NULL);
    e->started = false;
    /* Nothing will decode any more: end every request still generating or
     * queued, so that streams send their last event and [DONE] instead of
     * being cut off when the HTTP side closes. */
    pthread_mutex_lock(&e->mu);
    for (int32_t i = 0; i < e->p.n_slots; i++)
        if (e->slots[i].req) request_finish(e, e->slots[i].req, "stop");
    for (int32_t k = 0; k < e->q_len; k++) request_finish(e, e->queue[(e->q_head + k) % e->q_cap], "stop");
    pthread_mutex_unlock(&e->mu);
}

void serve_engine_free(serve_engine *e) {
    if (!e) return;
    serve_engine_stop(e);
    pthread_cond_destroy(&e->wake);
    pthread_mutex_destroy(&e->mu);
    for (int32_t i = 0; e->slots && i < e->p.n_slots; i++) free(e->slots[i].cached);
    free(e->slots);
    free(e->queue);
    free(e->b_tok);
    free(e->b_pos);
    free(e->b_seq);
    free(e->b_slot_of_row);
    free(e->b_want);
    free(e);
}

int serve_engine_submit(serve_engine *e, serve_request *r) {
    pthread_mutex_lock(&e->mu);
    int32_t free_slots = 0;
    for (int32_t i = 0; i < e->p.n_slots; i++) free_slots += e->slots[i].req == NULL;
    /* Queued requests take free slots first; beyond them max_queue may wait. */
    if (e->stopping || e->q_len >= free_slots + e->p.max_queue) {
        pthread_mutex_unlock(&e->mu);
        return -1;
    }
    r->refs = 2; /* the HTTP thread and the engine */
    r->state = SERVE_QUEUED;
    r->t_submit_ms = now_ms();
    e->queue[(e->q_head + e->q_len) % e->q_cap] = r;
    e->q_len++;
    e->m.queued = e->q_len;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->mu);
    return 0;
}

bool serve_engine_wait(serve_engine *e, serve_request *r, size_t sent, int timeout_ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    ts.tv_sec += timeout_ms / 1000 + ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&e->mu);
    while (r->state != SERVE_DONE && r->n_ready <= sent)
        if (pthread_cond_timedwait(&r->cond, &e->mu, &ts) != 0) break;
    bool ready = r->state == SERVE_DONE || r->n_ready > sent;
    pthread_mutex_unlock(&e->mu);
    return ready;
}

void serve_engine_release(serve_engine *e, serve_request *r) {
    pthread_mutex_lock(&e->mu);
    if (r->state != SERVE_DONE) {
        r->cancelled = true;
        pthread_cond_signal(&e->wake);
    }
    request_unref(r);
    pthread_mutex_unlock(&e->mu);
}

void serve_engine_count_status(serve_engine *e, int status) {
    int c = status / 100;
    pthread_mutex_lock(&e->mu);
    if (c >= 0 && c < 6) e->m.requests[c]++;
    pthread_mutex_unlock(&e->mu);
}

void serve_engine_metrics(serve_engine *e, serve_metrics *out, double *uptime_ms) {
    pthread_mutex_lock(&e->mu);
    *out = e->m;
    double t = now_ms();
    for (int32_t i = 0; i < e->p.n_slots; i++)
        if (e->slots[i].req) out->busy_slot_ms += t - e->slots[i].t_start_ms;
    *uptime_ms = t - e->t_start_ms;
    pthread_mutex_unlock(&e->mu);
}
