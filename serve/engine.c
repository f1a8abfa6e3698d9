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
 * together always fit the cache. With --kv-unified (p.unified) slot_ctx is
 * n_ctx: the slots share the cells, idle slots' cached prompts give way
 * when a step needs their cells, and a step that still finds none fails
 * its requests (500), as llama-server's unified cache.
 *
 * A request with `n` choices queues n entries; each takes a slot of its own
 * and generates its own sequence from the same prompt. The request is done
 * when all of them are.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"

typedef struct serve_slot {
    serve_choice *ch;   /* NULL: free */
    int32_t n_past;     /* positions in the cache */
    int32_t n_fed;      /* prompt tokens decoded (or reused) */
    tessera_token next; /* sampled, not yet decoded */
    bool has_next;
    bool fed_prompt;    /* the batch being decoded holds prompt tokens of it */
    double t_start_ms;
    /* The tokens at positions 0..n_past-1 of the slot's sequence (slot_ctx
     * of room). A cache_prompt request leaves them in the cache when it
     * ends, for the next cache_prompt request with the same prefix. */
    tessera_token *cached;
    /* The LoRA scales (by adapter id) the request in it runs with, and so
     * its cached tokens were computed with (kept with them). */
    float lora[SERVE_MAX_LORA];
} serve_slot;

/* What a slot's row of logits gave in a step, worked out by the engine
 * thread without the lock (the grammar mask, sampling, the full-vocabulary
 * log-softmax and the token's bytes are the step's costly part; the lock
 * is then held only to add the result to the request). */
typedef struct slot_token {
    tessera_token t;     /* < 0: sampling failed, err says why */
    bool accepted;       /* the sampler has it already (a speculative step's) */
    char err[200];
    bool eog;            /* an end-of-generation token: no bytes, no logprobs */
    bool has_lp;
    serve_logprob lp;
    char small[256];
    char *piece;         /* small, or malloc'd for a long token; NULL: out of memory */
    int32_t len;         /* bytes of piece (<= 0: none) */
} slot_token;

struct serve_engine {
    serve_engine_params p;
    int32_t n_vocab, n_batch;
    pthread_t thread;
    bool started, stopping, draining;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* new work, a cancel, or stop */
    serve_slot *slots;
    serve_choice **queue; /* FIFO ring of q_cap = n_slots + max_queue */
    int32_t q_head, q_len, q_cap;
    serve_metrics m;
    double t_start_ms;
    long long start_unix; /* wall-clock seconds at creation (/metrics' Process-Start-Time-Unix) */
    serve_slot_action *action;  /* posted by an HTTP thread, run by the engine */
    pthread_cond_t action_done;
    struct engine_job *jobs, **jobs_tail; /* serve_engine_run's, oldest first */
    /* batch scratch (engine thread only) */
    tessera_token *b_tok;
    int32_t *b_pos, *b_seq, *b_slot_of_row;
    bool *b_want;
    slot_token *b_out; /* per slot: the token its row gave this step */
    float lora[SERVE_MAX_LORA]; /* requests' scales without a `lora` field (under mu) */
    float b_lora[SERVE_MAX_LORA]; /* the scales of the batch being built */
    int32_t lora_first; /* the slot a step's set of scales is taken from first (turns) */
};

serve_engine *serve_engine_new(const serve_engine_params *p) {
    if (p->n_slots < 1 || p->n_slots > TESSERA_MAX_SEQ || p->max_queue < 0 || p->slot_ctx < 2 || p->n_loras < 0 ||
        p->n_loras > SERVE_MAX_LORA)
        return NULL;
    serve_engine *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->p = *p;
    memcpy(e->lora, p->lora_scales, sizeof e->lora);
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
    e->b_out = calloc((size_t)p->n_slots, sizeof *e->b_out);
    if (!e->slots || !e->queue || !e->b_tok || !e->b_pos || !e->b_seq || !e->b_slot_of_row || !e->b_want ||
        !e->b_out || pthread_mutex_init(&e->mu, NULL) != 0) {
        free(e->slots);
        free(e->queue);
        free(e->b_tok);
        free(e->b_pos);
        free(e->b_seq);
        free(e->b_slot_of_row);
        free(e->b_want);
        free(e->b_out);
        free(e);
        return NULL;
    }
    pthread_cond_init(&e->wake, NULL);
    e->jobs_tail = &e->jobs;
    pthread_cond_init(&e->action_done, NULL);
    e->t_start_ms = serve_now_ms();
    e->start_unix = (long long)time(NULL);
    return e;
}

void serve_request_lock(serve_request *r) { pthread_mutex_lock(&r->mu); }
void serve_request_unlock(serve_request *r) { pthread_mutex_unlock(&r->mu); }

/* Whether r's client went away (a reader sets it, without a lock). */
static bool request_cancelled(const serve_request *r) { return __atomic_load_n(&r->cancelled, __ATOMIC_ACQUIRE); }
int32_t serve_engine_slot_ctx(const serve_engine *e) { return e->p.slot_ctx; }
int32_t serve_engine_n_slots(const serve_engine *e) { return e->p.n_slots; }
long long serve_engine_start_unix(const serve_engine *e) { return e->start_unix; }

/* Drop one holder of r (not under r's lock); the last frees it. */
static void request_unref(serve_request *r) {
    if (__atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) == 0) serve_request_free(r);
}

/* Mark a choice done (lock held); the last one done ends its request and
 * wakes its HTTP thread. */
static void choice_finish(serve_engine *e, serve_choice *ch, const char *reason) {
    serve_request *r = ch->req;
    if (ch->state == SERVE_DONE) return;
    ch->state = SERVE_DONE;
    ch->finish_reason = reason;
    ch->n_ready = ch->len;
    r->progress++;
    if (++r->n_done == r->n_choices) {
        r->state = SERVE_DONE;
        r->t_done_ms = serve_now_ms();
        if (!r->error[0] && !request_cancelled(r)) e->m.completions++;
        if (r->t_first_ms > 0) { /* llama-server's prompt and generation seconds */
            e->m.prompt_ms += r->t_first_ms - r->t_start_ms;
            e->m.gen_ms += r->t_done_ms - r->t_first_ms;
        }
    }
    pthread_cond_broadcast(&r->cond);
}

