/*
 * quant_policy — which dtype each tensor gets: the targets users name and
 * llama.cpp's per-tensor mixture rules (llama_tensor_get_type), for the
 * targets Tessera can produce. docs/quantize.md explains the rules.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "quant/quant.h"
#include "tensor/dtype.h"
#include "util/error.h"

static const quant_ftype ftypes[] = {
    {"Q4_0", 2, TSR_DTYPE_Q4_0, "4.5 bpw, legacy symmetric 4-bit", false},
    {"Q4_1", 3, TSR_DTYPE_Q4_1, "5.0 bpw, legacy 4-bit with minimum", false},
    {"Q5_0", 8, TSR_DTYPE_Q5_0, "5.5 bpw, legacy symmetric 5-bit", false},
    {"Q5_1", 9, TSR_DTYPE_Q5_1, "6.0 bpw, legacy 5-bit with minimum", false},
    {"Q8_0", 7, TSR_DTYPE_Q8_0, "8.5 bpw, nearly lossless", false},
    {"Q2_K", 10, TSR_DTYPE_Q2_K, "K-quant mixture, mostly 2-bit", false},
    {"Q3_K_S", 11, TSR_DTYPE_Q3_K, "K-quant mixture, all 3-bit", false},
    {"Q3_K_M", 12, TSR_DTYPE_Q3_K, "K-quant mixture, 3-bit, attn_v/ffn_down/attn_output higher", false},
    {"Q3_K_L", 13, TSR_DTYPE_Q3_K, "K-quant mixture, 3-bit, attn_v/ffn_down/attn_output Q5_K", false},
    {"Q4_K_S", 14, TSR_DTYPE_Q4_K, "K-quant mixture, 4-bit, first layers' attn_v/ffn_down Q5_K", false},
    {"Q4_K_M", 15, TSR_DTYPE_Q4_K, "K-quant mixture, 4-bit, half of attn_v/ffn_down Q6_K", false},
    {"Q5_K_S", 16, TSR_DTYPE_Q5_K, "K-quant mixture, all 5-bit", false},
    {"Q5_K_M", 17, TSR_DTYPE_Q5_K, "K-quant mixture, 5-bit, half of attn_v/ffn_down Q6_K", false},
    {"Q6_K", 18, TSR_DTYPE_Q6_K, "K-quant, 6-bit", false},
    {"IQ4_NL", 25, TSR_DTYPE_IQ4_NL, "4.50 bpw non-linear quantization", false},
    {"IQ4_XS", 30, TSR_DTYPE_IQ4_XS, "4.25 bpw non-linear quantization", false},
    {"TQ1_0", 36, TSR_DTYPE_TQ1_0, "1.69 bpw ternarization", false},
    {"TQ2_0", 37, TSR_DTYPE_TQ2_0, "2.06 bpw ternarization", false},
    {"IQ3_XXS", 23, TSR_DTYPE_IQ3_XXS, "3.06 bpw quantization (needs an importance matrix)", true},
    {"Q2_K_S", 21, TSR_DTYPE_Q2_K, "K-quant mixture, 2-bit (needs an importance matrix)", true},
    /* the targets below need an importance matrix, or (IQ1_M) a quantizer
     * Tessera does not have yet: named so that they are refused clearly */
    {"IQ3_S", 26, TSR_DTYPE_IQ3_S, "3.44 bpw quantization", false},
    {"IQ3_M", 27, TSR_DTYPE_IQ3_S, "3.66 bpw quantization mix", false},
    {"IQ3_XS", 22, TSR_DTYPE_IQ3_S, "3.3 bpw quantization (needs an importance matrix)", true},
    {"IQ2_M", 29, TSR_DTYPE_IQ2_S, "2.7 bpw quantization (needs an importance matrix)", true},
    {"IQ2_S", 28, TSR_DTYPE_IQ2_XS, "2.5 bpw quantization (needs an importance matrix)", true},
    {"IQ2_XS", 20, TSR_DTYPE_IQ2_XS, "2.31 bpw quantization (needs an importance matrix)", true},
    {"IQ2_XXS", 19, TSR_DTYPE_IQ2_XXS, "2.06 bpw quantization (needs an importance matrix)", true},
    {"IQ1_M", 31, TSR_DTYPE_IQ1_M, "1.75 bpw quantization (needs an importance matrix)", true},
    {"IQ1_S", 24, TSR_DTYPE_IQ1_S, "1.56 bpw quantization (needs an importance matrix)", true},
    {"F16", 1, TSR_DTYPE_F16, "IEEE half precision", false},
    {"BF16", 32, TSR_DTYPE_BF16, "bfloat16", false},
    {"F32", 0, TSR_DTYPE_F32, "single precision (no quantization)", false},
};
enum { N_FTYPES = sizeof ftypes / sizeof ftypes[0] };

