#include "vocab/utf8.h"

static bool is_cont(uint8_t c) { return (c & 0xC0) == 0x80; }

uint32_t utf8_decode(const char *s, size_t n, size_t *off) {
    const uint8_t *p = (const uint8_t *)s + *off;
    size_t left = n - *off;
    uint8_t c = p[0];
    if (!(c & 0x80)) {
        *off += 1;
        return c;
    }
    if (!(c & 0x40)) goto invalid; /* continuation byte as a lead */
    if (!(c & 0x20)) {
        if (left < 2 || !is_cont(p[1])) goto invalid;
        *off += 2;
        return ((uint32_t)(c & 0x1F) << 6) | (p[1] & 0x3F);
    }
    if (!(c & 0x10)) {
        if (left < 3 || !is_cont(p[1]) || !is_cont(p[2])) goto invalid;
        *off += 3;
        return ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    }
    if (!(c & 0x08)) {
        if (left < 4 || !is_cont(p[1]) || !is_cont(p[2]) || !is_cont(p[3])) goto invalid;
        uint32_t cpt = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(p[1] & 0x3F) << 12) |
                       ((uint32_t)(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
        /* llama.cpp would later fail to re-encode these; treat as invalid. */
        if (cpt > 0x10FFFF) goto invalid;
        *off += 4;
        return cpt;
    }
invalid:
    *off += 1;
    return UTF8_REPLACEMENT;
}

size_t utf8_encode(uint32_t cpt, char out[4]) {
    if (cpt < 0x80) {
        out[0] = (char)cpt;
        return 1;
    }
    if (cpt < 0x800) {
        out[0] = (char)(0xC0 | (cpt >> 6));
        out[1] = (char)(0x80 | (cpt & 0x3F));
        return 2;
    }
    if (cpt < 0x10000) {
        out[0] = (char)(0xE0 | (cpt >> 12));
        out[1] = (char)(0x80 | ((cpt >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cpt & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cpt >> 18));
    out[1] = (char)(0x80 | ((cpt >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cpt >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cpt & 0x3F));
    return 4;
}

/* Printable bytes: '!'..'~', 0xA1..0xAC, 0xAE..0xFF. The others (0x00-0x20,
 * 0x7F-0xA0, 0xAD) are numbered from U+0100 in byte order. */
static bool gpt2_printable(uint32_t b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t gpt2_byte_to_cpt(uint8_t b) {
    if (gpt2_printable(b)) return b;
    if (b <= 0x20) return 0x100 + b;              /* 33 bytes: U+0100..U+0120 */
    if (b >= 0x7F && b <= 0xA0) return 0x121 + (b - 0x7F); /* 34 bytes: U+0121..U+0142 */
    return 0x143;                                  /* 0xAD */
}

int gpt2_cpt_to_byte(uint32_t cpt) {
    if (cpt <= 0xFF) return gpt2_printable(cpt) ? (int)cpt : -1;
    if (cpt <= 0x120) return (int)(cpt - 0x100);
    if (cpt <= 0x142) return (int)(cpt - 0x121 + 0x7F);
    if (cpt == 0x143) return 0xAD;
    return -1;
}

bool utf8_is_whitespace(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}