/* End every choice of r (lock held), with an error when msg is not NULL. */
static void request_finish(serve_engine *e, serve_request *r, const char *msg) {
    if (msg && !r->error[0]) snprintf(r->error, sizeof r->error, "%s", msg);
    for (int32_t c = 0; c < r->n_choices; c++) choice_finish(e, &r->choices[c], "stop");
}

/* End every choice of r (lock held) with the text it has, as a shutdown
 * does: finish_reason "length", and a stream gets its usage. */
static void request_cut(serve_engine *e, serve_request *r) {
    r->cut = true;
    for (int32_t c = 0; c < r->n_choices; c++) choice_finish(e, &r->choices[c], "length");
}

/* Give slot i back (lock held): forget its sequence, drop the request. */
static void slot_free(serve_engine *e, int32_t i) {
    serve_slot *s = &e->slots[i];
    if (!s->ch) return;
    serve_request *r = s->ch->req;
    /* n_past: what the cache holds; a failed or cancelled request's last
     * step may not have run, so only a clean finish keeps its tokens. */
    bool keep = r->cache_prompt && !r->error[0] && !request_cancelled(r);
    if (!keep) {
        tessera_seq_remove(e->p.ctx, i, 0);
        s->n_past = 0;
    }
    e->m.busy_slot_ms += serve_now_ms() - s->t_start_ms;
    request_unref(r);
    serve_slot kept = *s;
    *s = (serve_slot){.cached = s->cached, .n_past = s->n_past};
    memcpy(s->lora, kept.lora, sizeof s->lora);
    e->m.slots_busy--;
    e->m.kv_cells_used = tessera_kv_cells_used(e->p.ctx);
}

/* Common leading tokens of a and b. */
static int32_t common_prefix(const tessera_token *a, int32_t na, const tessera_token *b, int32_t nb) {
    int32_t n = 0;
    while (n < na && n < nb && a[n] == b[n]) n++;
    return n;
}

/* reuse moved back to the start of a medium it would cut: a medium's rows
 * are decoded together (they attend to each other), never in part. */
static int32_t media_align(const serve_request *r, int32_t reuse) {
    for (int32_t k = 0; k < r->n_spans; k++) {
        const serve_media_span *sp = &r->spans[k];
        if (reuse > sp->start && reuse < sp->start + sp->n) return sp->start;
    }
    return reuse;
}

/* A free slot for r: for a cache_prompt request the one whose cached tokens
 * share the longest prefix with its prompt (*reuse: how many, leaving at
 * least the last prompt token to decode for its logits); otherwise an empty
 * slot first, so that other slots keep their caches. -1 if none is free. */
static int32_t pick_slot(serve_engine *e, const serve_request *r, const float *lora, int32_t *reuse) {
    int32_t best = -1, best_len = INT32_MIN; /* a slot holding a cache is still a free slot */
    for (int32_t i = 0; i < e->p.n_slots; i++) {
        const serve_slot *s = &e->slots[i];
        if (s->ch || (r->id_slot >= 0 && r->id_slot != i)) continue;
        /* a prefix computed with other adapters or scales is not this request's */
        const bool same = !memcmp(s->lora, lora, sizeof s->lora);
        int32_t len = r->cache_prompt ? (same ? common_prefix(s->cached, s->n_past, r->prompt, r->n_prompt) : 0)
                                      : -s->n_past; /* prefer the emptiest */
        if (len > best_len) {
            best = i;
            best_len = len;
        }
    }
    *reuse = 0;
    if (best >= 0 && r->cache_prompt) *reuse = media_align(r, best_len < r->n_prompt ? best_len : r->n_prompt - 1);
    return best;
}

/* return_progress: record where r's prompt stands (lock held); a stream
 * sends one prompt_progress event per mark. Out of memory drops the mark. */
static void prompt_mark(serve_request *r, int32_t processed) {
    if (r->n_marks == r->cap_marks) {
        int32_t cap = r->cap_marks ? r->cap_marks * 2 : 8;
        serve_prompt_mark *m = realloc(r->marks, (size_t)cap * sizeof *m);
        if (!m) return;
        r->marks = m;
        r->cap_marks = cap;
    }
    /* the first mark is the slot's start: nothing read yet, no time */
    r->marks[r->n_marks] = (serve_prompt_mark){processed, r->n_marks ? serve_now_ms() - r->t_start_ms : 0.0};
    r->n_marks++;
    r->progress++;
    pthread_cond_broadcast(&r->cond);
}

/* Free finished and abandoned slots; fill free slots from the queue. */
static void schedule(serve_engine *e) {
    for (int32_t i = 0; i < e->p.n_slots; i++) {
        serve_slot *s = &e->slots[i];
        if (!s->ch) continue;
        serve_request *r = s->ch->req;
        pthread_mutex_lock(&r->mu);
        if (request_cancelled(r) && r->state != SERVE_DONE) {
            e->m.cancelled++;
            request_finish(e, r, NULL);
        }
        pthread_mutex_unlock(&r->mu);
        if (s->ch->state == SERVE_DONE) slot_free(e, i);
    }
    /* Choices whose client left while queued, or whose request failed, go at
     * once (they would hold a queue place until a slot frees). */
    int32_t kept = 0;
    for (int32_t k = 0; k < e->q_len; k++) {
        serve_choice *ch = e->queue[(e->q_head + k) % e->q_cap];
        serve_request *r = ch->req;
        if (request_cancelled(r) || ch->state == SERVE_DONE) {
            pthread_mutex_lock(&r->mu);
            if (request_cancelled(r) && r->state != SERVE_DONE) e->m.cancelled++;
            request_finish(e, r, NULL);
            pthread_mutex_unlock(&r->mu);
            request_unref(r);
            continue;
        }
        e->queue[(e->q_head + kept++) % e->q_cap] = ch;
    }
    e->q_len = kept;
    while (e->q_len > 0) {
        serve_choice *ch = e->queue[e->q_head];
        serve_request *r = ch->req;
        float lora[SERVE_MAX_LORA] = {0};
        memcpy(lora, r->has_lora ? r->lora : e->lora, sizeof lora);
        for (int32_t k = e->p.n_loras; k < SERVE_MAX_LORA; k++) lora[k] = 0.0f;
        int32_t reuse = 0, i = pick_slot(e, r, lora, &reuse);
        if (i < 0) break;
        e->q_head = (e->q_head + 1) % e->q_cap;
        e->q_len--;
        serve_slot *s = &e->slots[i];
        tessera_seq_remove(e->p.ctx, i, reuse); /* forget what differs */
        /* A sliding-window cache may have had to forget all of it. */
        if (tessera_seq_len(e->p.ctx, i) < reuse) reuse = tessera_seq_len(e->p.ctx, i);
        if (media_align(r, reuse) < reuse) {
            reuse = media_align(r, reuse);
            tessera_seq_remove(e->p.ctx, i, reuse);
        }
        *s = (serve_slot){.ch = ch, .t_start_ms = serve_now_ms(), .cached = s->cached, .n_past = reuse,
                          .n_fed = reuse};
        memcpy(s->lora, lora, sizeof s->lora);
        pthread_mutex_lock(&r->mu);
        ch->state = SERVE_RUNNING;
        ch->slot = i;
        r->state = SERVE_RUNNING;
        if (ch->index == 0) {
            r->n_cached = reuse;
            r->t_start_ms = s->t_start_ms;
            e->m.prompt_tokens_cached += (uint64_t)reuse;
            if (r->want_progress) prompt_mark(r, reuse);
        }
        pthread_mutex_unlock(&r->mu);
        e->m.slots_busy++;
    }
    e->m.queued = e->q_len;
}

