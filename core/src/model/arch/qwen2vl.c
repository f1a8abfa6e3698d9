/*
 * qwen2vl — Qwen2-VL / Qwen2.5-VL's text model: qwen2 (biases on q, k and
 * v, NeoX rope) with M-RoPE. rope.dimension_sections splits the rotated
 * pairs into runs (Qwen2-VL's 16, 24, 24 and 0 of 64) turned by a token's
 * temporal, height and width positions (and a 4th row llama.cpp keeps at
 * 0). A text token has all three equal to its position, so text alone is
 * qwen2; an image's rows take grid positions (tessera_decode_embd_grid).
 */
#include <string.h>

#include "model/arch/arch.h"
#include "util/error.h"

static int qwen2vl_hparams(model_hparams *hp, const model_hp_reader *r) {
    char key[64];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", r->arch);
    gguf_type et;
    uint64_t n;
    const void *data;
    if (gguf_find_key(r->f, key) < 0)
        return error_set("%s: key '%s' not found (a qwen2vl file has it: M-RoPE's sections)", gguf_path(r->f), key);
    if (gguf_get_arr(r->f, key, &et, &n, &data) != 0) return error_wrap("%s", gguf_path(r->f));
    if ((et != GGUF_TYPE_INT32 && et != GGUF_TYPE_UINT32) || n < 3 || n > 4)
        return error_set("%s: key '%s' must hold 3 or 4 32-bit integers", gguf_path(r->f), key);
    int64_t sum = 0;
    for (uint64_t i = 0; i < n; i++) {
        int32_t v;
        memcpy(&v, (const char *)data + i * 4, 4);
        if (v < 0 || v > 4096) return error_set("%s: key '%s' holds %d, not a section size", gguf_path(r->f), key, v);
        hp->rope_sections[i] = v;
        sum += v;
    }
    if (sum * 2 != hp->n_rot)
        return error_set("%s: key '%s' sums to %lld pairs, but rope.dimension_count %d rotates %d", gguf_path(r->f),
                         key, (long long)sum, hp->n_rot, hp->n_rot / 2);
    return 0;
}

const model_arch_desc arch_qwen2vl = {
    .name = "qwen2vl",
    .rope_mode = TSR_ROPE_NEOX,
    .hparams = qwen2vl_hparams,
    .tensor_sets = MODEL_SET_ATTN | MODEL_SET_QKV_BIAS | MODEL_SET_FFN,
    .build = arch_llama_build, /* the llama graph; blk_rope turns by sections */
};