/* Whether Tessera has a quantizer for the target's base type. */
static bool ftype_produced(const quant_ftype *ft) {
    const dtype_traits *t = dtype_traits_get(ft->default_dtype);
    return t && (t->from_f32 || t->from_f32_w || !t->quantized);
}

int quant_ftype_check(const quant_ftype *ft, bool have_imatrix) {
    const bool produced = ftype_produced(ft);
    if (ft->needs_imatrix && !have_imatrix)
        return error_set("quantize: %s requires an importance matrix: at this size llama-quantize's "
                         "quantizer picks each block's grid points (or, for Q2_K_S, its scales) by how much "
                         "each weight matters, and without that data the result is unusable, so "
                         "llama-quantize refuses ('this quantization requires an importance matrix!'). "
                         "Make one with 'tessera imatrix' (or llama-imatrix) and pass --imatrix FILE%s",
                         ft->name,
                         produced ? "" : "; note that Tessera does not quantize to this type itself yet "
                                         "(llama-quantize --imatrix does)");
    if (!produced)
        return error_set("quantize: %s: Tessera does not produce this target yet (it has no quantizer "
                         "for its base type; Tessera reads and computes the type)%s. Use llama-quantize "
                         "--imatrix for %s, or quantize to an IQ2/IQ3 type, IQ4_XS, IQ4_NL or a K-quant",
                         ft->name, have_imatrix ? "; an importance matrix does not change that" : "",
                         ft->name);
    return 0;
}

enum {
    FT_IQ4_NL = 25, FT_IQ4_XS = 30, FT_TQ1_0 = 36, FT_TQ2_0 = 37,
    FT_Q2_K = 10, FT_Q3_K_S = 11, FT_Q3_K_M = 12, FT_Q3_K_L = 13,
    FT_Q4_K_S = 14, FT_Q4_K_M = 15, FT_Q5_K_M = 17, FT_Q2_K_S = 21, FT_IQ3_XXS = 23,
    FT_IQ3_XS = 22, FT_IQ3_S = 26, FT_IQ3_M = 27, FT_IQ2_M = 29, FT_IQ2_S = 28,
    FT_Q4_0 = 2, FT_Q5_0 = 8,
};

const quant_ftype *quant_ftype_find(const char *name) {
    if (!name) return NULL;
    /* llama-quantize's aliases: the bare K names mean the _M mixtures */
    if (!strcasecmp(name, "Q3_K")) name = "Q3_K_M";
    else if (!strcasecmp(name, "Q4_K")) name = "Q4_K_M";
    else if (!strcasecmp(name, "Q5_K")) name = "Q5_K_M";
    for (int i = 0; i < N_FTYPES; i++)
        if (!strcasecmp(ftypes[i].name, name)) return &ftypes[i];
    return NULL;
}

const quant_ftype *quant_ftype_list(int *count) {
    *count = N_FTYPES;
    return ftypes;
}