/* Whether slot i's next token goes through a speculative step instead of
 * a row of the batch (slot_spec_step, with the slot's own LoRA scales). */
static bool slot_speculates(const serve_engine *e, int32_t i) {
    const serve_slot *s = &e->slots[i];
    return e->p.spec && s->ch && s->has_next && s->ch->req->top_logprobs < 0;
}

/* Whether slot i has work and runs with the batch's LoRA scales. A step
 * decodes the slots of one set of scales (the context applies one set);
 * the set is the first busy slot's from lora_first on, which moves every
 * step, so that requests with other scales take turns. */
static bool slot_in_batch(const serve_engine *e, const serve_slot *s) {
    return e->p.n_loras == 0 || !memcmp(s->lora, e->b_lora, sizeof s->lora);
}

static void batch_pick_lora(serve_engine *e) {
    if (e->p.n_loras == 0) return;
    for (int32_t k = 0; k < e->p.n_slots; k++) {
        const int32_t i = (e->lora_first + k) % e->p.n_slots;
        const serve_slot *s = &e->slots[i];
        if (!s->ch || !(s->has_next || s->n_fed < s->ch->req->n_prompt) || slot_speculates(e, i)) continue;
        memcpy(e->b_lora, s->lora, sizeof e->b_lora);
        break;
    }
    e->lora_first = (e->lora_first + 1) % e->p.n_slots;
}

/* Fill the batch (lock held). Generating slots first, one token each, then
 * prompt tokens while room is left; the slots count them as decoded (a
 * failed decode fails their requests). Returns the token count. */
static int32_t build_batch(serve_engine *e) {
    int32_t n = 0;
    batch_pick_lora(e);
    for (int32_t i = 0; i < e->p.n_slots; i++) {
        serve_slot *s = &e->slots[i];
        if (!s->ch || !s->has_next || slot_speculates(e, i) || !slot_in_batch(e, s)) continue;
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
        serve_request *r = s->ch ? s->ch->req : NULL;
        if (!r || s->has_next || s->n_fed >= r->n_prompt || !slot_in_batch(e, s)) continue;
        /* up to a medium: its rows go in a step of their own (slot_media_step) */
        while (s->n_fed < r->n_prompt && n < e->n_batch && r->prompt[s->n_fed] >= 0) {
            e->b_tok[n] = r->prompt[s->n_fed];
            e->b_pos[n] = s->n_fed;
            e->b_seq[n] = i;
            e->b_want[n] = s->n_fed + 1 == r->n_prompt;
            e->b_slot_of_row[n] = i;
            s->cached[s->n_fed] = r->prompt[s->n_fed];
            s->n_fed++;
            s->n_past = s->n_fed;
            s->fed_prompt = true;
            e->m.prompt_tokens++;
            n++;
        }
    }
    return n;
}

/* Room for one more logprob entry of ch; NULL when out of memory. */
static serve_logprob *logprob_slot(serve_choice *ch) {
    if (ch->n_lp == ch->cap_lp) {
        size_t cap = ch->cap_lp ? ch->cap_lp * 2 : 64;
        serve_logprob *lp = realloc(ch->lp, cap * sizeof *lp);
        if (!lp) return NULL;
        ch->lp = lp;
        ch->cap_lp = cap;
    }
    return &ch->lp[ch->n_lp];
}

/* --context-shift: slot i is full; its sequence and its cached tokens
 * (which mirror it) drop half of what follows the kept tokens. 0, or -1
 * with msg. */
static int slot_shift(serve_engine *e, int32_t i, char *msg, size_t msg_size) {
    serve_slot *s = &e->slots[i];
    const bool has_bos = s->n_past > 0 && s->cached[0] == tessera_token_bos(e->p.model);
    const int32_t keep = tessera_shift_keep(e->p.n_keep, s->ch->req->n_prompt, has_bos);
    if (tessera_context_shift(e->p.ctx, i, keep, s->cached, &s->n_past) == 0) return 0;
    snprintf(msg, msg_size, "%s", tessera_last_error());
    return -1;
}

/* Record a generated token in ch->toks (llama-server's "tokens"); -1 when out of memory. */
static int choice_keep_token(serve_choice *ch, tessera_token t) {
    if (ch->n_toks == ch->cap_toks) {
        int32_t cap = ch->cap_toks ? ch->cap_toks * 2 : 64;
        tessera_token *toks = realloc(ch->toks, (size_t)cap * sizeof *toks);
        if (!toks) return -1;
        ch->toks = toks;
        ch->cap_toks = cap;
    }
    ch->toks[ch->n_toks++] = t;
    return 0;
}

