/*
 * vocab_trie — a vocabulary's token pieces in a byte trie, and the walk
 * that marks every token a matcher accepts next.
 *
 * The straightforward version checks each of the n_vocab pieces from the
 * matcher's state. The walk does the same work once per shared prefix and
 * skips a whole subtree when the grammar rejects its prefix: at a JSON
 * structural position that leaves a few hundred of SmolLM2's 49k tokens to
 * look at instead of all of them.
 */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "util/error.h"
#include "util/grow.h"

enum { MEMO_CP = 0x800, MEMO_UNKNOWN = 0, MEMO_REJECT, MEMO_SAME, MEMO_OTHER };

typedef struct trie_node {
    uint32_t first_child;  /* 0: none (node 0 is the root, never a child) */
    uint32_t next_sibling; /* 0: none */
    int32_t token;         /* first token ending here, -1 if none */
    uint8_t byte;
} trie_node;

struct grammar_vocab {
    int32_t n_vocab;
    char *bytes;          /* all pieces, back to back */
    uint32_t *piece_off;  /* n_vocab + 1 */
    int32_t *token_next;  /* further tokens with the same piece */
    int32_t *long_tokens; /* pieces over GRAMMAR_MAX_PIECE: checked alone */
    size_t n_long;
    trie_node *nodes;
    size_t n_nodes, nodes_cap;
    /* Walk state per depth, reused between walks. */
    grammar_stacks level[GRAMMAR_MAX_PIECE + 1];
    /* What code point cp (< MEMO_CP) does to the walk's starting stacks:
     * MEMO_UNKNOWN, MEMO_REJECT, MEMO_SAME (the same set of stacks again,
     * as inside a JSON string) or MEMO_OTHER. Inside a string almost every
     * node of the trie is then one table lookup instead of an advance. */
    uint8_t memo[MEMO_CP];
};

static int64_t node_child(grammar_vocab *v, uint32_t parent, uint8_t byte) {
    uint32_t *link = &v->nodes[parent].first_child;
    while (*link && v->nodes[*link].byte < byte)
        link = &v->nodes[*link].next_sibling;
    if (*link && v->nodes[*link].byte == byte) return *link;
    if (v->n_nodes == v->nodes_cap) {
        if (ARRAY_GROW(v->nodes, v->nodes_cap, v->n_nodes + 1, 64) < 0) return -1;
        /* re-find the link in the moved array */
        link = &v->nodes[parent].first_child;
        while (*link && v->nodes[*link].byte < byte)
            link = &v->nodes[*link].next_sibling;
    }
    uint32_t id = (uint32_t)v->n_nodes++;
    v->nodes[id] = (trie_node){0, *link, -1, byte};
    *link = id; /* children stay sorted by byte */
    return id;
}

grammar_vocab *grammar_vocab_new(int32_t n_vocab, grammar_piece_fn piece, void *user) {
    grammar_vocab *v = calloc(1, sizeof *v);
    char buf[4096];
    size_t bytes_cap = 1 << 16, n_bytes = 0;
    if (!v || n_vocab <= 0) goto fail;
    v->n_vocab = n_vocab;
    v->bytes = malloc(bytes_cap);
    v->piece_off = malloc(((size_t)n_vocab + 1) * sizeof *v->piece_off);
    v->token_next = malloc((size_t)n_vocab * sizeof *v->token_next);
    v->long_tokens = malloc((size_t)n_vocab * sizeof *v->long_tokens);
    v->nodes_cap = 1 << 16;
    v->nodes = malloc(v->nodes_cap * sizeof *v->nodes);
    if (!v->bytes || !v->piece_off || !v->token_next || !v->long_tokens || !v->nodes) goto fail;
    v->nodes[0] = (trie_node){0, 0, -1, 0};
    v->n_nodes = 1;
    for (int32_t id = 0; id < n_vocab; id++) {
        int32_t n = piece(user, id, buf, (int32_t)sizeof buf);
        if (n < 0 || n > (int32_t)sizeof buf) n = 0; /* unreadable or huge: never allowed */
        v->piece_off[id] = (uint32_t)n_bytes;
        v->token_next[id] = -1;
        if (n == 0) continue;
        if (ARRAY_GROW(v->bytes, bytes_cap, n_bytes + (size_t)n, 4096) < 0) goto fail;
        memcpy(v->bytes + n_bytes, buf, (size_t)n);
        n_bytes += (size_t)n;
        if (n > GRAMMAR_MAX_PIECE) {
            v->long_tokens[v->n_long++] = id;
            continue;
        }
        uint32_t node = 0;
        for (int32_t i = 0; i < n; i++) {
            int64_t c = node_child(v, node, (uint8_t)buf[i]);
            if (c < 0) goto fail;
            node = (uint32_t)c;
        }
        v->token_next[id] = v->nodes[node].token;
        v->nodes[node].token = id;
    }
    v->piece_off[n_vocab] = (uint32_t)n_bytes;
    return v;
fail:
    grammar_vocab_free(v);
    error_set("grammar: out of memory for the token trie of %d tokens", (int)n_vocab);
    return NULL;
}