static bool contains(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int tensor_n_dims(const int64_t *ne) {
    int n = 1;
    for (int d = 1; d < 4; d++)
        if (ne[d] > 1) n = d + 1;
    return n;
}

bool quant_tensor_is_weight(const char *name, const int64_t *ne) {
    /* Small or special 2-D tensors llama.cpp keeps in their input type. */
    static const char *const keep[] = {
        "_norm.weight", "ffn_gate_inp.weight", "altup", "laurel", "per_layer_model_proj",
        "ssm_conv1d.weight", "shortconv.conv.weight", "time_mix_first.weight",
        "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
        "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight",
        "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight",
        "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight",
    };
    if (!ends_with(name, "weight")) return false;
    if (tensor_n_dims(ne) < 2) return false;
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        if (contains(name, keep[i])) return false;
    if (!strcmp(name, "position_embd.weight") || !strcmp(name, "token_types.weight")) return false;
    return true;
}

/* Layers that get more bits in the _M mixtures: the first and last eighth
 * and every third layer in between, where errors hurt perplexity most. */
static bool use_more_bits(int i_layer, int n_layer) {
    return i_layer < n_layer / 8 || i_layer >= 7 * n_layer / 8 || (i_layer - n_layer / 8) % 3 == 2;
}

/* Layer index of a per-layer tensor: the counter for dense models, the
 * number in "blk.N." for mixture-of-experts models (several per layer). */
static int layer_of(const quant_model_info *info, int counter, const char *name) {
    if (info->n_expert > 1) {
        int layer = -1;
        if (sscanf(name, "blk.%d.", &layer) == 1) return layer;
    }
    return counter;
}

/* A type whose block does not divide the row: llama.cpp's fallback table
 * (Q2_K, Q3_K and the ternary types fall back to Q4_0, as llama-quantize
 * does on rows of 64, 128 and 320; the grid types and IQ4_XS to IQ4_NL). */
static int32_t fallback_dtype(int32_t dtype, int64_t nx) {
    int32_t fb;
    switch (dtype) {
    case TSR_DTYPE_Q2_K:
    case TSR_DTYPE_Q3_K:
    case TSR_DTYPE_TQ1_0:
    case TSR_DTYPE_TQ2_0: fb = TSR_DTYPE_Q4_0; break;
    case TSR_DTYPE_IQ2_XXS:
    case TSR_DTYPE_IQ2_XS:
    case TSR_DTYPE_IQ2_S:
    case TSR_DTYPE_IQ3_XXS:
    case TSR_DTYPE_IQ3_S:
    case TSR_DTYPE_IQ1_S:
    case TSR_DTYPE_IQ1_M:
    case TSR_DTYPE_IQ4_XS: fb = TSR_DTYPE_IQ4_NL; break;
    case TSR_DTYPE_Q4_K: fb = TSR_DTYPE_Q5_0; break;
    case TSR_DTYPE_Q5_K: fb = TSR_DTYPE_Q5_1; break;
    case TSR_DTYPE_Q6_K: fb = TSR_DTYPE_Q8_0; break;
    default: fb = dtype; break;
    }
    if (nx % dtype_traits_get(fb)->block_size != 0) fb = TSR_DTYPE_F16;
    return fb;
}

enum { FT_IQ2_XXS = 19, FT_IQ2_XS = 20 };

/* The IQ2 targets IQ2_XXS, IQ2_XS, IQ2_S and IQ2_M (as llama-quantize
 * applies them on synthetic llama, qwen3, phi3, mixtral, qwen3moe,
 * qwen2moe, olmoe, granitemoe, gpt-oss and the hybrids, GQA 1, 2 and 4,
 * 4 to 16 layers, 4, 8 and 16 experts): the output projection Q5_K (a tied
 * embedding too), the embedding Q2_K (IQ2_S, IQ2_M: IQ3_S; it has no
 * importance data: only matrix products are measured), attn_v and a fused
 * attn_qkv Q4_K under GQA >= 4 or with 4+ experts, else Q2_K (IQ2_S,
 * IQ2_M: IQ3_S); the first n/8 ffn_down tensors Q2_K (IQ2_S, IQ2_M: IQ3_S),
 * counted in file order, so a shared expert's ffn_down_shexp is the second
 * of layer 0 and stays in the base type; with exactly 8 experts attn_k
 * Q4_K and attn_output Q5_K, else attn_output IQ3_S for IQ2_S and IQ2_M.
 * Everything else the base type; none of the other ftypes' rules apply. */
static int32_t iq2_mixture_dtype(const quant_model_info *info, quant_rule_state *st, const char *name,
                                 const int64_t *ne, int32_t t, bool iq2_sm) {
    const int n_gqa = info->n_head_kv > 0 ? info->n_head / info->n_head_kv : 1;
    const int32_t bump = iq2_sm ? TSR_DTYPE_IQ3_S : TSR_DTYPE_Q2_K;
    if (!strcmp(name, "output.weight") || (!info->has_output && !strcmp(name, "token_embd.weight"))) {
        if (!strcmp(info->arch, "falcon") || ne[0] % dtype_traits_get(t)->block_size != 0) t = TSR_DTYPE_Q8_0;
        else t = TSR_DTYPE_Q5_K;
    } else if (!strcmp(name, "token_embd.weight")) {
        t = bump;
    } else if (contains(name, "attn_v.weight") || contains(name, "attn_qkv.weight")) {
        t = n_gqa >= 4 || info->n_expert >= 4 ? TSR_DTYPE_Q4_K : bump;
        st->i_attention_wv++;
    } else if (info->n_expert == 8 && contains(name, "attn_k.weight")) {
        t = TSR_DTYPE_Q4_K;
    } else if (contains(name, "ffn_down")) {
        if (st->i_ffn_down < info->n_layer / 8) t = bump;
        st->i_ffn_down++;
    } else if (contains(name, "attn_output.weight")) {
        if (info->n_expert == 8) t = TSR_DTYPE_Q5_K;
        else if (iq2_sm) t = TSR_DTYPE_IQ3_S;
    }
    if (ne[0] % dtype_traits_get(t)->block_size != 0) t = fallback_dtype(t, ne[0]);
    return t;
}

enum { FT_IQ1_S = 24, FT_IQ1_M = 31 };

/* IQ1_S and IQ1_M (read off llama-quantize on synth llamas of 4 to 32
 * layers, GQA 1 and 4): IQ2_XXS's mixture, with attn_output IQ2_XXS. */
static int32_t iq1_mixture_dtype(const quant_model_info *info, quant_rule_state *st, const char *name,
                                 const int64_t *ne, int32_t t) {
    if (contains(name, "attn_output.weight") && info->n_expert != 8) {
        t = TSR_DTYPE_IQ2_XXS;
        if (ne[0] % dtype_traits_get(t)->block_size != 0) t = fallback_dtype(t, ne[0]);
        return t;
    }
    return iq2_mixture_dtype(info, st, name, ne, t, false);
}

int32_t quant_mixture_dtype(const quant_ftype *ft, const quant_model_info *info,
                            quant_rule_state *st, const char *name, const int64_t *ne) {
    const int f = ft->llama_ftype;
    const bool falcon = !strcmp(info->arch, "falcon");
    const int n_gqa = info->n_head_kv > 0 ? info->n_head / info->n_head_kv : 1;
    int32_t t = ft->default_dtype;
    if (f == FT_IQ2_XXS || f == FT_IQ2_XS || f == FT_IQ2_S || f == FT_IQ2_M)
        return iq2_mixture_dtype(info, st, name, ne, t, f == FT_IQ2_S || f == FT_IQ2_M);
    if (f == FT_IQ1_S || f == FT_IQ1_M) return iq1_mixture_dtype(info, st, name, ne, t);

    if (!strcmp(name, "output.weight") || (!info->has_output && !strcmp(name, "token_embd.weight"))) {
        /* The output projection decides every logit: keep it at 6 bits. */
        if (falcon || ne[0] % dtype_traits_get(t)->block_size != 0) t = TSR_DTYPE_Q8_0;
        else if (f == FT_IQ3_XXS) t = TSR_DTYPE_Q5_K; /* seen on llama-quantize */
        else if (t != TSR_DTYPE_Q8_0) t = TSR_DTYPE_Q6_K;
    } else if (!strcmp(name, "token_embd.weight")) {
        /* rows are looked up, not multiplied: the default type is fine,
         * except that ternary embeddings would lose too much */
        if (f == FT_TQ1_0 || f == FT_TQ2_0) t = TSR_DTYPE_Q4_K;
        else if (f == FT_IQ3_XXS || f == FT_IQ3_XS || f == FT_IQ3_M) t = TSR_DTYPE_IQ3_S;
    } else if (contains(name, "attn_v.weight") || contains(name, "attn_qkv.weight")) {
        /* V is small under GQA and its errors pass straight to the output;
         * a fused attn_qkv (phi3, the DeltaNet's of qwen35/qwen35moe) is
         * ruled as V and counted with it, as llama-quantize does now */
        if (f == FT_Q2_K) t = n_gqa >= 4 ? TSR_DTYPE_Q4_K : TSR_DTYPE_Q3_K;
        else if (f == FT_Q2_K_S && n_gqa >= 4) t = TSR_DTYPE_Q4_K;
        else if (f == FT_IQ3_XXS)
            t = n_gqa >= 4 ? TSR_DTYPE_Q4_K : info->has_imatrix ? TSR_DTYPE_IQ3_XXS : TSR_DTYPE_IQ3_S;
        else if (f == FT_IQ3_S || f == FT_IQ3_XS) t = n_gqa >= 4 ? TSR_DTYPE_Q4_K : TSR_DTYPE_IQ3_S;
        else if (f == FT_IQ3_M) t = TSR_DTYPE_Q4_K;
        else if (f == FT_Q3_K_M) t = st->i_attention_wv < 2 ? TSR_DTYPE_Q5_K : TSR_DTYPE_Q4_K;
        else if (f == FT_Q3_K_L) t = TSR_DTYPE_Q5_K;
        else if ((f == FT_Q4_K_M || f == FT_Q5_K_M) &&
                 use_more_bits(st->i_attention_wv, info->n_attention_wv))
            t = TSR_DTYPE_Q6_K;
        else if (f == FT_Q4_K_S && st->i_attention_wv < 4) t = TSR_DTYPE_Q5_K;
        else if ((f == FT_IQ4_NL || f == FT_IQ4_XS) && n_gqa >= 4) t = TSR_DTYPE_Q5_K;
        /* llama.cpp's "70B" rule: 80-layer llama, 8 heads share each V */
        if (!strcmp(info->arch, "llama") && info->n_layer == 80 &&
            (t == TSR_DTYPE_Q3_K || t == TSR_DTYPE_Q4_K))
            t = TSR_DTYPE_Q5_K;
        if (info->n_expert == 8) t = TSR_DTYPE_Q8_0;
        st->i_attention_wv++;
    } else if (contains(name, "attn_k.weight")) {
        if (info->n_expert == 8) t = TSR_DTYPE_Q8_0;
        else if (f == FT_IQ3_XXS) t = TSR_DTYPE_IQ2_S; /* seen on llama-quantize: see docs */
        else if (f == FT_IQ3_XS) t = TSR_DTYPE_IQ3_XXS;
    } else if (contains(name, "attn_q.weight")) {
        if (f == FT_IQ3_XXS) t = TSR_DTYPE_IQ2_S;
        else if (f == FT_IQ3_XS) t = TSR_DTYPE_IQ3_XXS;
    } else if (contains(name, "ffn_down")) {
        const int i_layer = layer_of(info, st->i_ffn_down, name), n_layer = info->n_layer;
        if (f == FT_Q2_K) t = TSR_DTYPE_Q3_K;
        else if (f == FT_Q2_K_S) {
            if (i_layer < n_layer / 8) t = TSR_DTYPE_Q4_K;
        } else if (f == FT_IQ3_XXS && !info->has_imatrix)
            t = i_layer < n_layer / 8 ? TSR_DTYPE_Q4_K : TSR_DTYPE_Q3_K;
        else if (f == FT_IQ3_M && (i_layer < n_layer / 8 ||
                                   (info->n_expert == 8 && use_more_bits(i_layer, n_layer))))
            t = TSR_DTYPE_Q4_K;
        else if (f == FT_Q3_K_M)
            t = i_layer < n_layer / 16 ? TSR_DTYPE_Q5_K
                : (!falcon || use_more_bits(i_layer, n_layer)) ? TSR_DTYPE_Q4_K
                : TSR_DTYPE_Q3_K;
        else if (f == FT_Q3_K_L) t = falcon ? TSR_DTYPE_Q4_K : TSR_DTYPE_Q5_K;
        else if (f == FT_Q4_K_M) {
            if (falcon)
                t = i_layer < n_layer / 16 ? TSR_DTYPE_Q6_K
                    : use_more_bits(i_layer, n_layer) ? TSR_DTYPE_Q5_K : TSR_DTYPE_Q4_K;
            else if (use_more_bits(i_layer, n_layer))
                t = TSR_DTYPE_Q6_K;
        } else if (f == FT_Q5_K_M && use_more_bits(i_layer, n_layer))
            t = TSR_DTYPE_Q6_K;
        else if (f == FT_Q4_K_S && !falcon && i_layer < n_layer / 8)
            t = TSR_DTYPE_Q5_K;
        else if ((f == FT_IQ4_NL || f == FT_IQ4_XS) && !info->has_imatrix && i_layer < n_layer / 8)
            t = TSR_DTYPE_Q5_K; /* seen on llama-quantize, dense and MoE */
        else if ((f == FT_Q4_0 || f == FT_Q5_0) && info->has_imatrix && i_layer < n_layer / 8)
            t = f == FT_Q4_0 ? TSR_DTYPE_Q4_1 : TSR_DTYPE_Q5_1; /* seen on llama-quantize, dense and MoE */
        st->i_ffn_down++;
    } else if (contains(name, "attn_output.weight")) {
        if (!falcon) {
            if (info->n_expert == 8) { /* exactly 8: llama-quantize leaves 4 and 16 alone */
                if (f == FT_Q2_K || f == FT_Q3_K_S || f == FT_Q3_K_M || f == FT_Q4_K_S ||
                    f == FT_Q4_K_M || f == FT_IQ4_NL || f == FT_IQ4_XS || f == FT_IQ3_XXS ||
                    f == FT_IQ3_XS || f == FT_IQ3_S || f == FT_IQ3_M)
                    t = TSR_DTYPE_Q5_K;
            } else {
                if (f == FT_Q2_K) t = TSR_DTYPE_Q3_K;
                else if (f == FT_IQ3_XXS) t = TSR_DTYPE_IQ3_S;
                else if (f == FT_Q3_K_M || f == FT_IQ3_M) t = TSR_DTYPE_Q4_K;
                else if (f == FT_Q3_K_L) t = TSR_DTYPE_Q5_K;
            }
        } else if (f == FT_Q3_K_L) {
            t = TSR_DTYPE_Q4_K;
        }
    } else if (contains(name, "ffn_gate")) {
        const int i_layer = layer_of(info, st->i_ffn_gate, name), n_layer = info->n_layer;
        if (f == FT_IQ3_XS && i_layer >= n_layer / 8 && i_layer < 7 * n_layer / 8) t = TSR_DTYPE_IQ3_XXS;
        st->i_ffn_gate++;
    } else if (contains(name, "ffn_up")) {
        const int i_layer = layer_of(info, st->i_ffn_up, name), n_layer = info->n_layer;
        if (f == FT_IQ3_XS && i_layer >= n_layer / 8 && i_layer < 7 * n_layer / 8) t = TSR_DTYPE_IQ3_XXS;
        st->i_ffn_up++;
    }

    if (ne[0] % dtype_traits_get(t)->block_size != 0) t = fallback_dtype(t, ne[0]);
    return t;
}

int32_t quant_row_fallback_dtype(int32_t dtype, int64_t nx) {
    const dtype_traits *tr = dtype_traits_get(dtype);
    if (!tr || nx % tr->block_size == 0) return dtype;
    return fallback_dtype(dtype, nx);
}