/* After a token of slot i (lock held): 1 when the slot is full, 0 if not.
 * A slot holds slot_ctx tokens, prompt and output together (llama-server's
 * count: the token just sampled would take the last position). With
 * --context-shift a full slot makes room first (unless the reply is at its
 * max_tokens anyway); -1 when that failed (the request is finished). Either
 * marks the choice truncated. */
static int slot_full(serve_engine *e, int32_t i) {
    serve_slot *s = &e->slots[i];
    serve_choice *ch = s->ch;
    serve_request *r = ch->req;
    bool full = s->n_past + 1 >= e->p.slot_ctx;
    /* a prompt with media is not shifted: its rows cannot be cut in part */
    if (full && e->p.context_shift && r->n_spans == 0 && !(r->max_tokens >= 0 && ch->n_gen >= r->max_tokens)) {
        char msg[sizeof r->error];
        if (slot_shift(e, i, msg, sizeof msg) != 0) {
            request_finish(e, r, msg);
            return -1;
        }
        ch->truncated = true;
        full = s->n_past + 1 >= e->p.slot_ctx;
    }
    if (full) ch->truncated = true;
    return full ? 1 : 0;
}

/* Slot i's token from its row of logits, without the lock: sample it
 * (with its grammar), its logprobs when asked, its bytes (engine thread:
 * the slot's sampler and the request's input are its own). */
static void slot_describe(serve_engine *e, int32_t i, const float *logits, slot_token *o);

static void slot_sample(serve_engine *e, int32_t i, const float *logits, slot_token *o) {
    o->t = tessera_sampler_sample(e->slots[i].ch->sampler, logits);
    o->accepted = false;
    slot_describe(e, i, logits, o);
}

/* o->t's end-of-generation flag, logprobs (from logits, which may be NULL
 * when the request wants none) and bytes. */
static void slot_describe(serve_engine *e, int32_t i, const float *logits, slot_token *o) {
    serve_choice *ch = e->slots[i].ch;
    const serve_request *r = ch->req;
    o->has_lp = false;
    o->piece = o->small;
    o->len = 0;
    if (o->t < 0) { /* the grammar allows no token (or the sampler failed) */
        snprintf(o->err, sizeof o->err, "sampling failed: %s", tessera_last_error());
        return;
    }
    o->eog = tessera_token_is_eog(e->p.model, o->t);
    if (o->eog) return;
    if (r->top_logprobs >= 0 && logits) {
        o->has_lp = true;
        if (r->post_sampling_probs)
            serve_logprobs_post_sampling(ch->sampler, o->t, r->top_logprobs, &o->lp);
        else
            serve_logprobs_compute(logits, e->n_vocab, o->t, r->top_logprobs, &o->lp);
    }
    o->len = tessera_token_to_piece(e->p.model, o->t, o->small, sizeof o->small, false);
    if (o->len < 0 && o->len != INT32_MIN) { /* a long token */
        int32_t need = -o->len;
        o->piece = malloc((size_t)need);
        if (o->piece) o->len = tessera_token_to_piece(e->p.model, o->t, o->piece, need, false);
    }
}

/* Slot i's sampled token o into its choice (lock held). */
static void slot_take_token(serve_engine *e, int32_t i, slot_token *o) {
    serve_slot *s = &e->slots[i];
    serve_choice *ch = s->ch;
    serve_request *r = ch->req;
    const tessera_token t = o->t;
    if (t < 0) {
        /* only a grammar can fail a sampler made from a valid request */
        if (!r->error[0] && r->grammar_param) r->error_status = serve_grammar_failure_status(o->err);
        request_finish(e, r, o->err);
        return;
    }
    if (!o->accepted) tessera_sampler_accept(ch->sampler, t);
    ch->n_gen++;
    e->m.gen_tokens++;
    if (r->t_first_ms == 0) r->t_first_ms = serve_now_ms();
    if (o->eog) {
        ch->stop_type = "eos";
        choice_finish(e, ch, "stop");
        return;
    }
    if (choice_keep_token(ch, t) != 0) {
        request_finish(e, r, "out of memory for the generated tokens");
        return;
    }
    serve_logprob *lp = NULL;
    if (o->has_lp) {
        lp = logprob_slot(ch);
        if (!lp) {
            request_finish(e, r, "out of memory for logprobs");
            return;
        }
        *lp = o->lp;
        lp->offset = ch->len;
    }
    const int32_t len = o->len;
    size_t from = ch->len;
    if (!o->piece || (len > 0 && serve_text_append(ch, o->piece, (size_t)len) != 0)) {
        request_finish(e, r, "out of memory for the generated text");
        return;
    }
    if (lp) {
        lp->len = len > 0 ? (uint32_t)len : 0;
        ch->n_lp++;
    }
    size_t ready = ch->n_ready;
    if (serve_text_check_stop(ch, from)) {
        ch->stop_type = "word";
        choice_finish(e, ch, "stop");
        return;
    }
    int full = slot_full(e, i);
    if (full < 0) return;
    if ((r->max_tokens >= 0 && ch->n_gen >= r->max_tokens) || full) {
        ch->stop_type = "limit";
        choice_finish(e, ch, "length");
        return;
    }
    s->next = t;
    s->has_next = true;
    if (ch->n_ready > ready || lp) {
        r->progress++;
        pthread_cond_broadcast(&r->cond);
    }
}

/* A slot's save / restore / erase (lock held, engine thread: the context is
 * not decoding). A slot that is generating is refused. */
