/*
 * utf8 — the small pieces of UTF-8 and GPT-2 byte mapping the tokenizers
 * share, with llama.cpp's exact leniency (see utf8_decode).
 */
#ifndef TESSERA_VOCAB_UTF8_H
#define TESSERA_VOCAB_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UTF8_REPLACEMENT 0xFFFDu

/* Length of the sequence a lead byte announces, from its high nibble:
 * 0x0-0xB -> 1 (continuation bytes count as 1), 0xC-0xD -> 2, 0xE -> 3,
 * 0xF -> 4. The caller clamps to the bytes left. */
static inline size_t utf8_len_lead(uint8_t c) {
    static const uint8_t lens[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lens[c >> 4];
}

/* Decode one code point at s[*off] (n bytes in all) and advance *off.
 * As llama.cpp: a sequence whose lead and continuation bits are right is
 * accepted even when overlong or a surrogate; anything else (stray
 * continuation byte, truncated sequence, 5-byte lead) and any value above
 * U+10FFFF gives U+FFFD and advances one byte. */
uint32_t utf8_decode(const char *s, size_t n, size_t *off);

/* Encode cpt (<= 0x10FFFF; surrogates included) into out; returns 1..4. */
size_t utf8_encode(uint32_t cpt, char out[4]);

/* GPT-2's byte <-> printable code point mapping: printable Latin-1 bytes map
 * to themselves, the other 68 bytes to U+0100.. in byte order. */
uint32_t gpt2_byte_to_cpt(uint8_t b);
int gpt2_cpt_to_byte(uint32_t cpt); /* -1 if cpt is not in the mapping */

/* Unicode White_Space (the set llama.cpp's unicode_cpt_flags calls
 * whitespace). */
bool utf8_is_whitespace(uint32_t cpt);

#endif
