/*
 * merge — the pairwise merge of one piece of text that BPE (bpe.c) and
 * SentencePiece (spm.c) share: split it into UTF-8 characters, queue every
 * adjacent pair the vocabulary can merge, then repeatedly merge the best
 * queued pair that is still valid and queue the pairs it forms with its
 * neighbours. The tokenizers differ only in which pairs merge and which
 * comes first (BPE: lowest merge rank; SPM: highest token score; ties:
 * leftmost), which the caller's pair function says.
 */
#ifndef TESSERA_VOCAB_MERGE_H
#define TESSERA_VOCAB_MERGE_H

#include <stddef.h>

#include "util/heap.h"

typedef struct merge_symbol {
    int prev, next; /* -1 at the ends */
    size_t start;   /* byte offset in the text */
    size_t n;       /* bytes; 0 once merged into its left neighbour */
} merge_symbol;

/* Whether adjacent symbols l and r of text may merge: 1 with *prio (the
 * lowest comes out first), 0 when they may not, -1 out of memory. */
typedef int (*merge_pair_fn)(void *ctx, const char *text, const merge_symbol *l, const merge_symbol *r,
                             double *prio);

typedef struct merge_session {
    merge_pair_fn pair;
    void *ctx;
    const char *text;
    merge_symbol *sym;
    size_t sym_cap;
    tsr_heap heap;
} merge_session;

void merge_init(merge_session *m, merge_pair_fn pair, void *ctx);
/* Merge text[0..len) (len > 0): afterwards the symbols left run from
 * m->sym[0] along next to -1. 0, or -1 out of memory. */
int merge_text(merge_session *m, const char *text, size_t len);
void merge_free(merge_session *m);

#endif