static void slot_action_run(serve_engine *e, serve_slot_action *a) {
    serve_slot *s = &e->slots[a->slot];
    double t0 = serve_now_ms();
    if (s->ch) {
        a->status = 409;
        snprintf(a->error, sizeof a->error, "slot %d is busy with a request; retry when it is idle", a->slot);
        return;
    }
    a->status = 200;
    if (a->op == SERVE_SLOT_ERASE) {
        a->n_tokens = s->n_past;
        tessera_seq_remove(e->p.ctx, a->slot, 0);
        s->n_past = 0;
    } else if (a->op == SERVE_SLOT_SAVE) {
        /* A medium's rows are in the cache, keyed in s->cached by the
         * medium's content (serve_media_token): saved and restored as they
         * are, so the same image after a restore reuses them and another
         * does not, as llama-server's slot files do. */
        bool media = false;
        for (int32_t k = 0; k < s->n_past && !media; k++) media = s->cached[k] < 0;
        if (tessera_state_save_file(e->p.ctx, a->slot, a->path, s->cached, s->n_past, NULL) != 0) {
            a->status = media ? 400 : 500; /* a medium the state cannot hold (M-RoPE grid positions) */
            const char *why = tessera_last_error();
            const size_t pl = strlen(a->path); /* the client named the file, not the server's folder */
            if (!strncmp(why, a->path, pl) && !strncmp(why + pl, ": ", 2)) why += pl + 2;
            snprintf(a->error, sizeof a->error, "slot %d: %s", a->slot, why);
        }
        a->n_tokens = s->n_past;
    } else {
        int32_t n = 0;
        if (tessera_state_load_file(e->p.ctx, a->slot, a->path, s->cached, e->p.slot_ctx, &n, NULL) != 0) {
            a->status = 400;
            snprintf(a->error, sizeof a->error, "%s", tessera_last_error());
        } else {
            bool media = false;
            for (int32_t k = 0; k < n && !media; k++) media = s->cached[k] < 0;
            if (media && !e->p.mtmd) { /* rows of a projector this server has not loaded */
                tessera_seq_remove(e->p.ctx, a->slot, 0);
                n = 0;
                a->status = 400;
                snprintf(a->error, sizeof a->error,
                         "the slot file holds an image or a sound: restore it into a server started with --mmproj");
            }
            s->n_past = n;
            a->n_tokens = n;
        }
    }
    e->m.kv_cells_used = tessera_kv_cells_used(e->p.ctx);
    a->ms = serve_now_ms() - t0;
}

int serve_engine_slot_action(serve_engine *e, serve_slot_action *a) {
    if (a->slot < 0 || a->slot >= e->p.n_slots) {
        a->status = 400;
        snprintf(a->error, sizeof a->error, "no slot %d (slots 0..%d, --parallel)", a->slot, e->p.n_slots - 1);
        return -1;
    }
    pthread_mutex_lock(&e->mu);
    /* One action at a time: a second waits for the first. */
    while (e->action && !e->stopping) pthread_cond_wait(&e->action_done, &e->mu);
    if (e->stopping || !e->started || e->draining) {
        pthread_mutex_unlock(&e->mu);
        a->status = 503;
        snprintf(a->error, sizeof a->error, "the server is shutting down");
        return -1;
    }
    a->status = 0;
    e->action = a;
    pthread_cond_signal(&e->wake);
    while (a->status == 0 && !e->stopping) pthread_cond_wait(&e->action_done, &e->mu);
    if (e->action == a) { /* stopped before it ran */
        e->action = NULL;
        a->status = 503;
        snprintf(a->error, sizeof a->error, "the server is shutting down");
    }
    pthread_mutex_unlock(&e->mu);
    return a->status == 200 ? 0 : -1;
}

/* Work an HTTP thread hands the engine thread (serve_engine_run). */
typedef struct engine_job {
    void (*fn)(void *);
    void *arg;
    int state; /* 0 waiting, 1 done, -1 never run (stopping) */
    struct engine_job *next;
} engine_job;

int serve_engine_run(serve_engine *e, void (*fn)(void *), void *arg) {
    engine_job job = {.fn = fn, .arg = arg};
    pthread_mutex_lock(&e->mu);
    if (e->stopping || !e->started) {
        pthread_mutex_unlock(&e->mu);
        return -1;
    }
    *e->jobs_tail = &job;
    e->jobs_tail = &job.next;
    pthread_cond_signal(&e->wake);
    while (job.state == 0) pthread_cond_wait(&e->action_done, &e->mu);
    pthread_mutex_unlock(&e->mu);
    return job.state > 0 ? 0 : -1;
}

/* Run the jobs posted so far (lock held on entry and exit, let go while
 * each runs: a job decodes, and readers must not wait for it). */
static void jobs_run(serve_engine *e) {
    while (e->jobs && !e->stopping) {
        engine_job *j = e->jobs;
        e->jobs = j->next;
        if (!e->jobs) e->jobs_tail = &e->jobs;
        pthread_mutex_unlock(&e->mu);
        j->fn(j->arg);
        pthread_mutex_lock(&e->mu);
        j->state = 1;
        pthread_cond_broadcast(&e->action_done);
    }
}

/* Stopping: the jobs never run are answered (lock held). */
static void jobs_fail(serve_engine *e) {
    for (engine_job *j = e->jobs; j; j = j->next) j->state = -1;
    e->jobs = NULL;
    e->jobs_tail = &e->jobs;
    pthread_cond_broadcast(&e->action_done);
}

/* --kv-unified: before a step of n tokens, idle slots' cached prompts give
 * their cells back when the free ones are fewer (lock held). */
static void unified_make_room(serve_engine *e, int32_t n) {
    int32_t free_cells = (int32_t)tessera_context_n_ctx(e->p.ctx) - tessera_kv_cells_used(e->p.ctx);
    for (int32_t i = 0; i < e->p.n_slots && free_cells < n; i++) {
        serve_slot *s = &e->slots[i];
        if (s->ch || s->n_past == 0) continue;
        free_cells += s->n_past;
        tessera_seq_remove(e->p.ctx, i, 0);
        s->n_past = 0;
    }
}

/* The error of a failed decode: with --kv-unified, running out of cells is
 * the shared context being full (llama-server's words). */
static const char *decode_error(const serve_engine *e) {
    const char *why = tessera_last_error();
    if (e->p.unified && (strstr(why, "no free cell") || strstr(why, "context full")))
        return "the context size has been exceeded: the slots share one KV cache (--kv-unified) and it is full";
    return why;
}

/* After a decode (lock held): the per-decode metrics, and the prompt marks
 * of the first choices whose prompt tokens it held. */
