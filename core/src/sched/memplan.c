/*
 * memplan — offsets in one compute buffer. Blocks are freed as tensors die
 * (liveness is the caller's business); a new request takes the smallest
 * free block that fits, else space at the top. Free blocks are kept sorted
 * by offset and merged with their neighbours; a block that ends at the top
 * lowers the top. peak is what the buffer must hold.
 */
#include <stdlib.h>
#include <string.h>

#include "sched/sched_internal.h"

uint64_t memplan_aligned(uint64_t size) {
    if (size == 0) size = 1;
    return (size + SCHED_ALIGN - 1) / SCHED_ALIGN * SCHED_ALIGN;
}

void memplan_reset(memplan *p) {
    p->n_free = 0;
    p->top = 0;
    p->peak = 0;
}

void memplan_release(memplan *p) {
    free(p->free_blocks);
    memset(p, 0, sizeof *p);
}

static void remove_block(memplan *p, int32_t i) {
    memmove(&p->free_blocks[i], &p->free_blocks[i + 1],
            (size_t)(p->n_free - i - 1) * sizeof *p->free_blocks);
    p->n_free--;
}

uint64_t memplan_alloc(memplan *p, uint64_t size) {
    size = memplan_aligned(size);
    int32_t best = -1;
    for (int32_t i = 0; i < p->n_free; i++)
        if (p->free_blocks[i].size >= size &&
            (best < 0 || p->free_blocks[i].size < p->free_blocks[best].size))
            best = i;
    if (best >= 0) {
        memplan_block *b = &p->free_blocks[best];
        uint64_t off = b->offset;
        b->offset += size;
        b->size -= size;
        if (b->size == 0) remove_block(p, best);
        return off;
    }
    uint64_t off = p->top;
    p->top += size;
    if (p->top > p->peak) p->peak = p->top;
    return off;
}

int memplan_free(memplan *p, uint64_t offset, uint64_t size) {
    size = memplan_aligned(size);
    if (offset + size == p->top) {
        p->top = offset;
        /* The free block just below may now touch the top too. */
        if (p->n_free > 0) {
            memplan_block *last = &p->free_blocks[p->n_free - 1];
            if (last->offset + last->size == p->top) {
                p->top = last->offset;
                p->n_free--;
            }
        }
        return 0;
    }
    int32_t i = 0;
    while (i < p->n_free && p->free_blocks[i].offset < offset) i++;
    bool merge_prev = i > 0 && p->free_blocks[i - 1].offset + p->free_blocks[i - 1].size == offset;
    bool merge_next = i < p->n_free && offset + size == p->free_blocks[i].offset;
    if (merge_prev && merge_next) {
        p->free_blocks[i - 1].size += size + p->free_blocks[i].size;
        remove_block(p, i);
        return 0;
    }
    if (merge_prev) {
        p->free_blocks[i - 1].size += size;
        return 0;
    }
    if (merge_next) {
        p->free_blocks[i].offset = offset;
        p->free_blocks[i].size += size;
        return 0;
    }
    if (p->n_free == p->cap_free) {
        int32_t cap = p->cap_free ? p->cap_free * 2 : 16;
        memplan_block *grown = realloc(p->free_blocks, (size_t)cap * sizeof *grown);
        if (!grown) return -1;
        p->free_blocks = grown;
        p->cap_free = cap;
    }
    memmove(&p->free_blocks[i + 1], &p->free_blocks[i],
            (size_t)(p->n_free - i) * sizeof *p->free_blocks);
    p->free_blocks[i] = (memplan_block){offset, size};
    p->n_free++;
    return 0;
}