void grammar_vocab_free(grammar_vocab *v) {
    if (!v) return;
    free(v->bytes);
    free(v->piece_off);
    free(v->token_next);
    free(v->long_tokens);
    free(v->nodes);
    for (size_t i = 0; i <= GRAMMAR_MAX_PIECE; i++)
        grammar_stacks_free(&v->level[i]);
    free(v);
}

int32_t grammar_vocab_size(const grammar_vocab *v) {
    return v->n_vocab;
}

const char *grammar_vocab_piece(const grammar_vocab *v, int32_t id, size_t *n) {
    if (id < 0 || id >= v->n_vocab) {
        *n = 0;
        return NULL;
    }
    *n = v->piece_off[id + 1] - v->piece_off[id];
    return *n ? v->bytes + v->piece_off[id] : NULL;
}

/* Depth-first over the trie. The state of depth d is (stacks[d], u[d]);
 * a byte that does not complete a code point shares its parent's stacks. */
typedef struct walk {
    grammar_vocab *v;
    grammar_matcher *m;
    uint8_t *allowed;
    int32_t count;
} walk;

static int walk_node(walk *w, uint32_t node, const grammar_stacks *st, grammar_utf8 u, int depth) {
    grammar_vocab *v = w->v;
    for (uint32_t c = v->nodes[node].first_child; c; c = v->nodes[c].next_sibling) {
        grammar_utf8 cu = u;
        uint8_t b = v->nodes[c].byte;
        const grammar_stacks *next = st;
        uint32_t cp = 0;
        int step = grammar_utf8_step(&cu, b, &cp);
        if (step < 0) continue;
        bool done = step == 1;
        /* Stacks equal to the start's are always passed on as the start's
         * own, so the memo applies at any depth. */
        bool memo = done && st == &w->m->stacks && cp < MEMO_CP;
        if (memo && v->memo[cp] == MEMO_REJECT) continue;
        if (memo && v->memo[cp] == MEMO_SAME) {
            next = st;
        } else if (done) {
            grammar_stacks *out = &v->level[depth + 1];
            if (grammar_stacks_advance(w->m->g, st, cp, out, &w->m->work) < 0) return -1;
            bool same = out->n > 0 && st == &w->m->stacks && grammar_stacks_equal(out, st);
            if (memo) v->memo[cp] = out->n == 0 ? MEMO_REJECT : same ? MEMO_SAME : MEMO_OTHER;
            if (out->n == 0) continue;
            next = same ? st : out;
        } else {
            uint32_t lo, hi;
            grammar_utf8_range(&cu, &lo, &hi);
            if (lo > hi || !grammar_stacks_allow_range(w->m->g, st, lo, hi)) continue;
        }
        for (int32_t t = v->nodes[c].token; t >= 0; t = v->token_next[t]) {
            w->allowed[t] = 1;
            w->count++;
        }
        if (v->nodes[c].first_child && walk_node(w, c, next, cu, depth + 1) < 0) return -1;
    }
    return 0;
}

int32_t grammar_vocab_mask(grammar_vocab *v, grammar_matcher *m, uint8_t *allowed) {
    memset(allowed, 0, (size_t)v->n_vocab);
    memset(v->memo, MEMO_UNKNOWN, sizeof v->memo);
    walk w = {v, m, allowed, 0};
    /* One budget for the whole walk (each long token's check below gets
     * its own: there are few or none). */
    m->work.budget = m->call_work;
    if (walk_node(&w, 0, &m->stacks, m->partial, 0) < 0) return -1;
    for (size_t i = 0; i < v->n_long; i++) {
        size_t n;
        const char *p = grammar_vocab_piece(v, v->long_tokens[i], &n);
        int rc = grammar_matcher_check(m, p, n);
        if (rc < 0) return -1;
        if (rc) {
            allowed[v->long_tokens[i]] = 1;
            w.count++;
        }
    }
    return w.count;
}