static void step_done(serve_engine *e, bool ok) {
    for (int32_t i = 0; i < e->p.n_slots; i++) {
        serve_slot *s = &e->slots[i];
        if (!s->ch) continue;
        e->m.busy_slot_steps++;
        if (s->n_past > e->m.n_tokens_max) e->m.n_tokens_max = s->n_past;
        if (s->fed_prompt && ok && s->ch->index == 0 && s->ch->req->want_progress) {
            pthread_mutex_lock(&s->ch->req->mu);
            prompt_mark(s->ch->req, s->n_fed);
            pthread_mutex_unlock(&s->ch->req->mu);
        }
        s->fed_prompt = false;
    }
}

/* A speculative step of slot i (slot_speculates; entered with the lock
 * held, which it lets go while decoding): its text so far is its cached
 * tokens and its next one; the tokens the step gives are taken one by one
 * as a batch row's would be, until the choice ends. */
static void slot_spec_step(serve_engine *e, int32_t i) {
    serve_slot *s = &e->slots[i];
    serve_choice *ch = s->ch;
    serve_request *r = ch->req;
    int32_t max_out = e->p.slot_ctx - s->n_past - 1;
    if (r->max_tokens >= 0 && r->max_tokens - ch->n_gen < max_out) max_out = r->max_tokens - ch->n_gen;
    if (max_out > 64) max_out = 64;
    if (max_out < 1) max_out = 1;
    s->cached[s->n_past] = s->next;
    s->has_next = false;
    float lora[SERVE_MAX_LORA];
    memcpy(lora, s->lora, sizeof lora);
    pthread_mutex_unlock(&e->mu);
    tessera_token out[64];
    int32_t drafted = 0;
    const double t0 = serve_now_ms();
    /* The target verifies with the slot's adapters, as its batch row would
     * (the draft model has none: they change what is accepted, not the
     * output). */
    int32_t k = -1;
    if (e->p.n_loras == 0 || tessera_context_set_loras(e->p.ctx, e->p.loras, lora, e->p.n_loras) == 0)
        k = tessera_spec_step(e->p.spec, i, ch->sampler, s->cached, s->n_past + 1, out, max_out, &drafted);
    const double dt = serve_now_ms() - t0;
    pthread_mutex_lock(&e->mu);
    e->m.steps++;
    e->m.batch_tokens += (uint64_t)drafted + 1;
    e->m.decode_ms += dt;
    e->m.kv_cells_used = tessera_kv_cells_used(e->p.ctx);
    step_done(e, k > 0);
    pthread_mutex_lock(&r->mu);
    if (k <= 0) {
        if (r->state != SERVE_DONE) request_finish(e, r, decode_error(e));
        pthread_mutex_unlock(&r->mu);
        return;
    }
    s->n_past++; /* the next token is in the cache now */
    ch->draft_n += drafted;
    ch->draft_n_accepted += k - 1;
    e->m.spec_drafts += drafted > 0;
    e->m.spec_drafted += (uint64_t)drafted;
    e->m.spec_accepted += (uint64_t)(k - 1);
    for (int32_t j = 0; j < k && ch->state != SERVE_DONE && !request_cancelled(r); j++) {
        slot_token *o = &e->b_out[i];
        o->t = out[j];
        o->accepted = true;
        slot_describe(e, i, NULL, o);
        slot_take_token(e, i, o);
        if (o->piece != o->small) free(o->piece);
        o->piece = o->small;
        /* all but the last are in the cache already: the last is the next one to decode */
        if (j < k - 1 && s->has_next) {
            s->cached[s->n_past++] = s->next;
            s->has_next = false;
        }
    }
    pthread_mutex_unlock(&r->mu);
}

/* Whether slot i's next prompt entry is a medium's first row: a media
 * step (slot_media_step) comes before the batch. */
static bool slot_at_media(const serve_engine *e, int32_t i) {
    const serve_slot *s = &e->slots[i];
    const serve_request *r = s->ch ? s->ch->req : NULL;
    return r && !s->has_next && s->ch->state != SERVE_DONE && s->n_fed < r->n_prompt && r->prompt[s->n_fed] < 0;
}

/* Slot i's medium at its n_fed (slot_at_media; entered with the lock held,
 * which it lets go while encoding and decoding): encoded, or taken from
 * the projector's cache by its content, and its rows decoded into the
 * slot's sequence in one call, so that they attend to each other. A prompt
 * that ends with the medium samples its first token from the last row. */
static void slot_media_step(serve_engine *e, int32_t i) {
    serve_slot *s = &e->slots[i];
    serve_choice *ch = s->ch;
    serve_request *r = ch->req;
    const serve_media_span *sp = NULL;
    int32_t k = 0;
    for (; k < r->n_spans && !sp; k++)
        if (r->spans[k].start == s->n_fed) sp = &r->spans[k];
    char msg[sizeof r->error] = "";
    if (!sp || !e->p.mtmd) snprintf(msg, sizeof msg, "no medium starts at prompt position %d", s->n_fed);
    else if (e->p.unified) unified_make_room(e, sp->n);
    const bool last = sp && sp->start + sp->n == r->n_prompt;
    float lora[SERVE_MAX_LORA];
    memcpy(lora, s->lora, sizeof lora);
    slot_token *o = &e->b_out[i];
    o->piece = o->small;
    pthread_mutex_unlock(&e->mu);
    const double t0 = serve_now_ms();
    if (!msg[0]) {
        int32_t gx, gy; /* the rows' grid (M-RoPE positions) */
        const float *rows = tessera_mtmd_encode_chunk(e->p.mtmd, r->chunks, sp->chunk);
        if (!rows)
            snprintf(msg, sizeof msg, "encoding medium %d failed: %s", k, tessera_last_error());
        else if ((e->p.n_loras && tessera_context_set_loras(e->p.ctx, e->p.loras, lora, e->p.n_loras) != 0) ||
                 tessera_mtmd_chunk_grid(e->p.mtmd, r->chunks, sp->chunk, &gx, &gy) != 0 ||
                 tessera_decode_embd_grid(e->p.ctx, rows, gx, gy, sp->start, i,
                                          tessera_mtmd_decode_flags(e->p.mtmd)) != 0)
            snprintf(msg, sizeof msg, "%s", decode_error(e));
        else if (last)
            slot_sample(e, i, tessera_logits(e->p.ctx, -1), o);
    }
    const double dt = serve_now_ms() - t0;
    pthread_mutex_lock(&e->mu);
    e->m.steps++;
    e->m.decode_ms += dt;
    e->m.kv_cells_used = tessera_kv_cells_used(e->p.ctx);
    pthread_mutex_lock(&r->mu);
    if (msg[0]) {
        if (r->state != SERVE_DONE) request_finish(e, r, msg);
    } else {
        memcpy(s->cached + sp->start, r->prompt + sp->start, (size_t)sp->n * sizeof *s->cached);
        s->n_fed = s->n_past = sp->start + sp->n;
        e->m.batch_tokens += (uint64_t)sp->n;
        e->m.prompt_tokens += (uint64_t)sp->n;
        if (s->n_past > e->m.n_tokens_max) e->m.n_tokens_max = s->n_past;
        if (ch->index == 0 && r->want_progress) prompt_mark(r, s->n_fed);
        if (last && ch->state != SERVE_DONE && !request_cancelled(r)) slot_take_token(e, i, o);
    }
    pthread_mutex_unlock(&r->mu);
    if (o->piece != o->small) free(o->piece);
    o->piece = o->small;
}

static void *engine_main(void *arg) {
    serve_engine *e = arg;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        schedule(e);
        if (e->stopping) break;
        if (e->action) {
            slot_action_run(e, e->action);
            e->action = NULL;
            pthread_cond_broadcast(&e->action_done);
        }
        jobs_run(e);
        if (e->stopping) break;
        bool speculated = false;
        for (int32_t i = 0; i < e->p.n_slots && !e->stopping; i++)
            if (slot_speculates(e, i)) {
                slot_spec_step(e, i);
                speculated = true;
            }
        for (int32_t i = 0; i < e->p.n_slots && !e->stopping; i++)
            if (slot_at_media(e, i)) {
                slot_media_step(e, i);
                speculated = true; /* work was done: look again before waiting */
            }
        int32_t n = build_batch(e);
        if (n == 0) {
            if (!speculated) pthread_cond_wait(&e->wake, &e->mu);
            continue;
        }
        if (e->p.unified) unified_make_room(e, n);
        pthread_mutex_unlock(&e->mu);
        /* Requests cannot go away meanwhile: the engine holds a reference. */
        double t0 = serve_now_ms();
        int rc = e->p.n_loras ? tessera_context_set_loras(e->p.ctx, e->p.loras, e->b_lora, e->p.n_loras) : 0;
        if (rc == 0) rc = tessera_decode_batch(e->p.ctx, e->b_tok, e->b_pos, e->b_seq, e->b_want, n);
        double dt = serve_now_ms() - t0;
        /* Each row's token, still without the lock: a choice that ended
         * before the step has no row to sample (only this thread ends
         * choices); one whose client left meanwhile is skipped below. */
        for (int32_t k = 0, row = 0; rc == 0 && k < n; k++) {
            if (!e->b_want[k]) continue;
            int32_t i = e->b_slot_of_row[k];
            const float *logits = tessera_logits(e->p.ctx, row++);
            if (e->slots[i].ch->state != SERVE_DONE) slot_sample(e, i, logits, &e->b_out[i]);
        }
        pthread_mutex_lock(&e->mu);
        e->m.steps++;
        e->m.batch_tokens += (uint64_t)n;
        e->m.decode_ms += dt;
        e->m.kv_cells_used = tessera_kv_cells_used(e->p.ctx);
        step_done(e, rc == 0);
        for (int32_t k = 0; k < n; k++) {
            if (!e->b_want[k]) continue;
            int32_t i = e->b_slot_of_row[k];
            serve_choice *ch = e->slots[i].ch;
            serve_request *r = ch->req;
            slot_token *o = &e->b_out[i];
            pthread_mutex_lock(&r->mu); /* the reader of r waits a token's adding at most */
            if (rc != 0) request_finish(e, r, decode_error(e));
            else if (ch->state != SERVE_DONE && !request_cancelled(r)) slot_take_token(e, i, o);
            pthread_mutex_unlock(&r->mu);
            if (o->piece != o->small) free(o->piece);
            o->piece = o->small;
        }
        if (rc != 0) /* prompt chunks without logits fail with the rest of their request */
            for (int32_t k = 0; k < n; k++) {
                serve_request *r = e->slots[e->b_slot_of_row[k]].ch->req;
                pthread_mutex_lock(&r->mu);
                if (r->state != SERVE_DONE) request_finish(e, r, decode_error(e));
                pthread_mutex_unlock(&r->mu);
            }
    }
    /* Stopping: what runs ends with its text so far, what waits never starts. */
    for (int32_t i = 0; i < e->p.n_slots; i++)
        if (e->slots[i].ch) {
            serve_request *r = e->slots[i].ch->req;
            pthread_mutex_lock(&r->mu);
            if (r->state != SERVE_DONE) request_cut(e, r);
            pthread_mutex_unlock(&r->mu);
            slot_free(e, i);
        }
    while (e->q_len > 0) {
        serve_request *r = e->queue[e->q_head]->req;
        e->q_head = (e->q_head + 1) % e->q_cap;
        e->q_len--;
        pthread_mutex_lock(&r->mu);
        if (r->state == SERVE_QUEUED) { /* none of its choices started */
            snprintf(r->error, sizeof r->error, "the server is shutting down; the request was not started");
            r->error_status = 503;
            request_finish(e, r, NULL);
        } else if (r->state != SERVE_DONE) {
            request_cut(e, r);
        }
        pthread_mutex_unlock(&r->mu);
        request_unref(r);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

int32_t serve_engine_lora_count(const serve_engine *e) { return e->p.n_loras; }

const char *serve_engine_lora_path(const serve_engine *e, int32_t id) {
    return id >= 0 && id < e->p.n_loras && e->p.lora_paths[id] ? e->p.lora_paths[id] : "";
}

void serve_engine_lora_get(serve_engine *e, float *out) {
    pthread_mutex_lock(&e->mu);
    memcpy(out, e->lora, (size_t)e->p.n_loras * sizeof *out);
    pthread_mutex_unlock(&e->mu);
}

void serve_engine_lora_set(serve_engine *e, const float *scales) {
    pthread_mutex_lock(&e->mu);
    memcpy(e->lora, scales, (size_t)e->p.n_loras * sizeof *scales);
    pthread_mutex_unlock(&e->mu);
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
    pthread_cond_broadcast(&e->action_done);
    jobs_fail(e);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->thread, NULL);
    e->started = false;
    /* Nothing will decode any more: end every request still generating or
     * queued, so that streams send their last event and [DONE] instead of
     * being cut off when the HTTP side closes. */
    pthread_mutex_lock(&e->mu);
    for (int32_t i = 0; i < e->p.n_slots + e->q_len; i++) {
        serve_choice *ch = i < e->p.n_slots ? e->slots[i].ch : e->queue[(e->q_head + i - e->p.n_slots) % e->q_cap];
        if (!ch) continue;
        pthread_mutex_lock(&ch->req->mu);
        request_finish(e, ch->req, NULL);
        pthread_mutex_unlock(&ch->req->mu);
    }
    pthread_mutex_unlock(&e->mu);
}

void serve_engine_drain(serve_engine *e, int grace_ms, bool (*interrupt)(void *), void *cls) {
    pthread_mutex_lock(&e->mu);
    e->draining = true;
    pthread_mutex_unlock(&e->mu);
    double end = serve_now_ms() + grace_ms;
    for (;;) {
        pthread_mutex_lock(&e->mu);
        bool idle = e->m.slots_busy == 0 && e->q_len == 0;
        pthread_mutex_unlock(&e->mu);
        if (idle || serve_now_ms() >= end || (interrupt && interrupt(cls))) return;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

void serve_engine_free(serve_engine *e) {
    if (!e) return;
    serve_engine_stop(e);
    pthread_cond_destroy(&e->wake);
    pthread_cond_destroy(&e->action_done);
    pthread_mutex_destroy(&e->mu);
    for (int32_t i = 0; e->slots && i < e->p.n_slots; i++) free(e->slots[i].cached);
    free(e->slots);
    free(e->queue);
    free(e->b_tok);
    free(e->b_pos);
    free(e->b_seq);
    free(e->b_out);
    free(e->b_slot_of_row);
    free(e->b_want);
    free(e);
}

int serve_engine_submit(serve_engine *e, serve_request *r) {
    pthread_mutex_lock(&e->mu);
    int32_t free_slots = 0;
    for (int32_t i = 0; i < e->p.n_slots; i++) free_slots += e->slots[i].ch == NULL;
    /* Queued choices take free slots first; beyond them max_queue may wait. */
    if (e->stopping || e->draining || r->n_choices > e->p.n_slots ||
        e->q_len + r->n_choices > free_slots + e->p.max_queue) {
        int rc = e->stopping || e->draining ? -2 : -1;
        pthread_mutex_unlock(&e->mu);
        return rc;
    }
    r->refs = 1 + r->n_choices; /* the HTTP thread and each choice in the engine */
    r->state = SERVE_QUEUED;
    r->t_submit_ms = serve_now_ms();
    for (int32_t c = 0; c < r->n_choices; c++) {
        e->queue[(e->q_head + e->q_len) % e->q_cap] = &r->choices[c];
        e->q_len++;
    }
    e->m.queued = e->q_len;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->mu);
    return 0;
}

bool serve_engine_wait(serve_engine *e, serve_request *r, uint64_t seen, int timeout_ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    ts.tv_sec += timeout_ms / 1000 + ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    (void)e;
    pthread_mutex_lock(&r->mu);
    while (r->state != SERVE_DONE && r->progress <= seen)
        if (pthread_cond_timedwait(&r->cond, &r->mu, &ts) != 0) break;
    bool ready = r->state == SERVE_DONE || r->progress > seen;
    pthread_mutex_unlock(&r->mu);
    return ready;
}

void serve_engine_release(serve_engine *e, serve_request *r) {
    pthread_mutex_lock(&r->mu); /* as the engine sees state: a done request is not cancelled */
    const bool running = r->state != SERVE_DONE;
    if (running) __atomic_store_n(&r->cancelled, true, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&r->mu);
    if (running) { /* the engine drops it at its next step */
        pthread_mutex_lock(&e->mu);
        pthread_cond_signal(&e->wake);
        pthread_mutex_unlock(&e->mu);
    }
    request_unref(r);
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
    out->spec = e->p.spec != NULL;
    double t = serve_now_ms();
    int64_t held = 0; /* cells the running requests hold */
    for (int32_t i = 0; i < e->p.n_slots; i++) {
        const serve_slot *s = &e->slots[i];
        if (!s->ch) continue;
        out->busy_slot_ms += t - s->t_start_ms;
        /* a request counts once, in the first slot of its choices */
        bool first = true;
        for (int32_t k = 0; k < i && first; k++) first = !e->slots[k].ch || e->slots[k].ch->req != s->ch->req;
        out->requests_running += first;
        /* unified: the cells it holds; else the slot's share, which no
         * other request may use while it runs */
        held += e->p.unified ? s->n_past : e->p.slot_ctx;
    }
    const int64_t cells = e->p.unified ? e->p.slot_ctx : (int64_t)e->p.slot_ctx * e->p.n_slots;
    out->kv_usage = cells > 0 ? (double)(held < cells ? held : cells) / (double)cells : 0.0;
    *uptime_ms = t - e->t_start_ms;
    pthread_mutex_unlock(&e->mu);
}

int32_t serve_engine_slot_info(serve_engine *e, serve_slot_info *out, int32_t max) {
    pthread_mutex_lock(&e->mu);
    int32_t n = e->p.n_slots < max ? e->p.n_slots : max;
    for (int32_t i = 0; i < n; i++) {
        const serve_slot *s = &e->slots[i];
        out[i] = (serve_slot_info){.busy = s->ch != NULL, .n_past = s->n_past};
        if (s->ch) {
            out[i].n_prompt = s->ch->req->n_prompt;
            out[i].n_gen = s->ch->n_gen;
            out[i].n_remain = s->ch->req->max_tokens >= 0 ? s->ch->req->max_tokens - s->ch->n_gen : -1;
            out[i].cache_prompt = s->ch->req->cache_prompt;
        }
    }
    pthread_mutex_unlock(&e->mu);
    return n;
}
