/*
 * tessera-synth — write a synthetic GGUF of any supported architecture,
 * shape and weight type: random weights from a seed, the vocabulary copied
 * from another GGUF file (padded or trimmed to the requested size), and the
 * metadata keys and tensor names llama.cpp's converter writes for that
 * architecture (with the values of a published model where the architecture
 * has its own keys; --set and --unset change any key, to test bad files).
 *
 * Tensors are generated and quantized one at a time and streamed to the file,
 * so a 1.1B-parameter model needs memory for one tensor, not the model.
 * Usage: see --help.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "tensor/dtype.h"
#include "util/error.h"

enum { MAX_EDITS = 32 };

/* What an architecture's file holds beyond the llama layout. */
typedef struct synth_arch {
    const char *name;
    unsigned char qkv_bias;   /* attn_{q,k,v}.bias (qwen2) */
    unsigned char qk_norm;    /* attn_{q,k}_norm per head (qwen3, gemma3) */
    unsigned char post_norms; /* post_attention_norm, post_ffw_norm (gemma3) */
    unsigned char fused;      /* attn_qkv and gate|up in ffn_up (phi3) */
    unsigned char head_keys;  /* attention.key_length / value_length always written */
    unsigned char encoder;    /* 1 bert, 2 nomic-bert: post-norm encoder blocks (plan_encoder) */
    unsigned char moe;        /* MOE_*: mixture-of-experts FFN blocks */
    unsigned char granite;    /* the four Granite multipliers (granite, granitemoe) */
    unsigned char gptoss;     /* gpt-oss: sinks, biases everywhere, MXFP4 experts (plan_gptoss_layer) */
} synth_arch;

/* qk_norm: 1 per head [head size] (qwen3, gemma3), QK_NORM_FULL over the
 * whole q and k rows [heads x head size] (olmoe). moe: MOE_OPTIONAL, experts
 * with --experts (Mixtral is llama with experts); MOE_ALWAYS, an MoE family;
 * MOE_SHARED, one that may also have a shared expert (--shared-ffn);
 * MOE_EXP_FFN, one that writes expert_feed_forward_length (its experts' size
 * is not feed_forward_length); MOE_SHARED_GATE, a shared expert scaled by
 * sigmoid(ffn_gate_inp_shexp . x) and required (qwen2moe). */
enum { QK_NORM_FULL = 2 };
enum { MOE_OPTIONAL = 1, MOE_ALWAYS = 2, MOE_SHARED = 4, MOE_EXP_FFN = 8, MOE_SHARED_GATE = 16 };
static const synth_arch synth_archs[] = {
    {"llama", 0, 0, 0, 0, 0, 0, MOE_OPTIONAL, 0, 0},
    {"qwen2", 1, 0, 0, 0, 0, 0, 0, 0, 0},
    {"qwen2vl", 1, 0, 0, 0, 0, 0, 0, 0, 0},
    {"qwen3", 0, 1, 0, 0, 1, 0, 0, 0, 0},
    {"gemma3", 0, 1, 1, 0, 1, 0, 0, 0, 0},
    {"phi3", 0, 0, 0, 1, 0, 0, 0, 0, 0},
    {"smollm3", 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"granite", 0, 0, 0, 0, 0, 0, 0, 1, 0},
    {"mistral3", 0, 0, 0, 0, 1, 0, 0, 0, 0},
    {"bert", 0, 0, 0, 0, 0, 1, 0, 0, 0},
    {"nomic-bert", 0, 0, 0, 1, 0, 2, 0, 0, 0},
    {"qwen2moe", 1, 0, 0, 0, 0, 0, MOE_ALWAYS | MOE_EXP_FFN | MOE_SHARED | MOE_SHARED_GATE, 0, 0},
    {"qwen3moe", 0, 1, 0, 0, 1, 0, MOE_ALWAYS | MOE_EXP_FFN, 0, 0},
    {"olmoe", 0, QK_NORM_FULL, 0, 0, 0, 0, MOE_ALWAYS, 0, 0},
    {"granitemoe", 0, 0, 0, 0, 0, 0, MOE_ALWAYS | MOE_SHARED, 1, 0},
    {"gpt-oss", 1, 0, 0, 0, 1, 0, MOE_ALWAYS | MOE_EXP_FFN, 0, 1},
};
enum { ENC_BERT = 1, ENC_NOMIC = 2 };

/* Recurrent hybrids (plan_recurrent): their blocks are not the llama
 * layout, so they have a table of their own. */
enum { REC_LFM2 = 1, REC_MAMBA2 = 2, REC_GRANITEHYBRID = 3, REC_QWEN35 = 4, REC_QWEN35MOE = 5,
       REC_QWEN3NEXT = 6 };
/* qwen35's blocks: Gated DeltaNet and gated attention (qwen3next's DeltaNet
 * projections are fused differently, plan_deltanet) */
#define REC_IS_QWEN35(rec) ((rec) == REC_QWEN35 || (rec) == REC_QWEN35MOE || (rec) == REC_QWEN3NEXT)
static const synth_arch synth_rec_archs[] = {
    {"lfm2", 0, 0, 0, 0, 0, 0, 0, 0, 0}, {"mamba2", 0, 0, 0, 0, 0, 0, 0, 0, 0}, {"granitehybrid", 0, 0, 0, 0, 0, 0, MOE_OPTIONAL | MOE_SHARED, 0, 0},
    {"qwen35", 0, 0, 0, 0, 1, 0, 0, 0, 0},
    {"qwen35moe", 0, 0, 0, 0, 1, 0, MOE_ALWAYS | MOE_EXP_FFN | MOE_SHARED | MOE_SHARED_GATE, 0, 0},
    {"qwen3next", 0, 0, 0, 0, 1, 0, MOE_ALWAYS | MOE_EXP_FFN | MOE_SHARED | MOE_SHARED_GATE, 0, 0},
};
enum { N_SYNTH_REC_ARCHS = sizeof synth_rec_archs / sizeof synth_rec_archs[0] };
enum { N_SYNTH_ARCHS = sizeof synth_archs / sizeof synth_archs[0] };

typedef struct synth_opts {
    const char *out;
    const char *vocab_from;
    const char *arch;
    const synth_arch *sa;
    const char *type;
    int64_t dim, layers, heads, kv_heads, ffn, vocab, ctx, head_dim, rope_dims;
    int64_t experts, experts_used, expert_ffn, shared_ffn; /* MoE (0: a dense FFN) */
    int rec;                       /* REC_*, 0: not a recurrent hybrid */
    int64_t attn_every;            /* hybrids: layer il attends when il % attn_every == attn_every - 1 */
    int64_t ssm_groups, ssm_state, ssm_head_dim; /* mamba2, granitehybrid */
    int qkv_split; /* qwen3next: attn_qkv and attn_gate, not ssm_in */
    int gate_up_exps; /* MoE: the experts' gate and up as one ffn_gate_up_exps */
    uint64_t seed;
    float rope_base;
    int tied;
    int quiet;
    int reranker;     /* encoders: a classification head (cls, cls.output), pooling rank */
    int64_t pooling;  /* encoders: pooling_type (default: bert cls, nomic-bert mean) */
    const char *wpm_words; /* "a,b,c": whole words added to the built-in WordPiece vocabulary */
    const char *add_tokens; /* "a,b,c": user-defined tokens after the --vocab-from vocabulary */
    int64_t lora_rank;  /* > 0: write a LoRA adapter of this rank for the model, not the model */
    float lora_alpha;   /* its adapter.lora.alpha (default: 2 x rank) */
    const char *set[MAX_EDITS];   /* "KEY=VALUE" */
    const char *unset[MAX_EDITS]; /* "KEY" */
    int n_set, n_unset;
} synth_opts;

static void usage(FILE *out) {
    fprintf(out,
            "usage: tessera-synth -o OUT.gguf --vocab-from FILE [options]\n"
            "\n"
            "Writes a GGUF with random (seeded) weights and the keys and tensors of\n"
            "the architecture.\n"
            "\n"
            "  -o, --out FILE        output path (written to FILE.tmp, then renamed)\n"
            "  --vocab-from FILE     GGUF whose tokenizer.* keys are copied\n"
            "  --arch NAME           llama (default), qwen2, qwen3 (q/k norms), gemma3 (q/k\n"
            "                        norms, post norms, sliding window 512), phi3 (fused\n"
            "                        qkv and gate|up), smollm3, granite (multipliers of\n"
            "                        Granite 3: embedding 12, residual 0.22, attention\n"
            "                        1/head size, logits 1/8), mistral3 (YaRN factor 16 from\n"
            "                        context/16, log multiplier 1, temperature scale 0.1),\n"
            "                        qwen2moe (qwen2 with experts and a gated shared\n"
            "                        expert), qwen3moe (qwen3 with experts), olmoe (q/k norms over\n"
            "                        whole rows, experts, weights not renormalised),\n"
            "                        granitemoe (granite with experts), gpt-oss (attention\n"
            "                        sinks, biases, window 128 every other layer, YaRN 32,\n"
            "                        MXFP4 experts whatever --type says), qwen2vl (qwen2\n"
            "                        with M-RoPE: rope.dimension_sections splits the\n"
            "                        rotated pairs 1/4, 3/8, 3/8 as Qwen2-VL's 16/24/24),\n"
            "                        and the recurrent hybrids lfm2, mamba2, granitehybrid,\n"
            "                        qwen35, qwen35moe and qwen3next (below)\n"
            "  --type TYPE           weight type of 2-D tensors: F32 (default), F16, BF16,\n"
            "                        Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K,\n"
            "                        Q6_K, or the mixture Q4_K_M (Q4_K, with Q6_K for\n"
            "                        output and for attn_v/ffn_down in some layers)\n"
            "  --dim N               embedding size (default 256)\n"
            "  --layers N            blocks (default 4)\n"
            "  --heads N             attention heads (default 8)\n"
            "  --kv-heads N          KV heads (default = heads)\n"
            "  --ffn N               feed-forward size (default 768)\n"
            "  --head-dim N          head size (default dim/heads; written as key_length)\n"
            "  --rope-dims N         rotated dims per head (default: the head size)\n"
            "  --experts N           experts per MoE layer (qwen3moe, olmoe, granitemoe:\n"
            "                        default 8; llama, granitehybrid: none unless given)\n"
            "  --experts-used N      experts each token is routed to (default 2)\n"
            "  --expert-ffn N        an expert's feed-forward size (qwen3moe, written as\n"
            "                        expert_feed_forward_length; default --ffn / experts\n"
            "                        used; the other families' experts are --ffn wide)\n"
            "  --shared-ffn N        granitemoe, granitehybrid: a shared expert of this size beside the\n"
            "                        routed ones (default none); qwen2moe: its gated\n"
            "                        shared expert's size (default --ffn)\n"
            "  --vocab N             vocabulary size (default: the source's)\n"
            "  --ctx N               context length (default 4096)\n"
            "  --rope-base F         RoPE frequency base (default 10000)\n"
            "  --tied                no output.weight (tied to token_embd)\n"
            "  --reranker            bert: a classification head (cls, cls.output) and\n"
            "                        pooling_type rank\n"
            "  --pooling N           encoders: pooling_type (0 none, 1 mean, 2 cls, 3 last;\n"
            "                        default: bert 2, nomic-bert 1)\n"
            "  (bert and nomic-bert: bidirectional encoders with post-norms, token types and\n"
            "  learned positions (bert, GELU FFN) or NeoX rope (nomic-bert, SwiGLU FFN); without\n"
            "  --vocab-from they get a small built-in WordPiece vocabulary)\n"
            "  --add-tokens A,B,...  user-defined tokens appended to the --vocab-from\n"
            "                        vocabulary (%%XX is the byte XX: %%0A a newline, %%2C a\n"
            "                        comma): a multimodal model's\n"
            "                        image markers, e.g. <fake_token_around_image>\n"
            "  --wpm-words A,B,...   more whole words (lowercase) for that built-in vocabulary,\n"
            "                        after its own tokens (stand-ins whose token counts match\n"
            "                        a real model's on given sentences)\n"
            "  (lfm2: short-convolution blocks (l_cache 3) with attention blocks (q/k norms);\n"
            "  mamba2: Mamba-2 blocks only, inner size 2*dim; granitehybrid: Mamba-2 and\n"
            "  attention blocks, each with a SwiGLU FFN, and Granite's multipliers;\n"
            "  qwen35: Qwen3.5's Gated DeltaNet blocks (2*dim / --ssm-head-dim v heads) and\n"
            "  gated attention blocks (q/k norms, --rope-dims of the head), each with a\n"
            "  SwiGLU FFN; qwen35moe: the same with experts and a gated shared expert;\n"
            "  qwen3next: qwen35moe with the DeltaNet's projections fused per q/k head,\n"
            "  ssm_in (q, k, v, z) and ssm_ba (beta, alpha), v heads as wide as q/k heads)\n"
            "  --attn-every N        lfm2, granitehybrid, the qwen35s: every Nth block\n"
            "                        attends, the rest are recurrent (default 3; the\n"
            "                        qwen35s write it as full_attention_interval)\n"
            "  (the qwen35s: qwen35, qwen35moe and qwen3next)\n"
            "  --ssm-groups N        mamba2, granitehybrid: B/C groups; the qwen35s: q/k\n"
            "                        heads of the DeltaNet (default 1)\n"
            "  --ssm-state N         mamba2, granitehybrid: state size; the qwen35s: q/k\n"
            "                        head size (default 16)\n"
            "  --ssm-head-dim N      mamba2, granitehybrid: head size; the qwen35s: v head\n"
            "                        size (default 16; qwen3next: must be --ssm-state)\n"
            "  --qkv-split           qwen3next: the DeltaNet's q|k|v and z as attn_qkv and\n"
            "                        attn_gate (q, k, v each whole, as qwen35's), not fused\n"
            "                        per q/k head in ssm_in; llama.cpp reads either\n"
            "  --gate-up-exps        MoE files: each block's experts' gate and up as one\n"
            "                        tensor, ffn_gate_up_exps [dim, 2 x expert FFN, experts]\n"
            "                        (gate rows, then up rows), as newer converters write\n"
            "  --seed N              random seed (default 42)\n"
            "  --lora-rank R         write a LoRA adapter of rank R for the model the other\n"
            "                        options describe, instead of the model: llama.cpp's\n"
            "                        convert_lora_to_gguf.py layout (general.type adapter,\n"
            "                        <weight>.lora_a [n_in, R], .lora_b [R, n_out] for every\n"
            "                        matrix but the embeddings; --type F32, F16 or BF16)\n"
            "  --lora-alpha F        its adapter.lora.alpha (default 2 x R)\n"
            "  --set KEY=VALUE       set a metadata key (full name): true/false is a bool,\n"
            "                        an integer a u32 (i32 if negative), a number with '.',\n"
            "                        'e', or nan/inf an f32 (8.0, not 8), else a string;\n"
            "                        repeatable\n"
            "  --unset KEY           leave a metadata key out; repeatable\n"
            "  -q, --quiet           no progress on stderr\n"
            "  -h, --help            this text\n"
            "\n"
            "TinyLlama-1.1B shape: --dim 2048 --layers 22 --heads 32 --kv-heads 4 --ffn 5632 --vocab 32000\n");
}

static int parse_i64(const char *flag, const char *s, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s || v <= 0)
        return fprintf(stderr, "tessera-synth: %s expects a positive integer, got '%s'\n", flag, s), -1;
    *out = v;
    return 0;
}

static int check_moe(synth_opts *o);

static int parse_args(int argc, char **argv, synth_opts *o) {
    *o = (synth_opts){.arch = "llama", .type = "F32", .dim = 256, .layers = 4, .heads = 8,
                      .ffn = 768, .ctx = 4096, .seed = 42, .rope_base = 10000.0f, .pooling = -1,
                      .attn_every = 3, .ssm_groups = 1, .ssm_state = 16, .ssm_head_dim = 16};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t n;
#define NEED_VALUE()                                                                        \
    do {                                                                                    \
        if (!v) return fprintf(stderr, "tessera-synth: %s needs a value\n", a), -1;         \
        i++;                                                                                \
    } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "-o") || !strcmp(a, "--out")) {
            NEED_VALUE();
            o->out = v;
        } else if (!strcmp(a, "--vocab-from")) {
            NEED_VALUE();
            o->vocab_from = v;
        } else if (!strcmp(a, "--arch")) {
            NEED_VALUE();
            o->arch = v;
        } else if (!strcmp(a, "--type")) {
            NEED_VALUE();
            o->type = v;
        } else if (!strcmp(a, "--set") || !strcmp(a, "--unset")) {
            NEED_VALUE();
            int set = !strcmp(a, "--set");
            if ((set ? o->n_set : o->n_unset) == MAX_EDITS)
                return fprintf(stderr, "tessera-synth: more than %d %s options\n", MAX_EDITS, a), -1;
            if (set && (!strchr(v, '=') || v[0] == '='))
                return fprintf(stderr, "tessera-synth: --set expects KEY=VALUE, got '%s'\n", v), -1;
            if (set)
                o->set[o->n_set++] = v;
            else
                o->unset[o->n_unset++] = v;
        } else if (!strcmp(a, "--tied")) {
            o->tied = 1;
        } else if (!strcmp(a, "--qkv-split")) {
            o->qkv_split = 1;
        } else if (!strcmp(a, "--gate-up-exps")) {
            o->gate_up_exps = 1;
        } else if (!strcmp(a, "--reranker")) {
            o->reranker = 1;
        } else if (!strcmp(a, "--wpm-words")) {
            NEED_VALUE();
            o->wpm_words = v;
        } else if (!strcmp(a, "--add-tokens")) {
            NEED_VALUE();
            o->add_tokens = v;
        } else if (!strcmp(a, "--pooling")) {
            NEED_VALUE();
            char *end;
            errno = 0;
            o->pooling = strtoll(v, &end, 10);
            if (errno || *end || end == v || o->pooling < 0 || o->pooling > 4)
                return fprintf(stderr, "tessera-synth: --pooling expects 0..4, got '%s'\n", v), -1;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            o->quiet = 1;
        } else if (!strcmp(a, "--rope-base")) {
            NEED_VALUE();
            char *end;
            o->rope_base = strtof(v, &end);
            if (*end || o->rope_base <= 0)
                return fprintf(stderr, "tessera-synth: --rope-base expects a positive number, got '%s'\n", v), -1;
        } else if (!strcmp(a, "--lora-alpha")) {
            NEED_VALUE();
            char *end;
            o->lora_alpha = strtof(v, &end);
            if (*end || end == v || !(o->lora_alpha >= 0))
                return fprintf(stderr, "tessera-synth: --lora-alpha expects a number >= 0, got '%s'\n", v), -1;
        } else if (!strcmp(a, "--seed")) {
            NEED_VALUE();
            char *end;
            errno = 0;
            o->seed = strtoull(v, &end, 10);
            if (errno || *end || end == v)
                return fprintf(stderr, "tessera-synth: --seed expects an integer, got '%s'\n", v), -1;
        } else {
            int64_t *dst = !strcmp(a, "--dim")        ? &o->dim
                           : !strcmp(a, "--layers")   ? &o->layers
                           : !strcmp(a, "--heads")    ? &o->heads
                           : !strcmp(a, "--kv-heads") ? &o->kv_heads
                           : !strcmp(a, "--ffn")      ? &o->ffn
                           : !strcmp(a, "--vocab")    ? &o->vocab
                           : !strcmp(a, "--ctx")      ? &o->ctx
                           : !strcmp(a, "--head-dim") ? &o->head_dim
                           : !strcmp(a, "--rope-dims") ? &o->rope_dims
                           : !strcmp(a, "--experts") ? &o->experts
                           : !strcmp(a, "--experts-used") ? &o->experts_used
                           : !strcmp(a, "--expert-ffn") ? &o->expert_ffn
                           : !strcmp(a, "--shared-ffn") ? &o->shared_ffn
                           : !strcmp(a, "--attn-every") ? &o->attn_every
                           : !strcmp(a, "--ssm-groups") ? &o->ssm_groups
                           : !strcmp(a, "--ssm-state") ? &o->ssm_state
                           : !strcmp(a, "--ssm-head-dim") ? &o->ssm_head_dim
                           : !strcmp(a, "--lora-rank") ? &o->lora_rank
                                                      : NULL;
            if (!dst) return fprintf(stderr, "tessera-synth: unknown option '%s' (see --help)\n", a), -1;
            NEED_VALUE();
            if (parse_i64(a, v, &n)) return -1;
            *dst = n;
        }
#undef NEED_VALUE
    }
    if (!o->out) return fprintf(stderr, "tessera-synth: -o OUT.gguf is required\n"), -1;
    for (int i = 0; i < N_SYNTH_ARCHS; i++)
        if (!strcmp(o->arch, synth_archs[i].name)) o->sa = &synth_archs[i];
    for (int i = 0; i < N_SYNTH_REC_ARCHS; i++)
        if (!strcmp(o->arch, synth_rec_archs[i].name)) {
            o->sa = &synth_rec_archs[i];
            o->rec = REC_LFM2 + i;
        }
    if (!o->vocab_from && !(o->sa && o->sa->encoder))
        return fprintf(stderr, "tessera-synth: --vocab-from FILE is required\n"), -1;
    if (o->reranker && !(o->sa && o->sa->encoder == ENC_BERT))
        return fprintf(stderr, "tessera-synth: --reranker needs --arch bert\n"), -1;
    if (o->add_tokens && !o->vocab_from)
        return fprintf(stderr, "tessera-synth: --add-tokens adds to a --vocab-from vocabulary\n"), -1;
    if (o->wpm_words && (o->vocab_from || !(o->sa && o->sa->encoder)))
        return fprintf(stderr, "tessera-synth: --wpm-words adds to the built-in vocabulary of bert and "
                               "nomic-bert (no --vocab-from)\n"), -1;
    if (o->pooling < 0) o->pooling = o->reranker ? 4 : o->sa && o->sa->encoder == ENC_NOMIC ? 1 : 2;
    if (!o->sa) {
        char list[256] = "";
        for (int i = 0; i < N_SYNTH_ARCHS; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", synth_archs[i].name);
        for (int i = 0; i < N_SYNTH_REC_ARCHS; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), ", %s", synth_rec_archs[i].name);
        return fprintf(stderr, "tessera-synth: --arch '%s' is not supported (%s)\n", o->arch, list), -1;
    }
    if (o->lora_rank && !o->lora_alpha) o->lora_alpha = 2.0f * (float)o->lora_rank;
    if (!o->kv_heads) o->kv_heads = o->heads;
    if (!o->head_dim && o->dim % o->heads)
        return fprintf(stderr, "tessera-synth: --dim %" PRId64 " is not a multiple of --heads %" PRId64 "\n",
                       o->dim, o->heads), -1;
    if (!o->head_dim) o->head_dim = o->dim / o->heads;
    if (!o->rope_dims) o->rope_dims = o->head_dim;
    if (o->heads % o->kv_heads)
        return fprintf(stderr, "tessera-synth: --heads %" PRId64 " is not a multiple of --kv-heads %" PRId64 "\n",
                       o->heads, o->kv_heads), -1;
    if (o->head_dim % 2)
        return fprintf(stderr, "tessera-synth: head size %" PRId64 " must be even\n", o->head_dim), -1;
    if (o->rec >= REC_MAMBA2 && ((2 * o->dim) % o->ssm_head_dim || ((2 * o->dim) / o->ssm_head_dim) % o->ssm_groups))
        return fprintf(stderr, "tessera-synth: inner size %" PRId64 " is not whole heads of --ssm-head-dim %" PRId64
                               " in --ssm-groups %" PRId64 "\n", 2 * o->dim, o->ssm_head_dim, o->ssm_groups), -1;
    if (o->qkv_split && o->rec != REC_QWEN3NEXT)
        return fprintf(stderr, "tessera-synth: --qkv-split is for --arch qwen3next\n"), -1;
    if (o->rec == REC_QWEN3NEXT && o->ssm_head_dim != o->ssm_state)
        return fprintf(stderr, "tessera-synth: qwen3next: --ssm-head-dim %" PRId64 " must be --ssm-state %" PRId64
                               " (llama.cpp sizes v heads as q/k heads)\n", o->ssm_head_dim, o->ssm_state), -1;
    if (o->rope_dims % 2 || o->rope_dims > o->head_dim)
        return fprintf(stderr, "tessera-synth: --rope-dims %" PRId64 " must be even and at most the head size %" PRId64
                               "\n", o->rope_dims, o->head_dim), -1;
    return check_moe(o);
}

/* The expert options against the architecture: defaults for an MoE family,
 * and a refusal naming the flag the architecture has no place for. */
static int check_moe(synth_opts *o) {
    const unsigned moe = o->sa->moe;
    if (!moe && (o->experts || o->experts_used || o->expert_ffn || o->shared_ffn || o->gate_up_exps))
        return fprintf(stderr, "tessera-synth: --arch %s has no experts (--experts and the like)\n", o->arch), -1;
    if (o->sa->qk_norm == QK_NORM_FULL && (o->kv_heads != o->heads || o->head_dim * o->heads != o->dim))
        return fprintf(stderr, "tessera-synth: --arch %s: llama.cpp reads its q/k norms as wide as the embedding, "
                               "so --kv-heads must equal --heads and the head size be --dim / --heads\n", o->arch), -1;
    if (!moe) return 0;
    if (o->gate_up_exps && (!o->experts && (moe & MOE_OPTIONAL)))
        return fprintf(stderr, "tessera-synth: --gate-up-exps needs --experts N\n"), -1;
    if (o->gate_up_exps && o->sa->gptoss)
        return fprintf(stderr, "tessera-synth: --gate-up-exps: gpt-oss's experts are not written fused\n"), -1;
    if (!o->experts && (moe & MOE_OPTIONAL)) {
        if (o->experts_used || o->expert_ffn || o->shared_ffn)
            return fprintf(stderr, "tessera-synth: --arch %s: the expert options need --experts N\n", o->arch), -1;
        return 0;
    }
    if (!o->experts) o->experts = 8;
    if (!o->experts_used) o->experts_used = o->experts < 2 ? o->experts : 2;
    if (o->experts_used > o->experts)
        return fprintf(stderr, "tessera-synth: --experts-used %" PRId64 " is more than --experts %" PRId64 "\n",
                       o->experts_used, o->experts), -1;
    if (o->expert_ffn && !(moe & MOE_EXP_FFN))
        return fprintf(stderr, "tessera-synth: --arch %s: experts are --ffn wide (no --expert-ffn)\n", o->arch), -1;
    if (!o->expert_ffn) o->expert_ffn = (moe & MOE_EXP_FFN) ? o->ffn / o->experts_used : o->ffn;
    if (o->expert_ffn < 1) o->expert_ffn = 1;
    if (o->shared_ffn && !(moe & MOE_SHARED))
        return fprintf(stderr, "tessera-synth: --arch %s has no shared expert (--shared-ffn)\n", o->arch), -1;
    if (!o->shared_ffn && (moe & MOE_SHARED_GATE)) o->shared_ffn = o->ffn;
    return 0;
}

/* ------------------------------------------------------------ randomness */

/* splitmix64: tiny, well mixed, the same on every machine. */
static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-a, a): a = std * sqrt(3) gives standard deviation std. */
static void fill_uniform(float *x, int64_t n, float std, uint64_t *state) {
    float a = std * 1.7320508f;
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(splitmix64(state) >> 11) * (1.0 / 9007199254740992.0);
        x[i] = (float)((2.0 * u - 1.0) * a);
    }
}

/* ---------------------------------------------------------------- tensors */

typedef struct synth_tensor {
    char name[64];
    int32_t dtype;
    int n_dims;
    int64_t ne[3];
    float center; /* values are center + uniform noise of standard deviation std */
    float std;
} synth_tensor;

/* Norm weights: 1 +- noise, so a norm whose weight is ignored shows. */
enum { NORM = -1 };
static const float norm_std = 0.1f;

/* llama.cpp's Q4_K_M rule for which layers get more bits: the first and last
 * eighth of the layers, and every third one in between. */
static int use_more_bits(int64_t il, int64_t n) {
    return il < n / 8 || il >= 7 * n / 8 || (il - n / 8) % 3 == 2;
}

static int32_t pick_type(const synth_opts *o, int32_t base, int mix, const char *what, int64_t il) {
    if (!mix) return base;
    if (!strcmp(what, "output")) return TSR_DTYPE_Q6_K;
    if ((!strcmp(what, "attn_v") || !strcmp(what, "ffn_down")) && use_more_bits(il, o->layers))
        return TSR_DTYPE_Q6_K;
    return base;
}

/* std NORM: a norm weight (1 +- noise). */
static int add_tensor(synth_tensor *ts, int *n, const char *name, int32_t dtype, int n_dims,
                      int64_t ne0, int64_t ne1, float std) {
    synth_tensor *t = &ts[(*n)++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = n_dims == 1 ? TSR_DTYPE_F32 : dtype;
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = 1;
    t->center = std == NORM ? 1.0f : 0.0f;
    t->std = std == NORM ? norm_std : std;
    if (n_dims >= 2 && dtype_row_bytes(t->dtype, ne0) == 0) {
        fprintf(stderr, "tessera-synth: tensor '%s': row of %" PRId64 " elements cannot be stored as %s "
                        "(block size %" PRId64 ")\n",
                name, ne0, dtype_name(t->dtype), dtype_traits_get(t->dtype)->block_size);
        return -1;
    }
    return 0;
}

/* A stack of ne2 matrices [ne0, ne1] (the experts of an MoE layer). */
static int add_tensor_3d(synth_tensor *ts, int *n, const char *name, int32_t dtype, int64_t ne0, int64_t ne1,
                         int64_t ne2, float std) {
    if (add_tensor(ts, n, name, dtype, 2, ne0, ne1, std)) return -1;
    ts[*n - 1].n_dims = 3;
    ts[*n - 1].ne[2] = ne2;
    return 0;
}

/* A post-norm encoder (llama.cpp's bert / nomic-bert tensor names): input
 * LayerNorm, attention (biased q/k/v for bert, fused unbiased qkv for
 * nomic-bert), LayerNorms after each residual add, GELU up/down with biases
 * (bert) or SwiGLU (nomic-bert), and a reranker's classification head. */
static int plan_encoder(const synth_opts *o, int32_t base, synth_tensor *ts, int *n) {
    const int64_t E = o->dim, F = o->ffn, V = o->vocab;
    const int bert = o->sa->encoder == ENC_BERT;
    const float s_in = 1.0f / sqrtf((float)E), s_ff = 1.0f / sqrtf((float)F);
    char name[64];
    *n = 0;
    if (add_tensor(ts, n, "token_embd.weight", base, 2, E, V, 1.0f) ||
        add_tensor(ts, n, "token_types.weight", TSR_DTYPE_F32, 2, E, 2, 0.5f) ||
        (bert && add_tensor(ts, n, "position_embd.weight", TSR_DTYPE_F32, 2, E, o->ctx, 0.5f)) ||
        add_tensor(ts, n, "token_embd_norm.weight", base, 1, E, 1, NORM) ||
        add_tensor(ts, n, "token_embd_norm.bias", base, 1, E, 1, 0.02f))
        return -1;
    for (int64_t il = 0; il < o->layers; il++) {
#define T(suffix, nd, a, b, std)                                                           \
    do {                                                                                   \
        snprintf(name, sizeof name, "blk.%" PRId64 ".%s", il, suffix);                     \
        if (add_tensor(ts, n, name, base, nd, a, b, std)) return -1;                       \
    } while (0)
        if (bert) {
            T("attn_q.weight", 2, E, E, s_in);
            T("attn_q.bias", 1, E, 1, 0.02f);
            T("attn_k.weight", 2, E, E, s_in);
            T("attn_k.bias", 1, E, 1, 0.02f);
            T("attn_v.weight", 2, E, E, s_in);
            T("attn_v.bias", 1, E, 1, 0.02f);
        } else {
            T("attn_qkv.weight", 2, E, 3 * E, s_in);
        }
        T("attn_output.weight", 2, E, E, s_in);
        if (bert) T("attn_output.bias", 1, E, 1, 0.02f);
        T("attn_output_norm.weight", 1, E, 1, NORM);
        T("attn_output_norm.bias", 1, E, 1, 0.02f);
        T("ffn_up.weight", 2, E, F, s_in);
        if (bert) T("ffn_up.bias", 1, F, 1, 0.02f);
        if (!bert) T("ffn_gate.weight", 2, E, F, s_in);
        T("ffn_down.weight", 2, F, E, s_ff);
        if (bert) T("ffn_down.bias", 1, E, 1, 0.02f);
        T("layer_output_norm.weight", 1, E, 1, NORM);
        T("layer_output_norm.bias", 1, E, 1, 0.02f);
#undef T
    }
    if (o->reranker && (add_tensor(ts, n, "cls.weight", base, 2, E, E, s_in) ||
                        add_tensor(ts, n, "cls.bias", base, 1, E, 1, 0.02f) ||
                        add_tensor(ts, n, "cls.output.weight", base, 2, E, 1, s_in) ||
                        add_tensor(ts, n, "cls.output.bias", base, 1, 1, 1, 0.02f)))
        return -1;
    return 0;
}

/* ------------------------------------------------------------ recurrent hybrids */

/* Whether block il of a hybrid attends (the others are recurrent): every
 * attn_every-th; mamba2 has no attention. */
static int rec_layer_attends(const synth_opts *o, int64_t il) {
    if (o->rec == REC_MAMBA2) return 0;
    return il % o->attn_every == o->attn_every - 1;
}

/* One Gated DeltaNet block of qwen35 (Qwen3.5's "linear attention"), as
 * llama.cpp names it: q, k, v in one product (attn_qkv: Hk heads of Dk for
 * q and k, Hv heads of Dv for v), the output gate z (attn_gate), beta and
 * the decay's input per v head (ssm_beta, ssm_alpha), the short
 * convolution over q|k|v, A and dt's bias per v head, the gated RMS norm
 * over each head's Dv, the output product. Hk = --ssm-groups, Dk =
 * --ssm-state, Dv = --ssm-head-dim, Hv = 2 dim / Dv. qwen3next: beta and
 * the decay's input in one product (ssm_ba, per q/k head: beta, then
 * alpha of its Hv / Hk v heads), and q|k|v|z in another (ssm_in, per q/k
 * head: q, k, then v and z of its v heads) or, with --qkv-split, as
 * qwen35's attn_qkv and attn_gate. */
static int plan_deltanet(const synth_opts *o, int32_t base, int64_t il, synth_tensor *ts, int *n) {
    const int64_t E = o->dim, Hk = o->ssm_groups, Dk = o->ssm_state, Dv = o->ssm_head_dim;
    const int64_t Hv = 2 * E / Dv, QKV = 2 * Hk * Dk + Hv * Dv;
    const float s_in = 1.0f / sqrtf((float)E);
    char name[64];
#define T(suffix, dt, nd, a, b, std)                                                       \
    do {                                                                                   \
        snprintf(name, sizeof name, "blk.%" PRId64 ".%s", il, suffix);                     \
        if (add_tensor(ts, n, name, dt, nd, a, b, std)) return -1;                         \
    } while (0)
    if (o->rec == REC_QWEN3NEXT && !o->qkv_split) {
        T("ssm_in.weight", base, 2, E, QKV + Hv * Dv, s_in);
        T("ssm_ba.weight", base, 2, E, 2 * Hv, s_in);
    } else if (o->rec == REC_QWEN3NEXT) {
        T("attn_qkv.weight", base, 2, E, QKV, s_in);
        T("attn_gate.weight", base, 2, E, Hv * Dv, s_in);
        T("ssm_ba.weight", base, 2, E, 2 * Hv, s_in);
    } else {
        T("attn_qkv.weight", base, 2, E, QKV, s_in);
        T("attn_gate.weight", base, 2, E, Hv * Dv, s_in);
        T("ssm_beta.weight", base, 2, E, Hv, s_in);
        T("ssm_alpha.weight", base, 2, E, Hv, s_in);
    }
    T("ssm_conv1d.weight", TSR_DTYPE_F32, 2, 4, QKV, 0.5f);
    T("ssm_dt.bias", TSR_DTYPE_F32, 1, Hv, 1, 1.0f);
    T("ssm_a", TSR_DTYPE_F32, 1, Hv, 1, 0.5f);
    ts[*n - 1].center = -1.0f; /* A = -exp(A_log) < 0 */
    T("ssm_norm.weight", TSR_DTYPE_F32, 1, Dv, 1, NORM);
    T("ssm_out.weight", base, 2, Hv * Dv, E, 1.0f / sqrtf((float)(Hv * Dv)));
#undef T
    return 0;
}

/* llama.cpp's tensor names of LFM2 (shortconv.*, token_embd_norm as the
 * final norm), Mamba-2 (ssm_*) and Granite 4 H (Mamba-2 or attention, each
 * block with a SwiGLU FFN). */
static int plan_recurrent(const synth_opts *o, int32_t base, synth_tensor *ts, int *n) {
    const int rec = o->rec;
    const int64_t E = o->dim, D = o->head_dim, Q = D * o->heads, KV = D * o->kv_heads, F = o->ffn, V = o->vocab;
    const int64_t DI = 2 * E, N = o->ssm_state, G = o->ssm_groups, H = DI / o->ssm_head_dim;
    const int64_t CC = DI + 2 * G * N; /* conv channels: x, B, C */
    const float s_in = 1.0f / sqrtf((float)E), s_q = 1.0f / sqrtf((float)Q), s_ff = 1.0f / sqrtf((float)F);
    char name[64];
    *n = 0;
    if (add_tensor(ts, n, "token_embd.weight", base, 2, E, V, 1.0f)) return -1;
    for (int64_t il = 0; il < o->layers; il++) {
/* T: a tensor of the weight type; TF: one kept F32 whatever --type says (rows
 * of 3-4 convolution taps, per-head numbers, norms), as llama.cpp's
 * quantizer keeps them */
#define TT(suffix, dt, nd, a, b, std)                                                      \
    do {                                                                                   \
        snprintf(name, sizeof name, "blk.%" PRId64 ".%s", il, suffix);                     \
        if (add_tensor(ts, n, name, dt, nd, a, b, std)) return -1;                         \
    } while (0)
#define T(suffix, nd, a, b, std) TT(suffix, base, nd, a, b, std)
#define TF(suffix, nd, a, b, std) TT(suffix, TSR_DTYPE_F32, nd, a, b, std)
        T("attn_norm.weight", 1, E, 1, NORM);
        if (rec_layer_attends(o, il)) {
            T("attn_q.weight", 2, E, REC_IS_QWEN35(rec) ? 2 * Q : Q, s_in); /* qwen35: q, then its gate */
            T("attn_k.weight", 2, E, KV, s_in);
            T("attn_v.weight", 2, E, KV, s_in);
            if (rec == REC_LFM2 || REC_IS_QWEN35(rec)) {
                T("attn_q_norm.weight", 1, D, 1, NORM);
                T("attn_k_norm.weight", 1, D, 1, NORM);
            }
            T("attn_output.weight", 2, Q, E, s_q);
        } else if (REC_IS_QWEN35(rec)) {
            if (plan_deltanet(o, base, il, ts, n)) return -1;
        } else if (rec == REC_LFM2) {
            T("shortconv.in_proj.weight", 2, E, 3 * E, s_in);
            TF("shortconv.conv.weight", 2, 3, E, 0.5f);
            T("shortconv.out_proj.weight", 2, E, E, s_in);
        } else {
            T("ssm_in.weight", 2, E, 2 * DI + 2 * G * N + H, s_in);
            TF("ssm_conv1d.weight", 2, 4, CC, 0.5f);
            T("ssm_conv1d.bias", 1, CC, 1, 0.1f);
            T("ssm_dt.bias", 1, H, 1, 1.0f);
            TF("ssm_a", 2, 1, H, 0.5f);
            ts[*n - 1].center = -1.0f; /* A = -exp(A_log) < 0 */
            TF("ssm_d", 2, 1, H, NORM);
            TF("ssm_norm.weight", 2, DI / G, G, NORM);
            T("ssm_out.weight", 2, DI, E, 1.0f / sqrtf((float)DI));
        }
        if (rec != REC_MAMBA2)
            T(REC_IS_QWEN35(rec) ? "post_attention_norm.weight" : "ffn_norm.weight", 1, E, 1, NORM);
        if (o->experts) {
            /* qwen35moe, granitehybrid: the router (F32), the experts
             * stacked, the shared expert (with qwen35moe's sigmoid gate) */
            const int64_t X = o->experts, Fx = o->expert_ffn, Fs = o->shared_ffn;
            TF("ffn_gate_inp.weight", 2, E, X, s_in);
            if (o->gate_up_exps) {
                snprintf(name, sizeof name, "blk.%" PRId64 ".ffn_gate_up_exps.weight", il);
                if (add_tensor_3d(ts, n, name, base, E, 2 * Fx, X, s_in)) return -1;
            } else {
                snprintf(name, sizeof name, "blk.%" PRId64 ".ffn_gate_exps.weight", il);
                if (add_tensor_3d(ts, n, name, base, E, Fx, X, s_in)) return -1;
                snprintf(name, sizeof name, "blk.%" PRId64 ".ffn_up_exps.weight", il);
                if (add_tensor_3d(ts, n, name, base, E, Fx, X, s_in)) return -1;
            }
            snprintf(name, sizeof name, "blk.%" PRId64 ".ffn_down_exps.weight", il);
            if (add_tensor_3d(ts, n, name, base, Fx, E, X, 1.0f / sqrtf((float)Fx))) return -1;
            if (Fs && (o->sa->moe & MOE_SHARED_GATE)) T("ffn_gate_inp_shexp.weight", 1, E, 1, s_in);
            if (Fs) {
                T("ffn_gate_shexp.weight", 2, E, Fs, s_in);
                T("ffn_up_shexp.weight", 2, E, Fs, s_in);
                T("ffn_down_shexp.weight", 2, Fs, E, 1.0f / sqrtf((float)Fs));
            }
        } else if (rec != REC_MAMBA2) {
            T("ffn_gate.weight", 2, E, F, s_in);
            T("ffn_up.weight", 2, E, F, s_in);
            T("ffn_down.weight", 2, F, E, s_ff);
        }
#undef T
#undef TF
#undef TT
    }
    if (add_tensor(ts, n, rec == REC_LFM2 ? "token_embd_norm.weight" : "output_norm.weight", base, 1, E, 1, NORM))
        return -1;
    if (!o->tied && add_tensor(ts, n, "output.weight", base, 2, E, V, s_in)) return -1;
    return 0;
}

/* The keys of the recurrent architectures beyond write_metadata's: the
 * per-block KV head counts (0: recurrent block), LFM2's l_cache, Mamba-2's
 * ssm.* sizes, Granite's multipliers. */
static int write_recurrent_metadata(gguf_writer *w, const synth_opts *o) {
    const int rec = o->rec;
    char key[128];
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", o->arch, suffix), key)
    uint32_t *kv = calloc((size_t)o->layers, sizeof *kv);
    if (!kv) return error_set("out of memory");
    for (int64_t il = 0; il < o->layers; il++) kv[il] = rec_layer_attends(o, il) ? (uint32_t)o->kv_heads : 0;
    int rc = rec != REC_MAMBA2 && !REC_IS_QWEN35(rec) && /* qwen35: full_attention_interval says */
             (gguf_writer_remove_key(w, KEY("attention.head_count_kv")) ||
              gguf_writer_set_arr(w, KEY("attention.head_count_kv"), GGUF_TYPE_UINT32, kv, (uint64_t)o->layers));
    free(kv);
    if (!rc && rec == REC_LFM2) rc = gguf_writer_set_u32(w, KEY("shortconv.l_cache"), 3);
    if (!rc && REC_IS_QWEN35(rec)) {
        const int64_t DI = 2 * o->dim;
        rc = gguf_writer_set_u32(w, KEY("ssm.conv_kernel"), 4) ||
             gguf_writer_set_u32(w, KEY("ssm.inner_size"), (uint32_t)DI) ||
             gguf_writer_set_u32(w, KEY("ssm.state_size"), (uint32_t)o->ssm_state) ||
             gguf_writer_set_u32(w, KEY("ssm.time_step_rank"), (uint32_t)(DI / o->ssm_head_dim)) ||
             gguf_writer_set_u32(w, KEY("ssm.group_count"), (uint32_t)o->ssm_groups) ||
             gguf_writer_set_u32(w, KEY("full_attention_interval"), (uint32_t)o->attn_every);
        /* Qwen3.5's multimodal rope sections (t, h, w, -) over the rotated
         * pairs: text positions are the same in all of them */
        const int32_t half = (int32_t)(o->rope_dims / 2);
        const int32_t sec[4] = {half - 2 * (half / 3), half / 3, half / 3, 0};
        if (!rc && rec != REC_QWEN3NEXT) /* Qwen3-Next is text only */
            rc = gguf_writer_set_arr(w, KEY("rope.dimension_sections"), GGUF_TYPE_INT32, sec, 4);
    }
    if (!rc && (rec == REC_MAMBA2 || rec == REC_GRANITEHYBRID)) {
        const int64_t DI = 2 * o->dim;
        rc = gguf_writer_set_u32(w, KEY("ssm.conv_kernel"), 4) ||
             gguf_writer_set_u32(w, KEY("ssm.inner_size"), (uint32_t)DI) ||
             gguf_writer_set_u32(w, KEY("ssm.state_size"), (uint32_t)o->ssm_state) ||
             gguf_writer_set_u32(w, KEY("ssm.time_step_rank"), (uint32_t)(DI / o->ssm_head_dim)) ||
             gguf_writer_set_u32(w, KEY("ssm.group_count"), (uint32_t)o->ssm_groups);
    }
    if (!rc && rec == REC_MAMBA2) /* no attention, no FFN */
        rc = gguf_writer_remove_key(w, KEY("attention.head_count")) ||
             gguf_writer_remove_key(w, KEY("attention.head_count_kv")) ||
             gguf_writer_remove_key(w, KEY("feed_forward_length")) ||
             gguf_writer_remove_key(w, KEY("rope.dimension_count")) ||
             gguf_writer_remove_key(w, KEY("rope.freq_base"));
    if (!rc && rec == REC_GRANITEHYBRID) /* Granite 4.0 H's multipliers */
        rc = gguf_writer_set_f32(w, KEY("embedding_scale"), 12.0f) ||
             gguf_writer_set_f32(w, KEY("residual_scale"), 0.22f) ||
             gguf_writer_set_f32(w, KEY("attention.scale"), 1.0f / (float)o->head_dim) ||
             gguf_writer_set_f32(w, KEY("logit_scale"), 8.0f);
#undef KEY
    return rc ? -1 : 0;
}

/* One gpt-oss block as llama.cpp's converter writes it: biases on q, k, v,
 * o, the router and every expert; one sink logit per head (attn_sinks);
 * post_attention_norm as the FFN's pre-norm; the experts in MXFP4 (as
 * OpenAI publishes them) whatever --type says for the rest. */
static int plan_gptoss_layer(const synth_opts *o, int32_t base, int64_t il, synth_tensor *ts, int *n) {
    const int64_t E = o->dim, D = o->head_dim, Q = D * o->heads, KV = D * o->kv_heads;
    const int64_t X = o->experts, Fx = o->expert_ffn;
    const float s_in = 1.0f / sqrtf((float)E), s_q = 1.0f / sqrtf((float)Q), s_fx = 1.0f / sqrtf((float)Fx);
    char name[64];
#define G(suffix, dtype, nd, a, b, std)                                          \
    do {                                                                         \
        snprintf(name, sizeof name, "blk.%" PRId64 ".%s", il, suffix);           \
        if (add_tensor(ts, n, name, dtype, nd, a, b, std)) return -1;            \
    } while (0)
#define G3(suffix, a, b, std)                                                                    \
    do {                                                                                         \
        snprintf(name, sizeof name, "blk.%" PRId64 ".%s", il, suffix);                           \
        if (add_tensor_3d(ts, n, name, TSR_DTYPE_MXFP4, a, b, X, std)) return -1;                \
    } while (0)
    G("attn_norm.weight", base, 1, E, 1, NORM);
    G("attn_q.weight", base, 2, E, Q, s_in);
    G("attn_q.bias", base, 1, Q, 1, 0.1f);
    G("attn_k.weight", base, 2, E, KV, s_in);
    G("attn_k.bias", base, 1, KV, 1, 0.1f);
    G("attn_v.weight", base, 2, E, KV, s_in);
    G("attn_v.bias", base, 1, KV, 1, 0.1f);
    G("attn_output.weight", base, 2, Q, E, s_q);
    G("attn_output.bias", base, 1, E, 1, 0.1f);
    G("attn_sinks.weight", base, 1, o->heads, 1, 1.0f);
    G("post_attention_norm.weight", base, 1, E, 1, NORM);
    G("ffn_gate_inp.weight", TSR_DTYPE_F32, 2, E, X, s_in);
    G("ffn_gate_inp.bias", TSR_DTYPE_F32, 1, X, 1, 0.5f);
    /* gate and up scaled up so the clamps at +-7 are met now and then */
    G3("ffn_gate_exps.weight", E, Fx, 4.0f * s_in);
    G3("ffn_up_exps.weight", E, Fx, 4.0f * s_in);
    G3("ffn_down_exps.weight", Fx, E, s_fx);
    G("ffn_gate_exps.bias", TSR_DTYPE_F32, 2, Fx, X, 0.5f);
    G("ffn_up_exps.bias", TSR_DTYPE_F32, 2, Fx, X, 0.5f);
    G("ffn_down_exps.bias", TSR_DTYPE_F32, 2, E, X, 0.1f);
#undef G
#undef G3
    return 0;
}

static int plan_tensors(const synth_opts *o, int32_t base, int mix, synth_tensor *ts, int *n) {
    const synth_arch *sa = o->sa;
    if (sa->encoder) return plan_encoder(o, base, ts, n);
    if (o->rec) return plan_recurrent(o, base, ts, n);
    const int64_t E = o->dim, D = o->head_dim, Q = D * o->heads, KV = D * o->kv_heads, F = o->ffn, V = o->vocab;
    const float s_in = 1.0f / sqrtf((float)E), s_q = 1.0f / sqrtf((float)Q), s_ff = 1.0f / sqrtf((float)F);
    char name[64];
    *n = 0;
    if (add_tensor(ts, n, "token_embd.weight", base, 2, E, V, 1.0f)) return -1;
    for (int64_t il = 0; il < o->layers; il++) {
        if (sa->gptoss) {
            if (plan_gptoss_layer(o, base, il, ts, n)) return -1;
            continue;
        }
#define T(suffix, what, nd, a, b, std)                                                          \
    do {                                                                                        \
        snprintf(name, sizeof name, "blk.%" PRId64 ".%s", il, suffix);                          \
        if (add_tensor(ts, n, name, pick_type(o, base, mix, what, il), nd, a, b, std)) return -1; \
    } while (0)
        T("attn_norm.weight", "norm", 1, E, 1, NORM);
        if (sa->fused) {
            T("attn_qkv.weight", "attn_qkv", 2, E, Q + 2 * KV, s_in);
        } else {
            T("attn_q.weight", "attn_q", 2, E, Q, s_in);
            T("attn_k.weight", "attn_k", 2, E, KV, s_in);
            T("attn_v.weight", "attn_v", 2, E, KV, s_in);
        }
        if (sa->qkv_bias) {
            T("attn_q.bias", "bias", 1, Q, 1, 0.02f);
            T("attn_k.bias", "bias", 1, KV, 1, 0.02f);
            T("attn_v.bias", "bias", 1, KV, 1, 0.02f);
        }
        if (sa->qk_norm) {
            T("attn_q_norm.weight", "norm", 1, sa->qk_norm == QK_NORM_FULL ? Q : D, 1, NORM);
            T("attn_k_norm.weight", "norm", 1, sa->qk_norm == QK_NORM_FULL ? KV : D, 1, NORM);
        }
        T("attn_output.weight", "attn_output", 2, Q, E, s_q);
        if (sa->post_norms) T("post_attention_norm.weight", "norm", 1, E, 1, NORM);
        T("ffn_norm.weight", "norm", 1, E, 1, NORM);
        if (o->experts) {
            /* The router (kept F32, as llama-quantize keeps it), the experts
             * stacked [E, Fx, X] / [Fx, E, X], and granitemoe's shared one. */
            const int64_t X = o->experts, Fx = o->expert_ffn, Fs = o->shared_ffn;
            snprintf(name, sizeof name, "blk.%" PRId64 ".ffn_gate_inp.weight", il);
            if (add_tensor(ts, n, name, TSR_DTYPE_F32, 2, E, X, s_in)) return -1;
#define T3(suffix, what, a, b, std)                                                                        \
    do {                                                                                                   \
        snprintf(name, sizeof name, "blk.%" PRId64 ".%s", il, suffix);                                     \
        if (add_tensor_3d(ts, n, name, pick_type(o, base, mix, what, il), a, b, X, std)) return -1;        \
    } while (0)
            if (o->gate_up_exps) {
                T3("ffn_gate_up_exps.weight", "ffn_up", E, 2 * Fx, s_in); /* gate rows, then up rows */
            } else {
                T3("ffn_gate_exps.weight", "ffn_gate", E, Fx, s_in);
                T3("ffn_up_exps.weight", "ffn_up", E, Fx, s_in);
            }
            T3("ffn_down_exps.weight", "ffn_down", Fx, E, 1.0f / sqrtf((float)Fx));
#undef T3
            if (Fs && (sa->moe & MOE_SHARED_GATE)) T("ffn_gate_inp_shexp.weight", "router", 1, E, 1, s_in);
            if (Fs) {
                T("ffn_gate_shexp.weight", "ffn_gate", 2, E, Fs, s_in);
                T("ffn_up_shexp.weight", "ffn_up", 2, E, Fs, s_in);
                T("ffn_down_shexp.weight", "ffn_down", 2, Fs, E, 1.0f / sqrtf((float)Fs));
            }
            continue;
        }
        if (sa->fused) {
            T("ffn_up.weight", "ffn_up", 2, E, 2 * F, s_in); /* gate rows, then up rows */
        } else {
            T("ffn_gate.weight", "ffn_gate", 2, E, F, s_in);
            T("ffn_up.weight", "ffn_up", 2, E, F, s_in);
        }
        T("ffn_down.weight", "ffn_down", 2, F, E, s_ff);
        if (sa->post_norms) T("post_ffw_norm.weight", "norm", 1, E, 1, NORM);
#undef T
    }
    if (add_tensor(ts, n, "output_norm.weight", base, 1, E, 1, NORM)) return -1;
    if (!o->tied && add_tensor(ts, n, "output.weight", pick_type(o, base, mix, "output", 0), 2, E, V, s_in))
        return -1;
    return 0;
}

/* A LoRA adapter of the model planned in ts[0..n): for every matrix but
 * the embeddings, <name>.lora_a [n_in, r] and <name>.lora_b [r, n_out]
 * (llama.cpp's convert_lora_to_gguf.py names and shapes), A with the
 * usual 1/sqrt(n_in) spread and B with 0.5/sqrt(r), so that B (A x) is
 * about half of W x: an adapter that shows in every logit. */
static int plan_lora(const synth_opts *o, int32_t dtype, const synth_tensor *ts, int n, synth_tensor *out,
                     int *n_out) {
    const int64_t r = o->lora_rank;
    char name[96];
    *n_out = 0;
    if (dtype != TSR_DTYPE_F32 && dtype != TSR_DTYPE_F16 && dtype != TSR_DTYPE_BF16)
        return fprintf(stderr, "tessera-synth: --lora-rank writes F32, F16 or BF16 (--type), not %s\n",
                       dtype_name(dtype)), -1;
    for (int i = 0; i < n; i++) {
        const synth_tensor *t = &ts[i];
        if (t->n_dims != 2 || !strcmp(t->name, "token_embd.weight") || !strcmp(t->name, "token_types.weight") ||
            !strcmp(t->name, "position_embd.weight"))
            continue;
        snprintf(name, sizeof name, "%s.lora_a", t->name);
        if (add_tensor(out, n_out, name, dtype, 2, t->ne[0], r, 1.0f / sqrtf((float)t->ne[0]))) return -1;
        snprintf(name, sizeof name, "%s.lora_b", t->name);
        if (add_tensor(out, n_out, name, dtype, 2, r, t->ne[1], 0.5f / sqrtf((float)r))) return -1;
    }
    return 0;
}

static int write_lora_metadata(gguf_writer *w, const synth_opts *o) {
    const char *a = o->sa->name, *name = "tessera-synth adapter";
    return gguf_writer_set_str(w, "general.architecture", a, strlen(a)) ||
                   gguf_writer_set_str(w, "general.type", "adapter", 7) ||
                   gguf_writer_set_str(w, "adapter.type", "lora", 4) ||
                   gguf_writer_set_str(w, "general.name", name, strlen(name)) ||
                   gguf_writer_set_f32(w, "adapter.lora.alpha", o->lora_alpha)
               ? -1
               : 0;
}

/* ------------------------------------------------------------ vocabulary */

/* The tokens of a comma-separated --add-tokens list, %XX read as the byte
 * XX (%0A a newline, %2C a comma), each a NUL-terminated string in out (n_out of them, at most
 * max); returns the count or -1. */
static int split_add_tokens(const char *list, char *store, size_t store_size, const char **out, int max) {
    int n = 0;
    size_t k = 0;
    if (!list) return 0;
    out[n++] = store;
    for (const char *c = list; *c; c++) {
        if (k + 2 > store_size) return error_set("--add-tokens: the list is too long");
        if (*c == ',') {
            store[k++] = 0;
            if (n == max) return error_set("--add-tokens: more than %d tokens", max);
            out[n++] = store + k;
        } else if (c[0] == '%' && isxdigit((unsigned char)c[1]) && isxdigit((unsigned char)c[2])) {
            const char hex[3] = {c[1], c[2], 0};
            store[k++] = (char)strtol(hex, NULL, 16);
            c += 2;
        } else {
            store[k++] = *c;
        }
    }
    store[k] = 0;
    for (int i = 0; i < n; i++)
        if (!out[i][0]) return error_set("--add-tokens: an empty token in '%s'", list);
    return n;
}

/* Copy tokenizer.* keys; resize the token arrays to n_vocab (extra tokens
 * are "[PAD<i>]", type UNUSED, score 0), the add list (--add-tokens) right
 * after the source's, type USER_DEFINED. */
static int copy_vocab(gguf_writer *w, const gguf_file *src, int64_t *n_vocab, const char *add) {
    gguf_type et;
    uint64_t n_src;
    const void *data;
    char add_store[4096];
    const char *added[256];
    const int n_add = split_add_tokens(add, add_store, sizeof add_store, added, 256);
    if (n_add < 0) return -1;
    if (gguf_get_arr(src, "tokenizer.ggml.tokens", &et, &n_src, &data) != 0) return -1;
    if (*n_vocab == 0 || (n_add > 0 && *n_vocab < (int64_t)n_src + n_add)) *n_vocab = (int64_t)n_src + n_add;
    uint64_t n = (uint64_t)*n_vocab;
    for (int64_t i = 0; i < gguf_kv_count(src); i++) {
        const char *key = gguf_kv_key(src, i);
        if (strncmp(key, "tokenizer.", 10) != 0) continue;
        if (!strcmp(key, "tokenizer.ggml.tokens") || !strcmp(key, "tokenizer.ggml.scores") ||
            !strcmp(key, "tokenizer.ggml.token_type"))
            continue;
        if (gguf_writer_copy_kv(w, src, i) != 0) return -1;
    }
    gguf_str *strs = calloc(n, sizeof *strs);
    char *pad = calloc(n, 16);
    float *scores = calloc(n, sizeof *scores);
    int32_t *types = calloc(n, sizeof *types);
    int rc = -1;
    if (!strs || !pad || !scores || !types) {
        error_set("out of memory for %" PRIu64 " tokens", n);
        goto done;
    }
    gguf_type st = GGUF_TYPE_FLOAT32, tt = GGUF_TYPE_INT32;
    uint64_t n_scores = 0, n_types = 0;
    const void *sdata = NULL, *tdata = NULL;
    if (gguf_find_key(src, "tokenizer.ggml.scores") >= 0 &&
        gguf_get_arr(src, "tokenizer.ggml.scores", &st, &n_scores, &sdata) != 0)
        goto done;
    if (gguf_find_key(src, "tokenizer.ggml.token_type") >= 0 &&
        gguf_get_arr(src, "tokenizer.ggml.token_type", &tt, &n_types, &tdata) != 0)
        goto done;
    for (uint64_t i = 0; i < n; i++) {
        if (i < n_src) {
            if (gguf_get_arr_str(src, "tokenizer.ggml.tokens", i, &strs[i]) != 0) goto done;
        } else if (i < n_src + (uint64_t)n_add) {
            strs[i] = (gguf_str){added[i - n_src], strlen(added[i - n_src])};
        } else {
            int len = snprintf(pad + i * 16, 16, "[PAD%" PRIu64 "]", i);
            strs[i] = (gguf_str){pad + i * 16, (uint64_t)len};
        }
        scores[i] = 0.0f;
        if (i < n_scores && st == GGUF_TYPE_FLOAT32) memcpy(&scores[i], (const char *)sdata + 4 * i, 4);
        types[i] = i < n_src ? 1 : i < n_src + (uint64_t)n_add ? 4 : 5; /* NORMAL, USER_DEFINED, UNUSED */
        if (i < n_types && tt == GGUF_TYPE_INT32) memcpy(&types[i], (const char *)tdata + 4 * i, 4);
    }
    if (gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", strs, n) != 0) goto done;
    if (sdata && gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, n) != 0) goto done;
    if (gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, n) != 0) goto done;
    rc = 0;
done:
    free(strs);
    free(pad);
    free(scores);
    free(types);
    return rc;
}

/* The words of a comma-separated --wpm-words list: *n of them (pointers
 * into a copy, *store, the caller frees); -1 on a bad word. */
static int split_words(const char *list, char **store, const char ***words, int *n) {
    *store = NULL, *words = NULL, *n = 0;
    if (!list) return 0;
    if (!(*store = strdup(list)) || !(*words = calloc(strlen(list) + 1, sizeof **words)))
        return error_set("out of memory for --wpm-words");
    for (char *save = NULL, *t = strtok_r(*store, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        for (const char *c = t; *c; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9')))
                return error_set("--wpm-words: '%s' is not a lowercase word (a-z, 0-9)", t);
        if (strlen(t) > 24) return error_set("--wpm-words: '%s' is longer than 24 bytes", t);
        (*words)[(*n)++] = t;
    }
    return 0;
}

/* A small WordPiece vocabulary in llama.cpp's form (word starts carry
 * U+2581, continuations are bare): the five BERT specials, some words,
 * each letter, digit and punctuation mark as a word start and as a
 * continuation, the extra words (--wpm-words), then [unusedN] up to
 * n_vocab (0: no padding). */
static int write_wpm_vocab(gguf_writer *w, int64_t *n_vocab, const char *extra_list) {
    static const char *const specials[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    static const char *const words[] = {
        "the", "an", "of", "to", "and", "in", "is", "it", "that", "for", "on", "with", "as", "was",
        "cat", "dog", "sat", "mat", "hello", "world", "what", "how", "why", "who", "capital", "city",
        "france", "paris", "berlin", "germany", "model", "search", "query", "document", "text", "embed",
        "ing", "ed", "er", "es", "ly", "tion",
    };
    static const char chars[] = "abcdefghijklmnopqrstuvwxyz0123456789.,!?;:'\"()-";
    const int n_words = (int)(sizeof words / sizeof words[0]), n_chars = (int)sizeof chars - 1;
    char *extra_store;
    const char **extra;
    int n_extra;
    if (split_words(extra_list, &extra_store, &extra, &n_extra) != 0) {
        free(extra_store);
        free(extra);
        return -1;
    }
    for (int i = 0; i < n_extra; i++)
        for (int j = 0; j < n_words + i; j++)
            if (!strcmp(extra[i], j < n_words ? words[j] : extra[j - n_words]) || strlen(extra[i]) == 1) {
                error_set("--wpm-words: '%s' is already in the vocabulary", extra[i]);
                free(extra_store);
                free(extra);
                return -1;
            }
    const int64_t n_own = 5 + n_words + 2 * n_chars + n_extra;
    if (*n_vocab == 0) *n_vocab = n_own;
    const int64_t n = *n_vocab;
    gguf_str *strs = calloc((size_t)n, sizeof *strs);
    char *buf = calloc((size_t)n, 32);
    int32_t *types = calloc((size_t)n, sizeof *types);
    int rc = -1;
    if (n < n_own) {
        error_set("--vocab %" PRId64 " is below the built-in vocabulary's %" PRId64, n, n_own);
        goto done;
    }
    if (!strs || !buf || !types) {
        error_set("out of memory for %" PRId64 " tokens", n);
        goto done;
    }
    for (int64_t i = 0; i < n; i++) {
        char *t = buf + i * 32;
        int64_t k = i - 5;
        if (i < 5) snprintf(t, 32, "%s", specials[i]);
        else if (k < n_words) snprintf(t, 32, "\xe2\x96\x81%s", words[k]);
        else if ((k -= n_words) < n_chars) snprintf(t, 32, "\xe2\x96\x81%c", chars[k]);
        else if ((k -= n_chars) < n_chars) snprintf(t, 32, "%c", chars[k]);
        else if ((k -= n_chars) < n_extra) snprintf(t, 32, "\xe2\x96\x81%s", extra[k]);
        else snprintf(t, 32, "[unused%" PRId64 "]", i - n_own);
        strs[i] = (gguf_str){t, strlen(t)};
        types[i] = i < 5 ? 3 : i < n_own ? 1 : 5; /* CONTROL, NORMAL, UNUSED */
    }
    const char *model = "bert";
    if (gguf_writer_set_str(w, "tokenizer.ggml.model", model, strlen(model)) ||
        gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", strs, (uint64_t)n) ||
        gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, (uint64_t)n) ||
        gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", 0) ||
        gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 1) ||
        gguf_writer_set_u32(w, "tokenizer.ggml.cls_token_id", 2) ||
        gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 2) ||
        gguf_writer_set_u32(w, "tokenizer.ggml.seperator_token_id", 3) ||
        gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 3) ||
        gguf_writer_set_u32(w, "tokenizer.ggml.mask_token_id", 4))
        goto done;
    rc = 0;
done:
    free(strs);
    free(buf);
    free(types);
    free(extra_store);
    free(extra);
    return rc;
}

/* -------------------------------------------------------------- writing */

static int write_metadata(gguf_writer *w, const synth_opts *o, int32_t file_type) {
    char key[128], name[128];
    const char *a = o->arch;
    /* (no architecture in the name: llama.cpp reads model names, and "phi3"
     * in one makes it look for Phi-3's special tokens in the vocabulary) */
    snprintf(name, sizeof name, "synthetic %" PRId64 "-layer %" PRId64 "-dim model", o->layers, o->dim);
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", a, suffix), key)
    int rc = gguf_writer_set_str(w, "general.architecture", a, strlen(a)) ||
             gguf_writer_set_str(w, "general.name", name, strlen(name)) ||
             gguf_writer_set_u32(w, "general.file_type", (uint32_t)file_type) ||
             gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)o->ctx) ||
             gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)o->dim) ||
             gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)o->layers) ||
             gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)o->ffn) ||
             gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)o->rope_dims) ||
             gguf_writer_set_f32(w, KEY("rope.freq_base"), o->rope_base) ||
             gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)o->heads) ||
             gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)o->kv_heads) ||
             gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-5f);
    if (!rc && (o->sa->head_keys || o->head_dim * o->heads != o->dim))
        rc = gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)o->head_dim) ||
             gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)o->head_dim);
    if (!rc && !strcmp(a, "gemma3")) /* Gemma 3 270M's window */
        rc = gguf_writer_set_u32(w, KEY("attention.sliding_window"), 512);
    if (!rc && o->experts)
        rc = gguf_writer_set_u32(w, KEY("expert_count"), (uint32_t)o->experts) ||
             gguf_writer_set_u32(w, KEY("expert_used_count"), (uint32_t)o->experts_used);
    if (!rc && (o->sa->moe & MOE_EXP_FFN))
        rc = gguf_writer_set_u32(w, KEY("expert_feed_forward_length"), (uint32_t)o->expert_ffn);
    if (!rc && o->shared_ffn)
        rc = gguf_writer_set_u32(w, KEY("expert_shared_feed_forward_length"), (uint32_t)o->shared_ffn);
    if (!rc && o->sa->granite) /* granite-3.x-2b's multipliers, muP attention 1/D */
        rc = gguf_writer_set_f32(w, KEY("embedding_scale"), 12.0f) ||
             gguf_writer_set_f32(w, KEY("residual_scale"), 0.22f) ||
             gguf_writer_set_f32(w, KEY("attention.scale"), 1.0f / (float)o->head_dim) ||
             gguf_writer_set_f32(w, KEY("logit_scale"), 8.0f);
    if (!rc && !strcmp(a, "qwen2vl")) { /* M-RoPE: Qwen2-VL's 16/24/24 of 64 pairs, scaled; no 4th */
        const int32_t half = (int32_t)(o->rope_dims / 2), t = half / 4, h = (half - t) / 2;
        const int32_t sec[4] = {t, h, half - t - h, 0};
        rc = gguf_writer_set_arr(w, KEY("rope.dimension_sections"), GGUF_TYPE_INT32, sec, 4);
    }
    if (!rc && !strcmp(a, "mistral3")) { /* Ministral 3's rope_parameters, stretch 16 */
        const char *yarn = "yarn";
        rc = gguf_writer_set_str(w, KEY("rope.scaling.type"), yarn, strlen(yarn)) ||
             gguf_writer_set_f32(w, KEY("rope.scaling.factor"), 16.0f) ||
             gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"),
                                 (uint32_t)(o->ctx >= 32 ? o->ctx / 16 : 2)) ||
             gguf_writer_set_f32(w, KEY("rope.scaling.yarn_beta_fast"), 32.0f) ||
             gguf_writer_set_f32(w, KEY("rope.scaling.yarn_beta_slow"), 1.0f) ||
             gguf_writer_set_f32(w, KEY("rope.scaling.yarn_log_multiplier"), 1.0f) ||
             gguf_writer_set_f32(w, KEY("attention.temperature_scale"), 0.1f);
    }
    if (!rc && o->sa->gptoss) { /* gpt-oss-20b's rope_scaling and window, scaled to the file */
        const char *yarn = "yarn";
        rc = gguf_writer_set_str(w, KEY("rope.scaling.type"), yarn, strlen(yarn)) ||
             gguf_writer_set_f32(w, KEY("rope.scaling.factor"), 32.0f) ||
             gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"),
                                 (uint32_t)(o->ctx >= 64 ? o->ctx / 32 : 2)) ||
             gguf_writer_set_f32(w, KEY("rope.scaling.yarn_beta_fast"), 32.0f) ||
             gguf_writer_set_f32(w, KEY("rope.scaling.yarn_beta_slow"), 1.0f) ||
             gguf_writer_set_u32(w, KEY("attention.sliding_window"), 128);
    }
    if (!rc && o->sa->encoder) /* bge / nomic-embed keys */
        rc = gguf_writer_set_f32(w, KEY("attention.layer_norm_epsilon"), 1e-12f) ||
             gguf_writer_set_bool(w, KEY("attention.causal"), 0) ||
             gguf_writer_set_u32(w, KEY("pooling_type"), (uint32_t)o->pooling) ||
             gguf_writer_set_u32(w, "tokenizer.ggml.token_type_count", 2);
#undef KEY
    if (!rc && o->rec) rc = write_recurrent_metadata(w, o);
    return rc ? -1 : 0;
}

/* --unset and --set, after the keys above (and the vocabulary's). */
static int edit_metadata(gguf_writer *w, const synth_opts *o) {
    for (int i = 0; i < o->n_unset; i++)
        if (gguf_writer_remove_key(w, o->unset[i]) != 0) return -1;
    for (int i = 0; i < o->n_set; i++) {
        char key[128];
        const char *eq = strchr(o->set[i], '='), *v = eq + 1;
        snprintf(key, sizeof key, "%.*s", (int)(eq - o->set[i]), o->set[i]);
        char *end;
        errno = 0;
        long long iv = strtoll(v, &end, 10);
        int rc;
        if (!strcmp(v, "true") || !strcmp(v, "false"))
            rc = gguf_writer_set_bool(w, key, v[0] == 't');
        else if (*v && !*end && !errno && iv >= INT32_MIN && iv <= UINT32_MAX)
            rc = iv < 0 ? gguf_writer_set_i32(w, key, (int32_t)iv) : gguf_writer_set_u32(w, key, (uint32_t)iv);
        else if (*v && (strtof(v, &end), !*end))
            rc = gguf_writer_set_f32(w, key, strtof(v, NULL));
        else
            rc = gguf_writer_set_str(w, key, v, strlen(v));
        if (rc) return -1;
    }
    return 0;
}

/* llama.cpp's LLAMA_FTYPE numbers for general.file_type. */
static int32_t file_type_of(int32_t dtype, int mix) {
    if (mix) return 15; /* MOSTLY_Q4_K_M */
    switch (dtype) {
    case TSR_DTYPE_F32: return 0;
    case TSR_DTYPE_F16: return 1;
    case TSR_DTYPE_Q4_0: return 2;
    case TSR_DTYPE_Q4_1: return 3;
    case TSR_DTYPE_Q8_0: return 7;
    case TSR_DTYPE_Q5_0: return 8;
    case TSR_DTYPE_Q5_1: return 9;
    case TSR_DTYPE_Q2_K: return 10;
    case TSR_DTYPE_Q3_K: return 11; /* Q3_K_S */
    case TSR_DTYPE_Q4_K: return 14; /* Q4_K_S */
    case TSR_DTYPE_Q5_K: return 16; /* Q5_K_S */
    case TSR_DTYPE_Q6_K: return 18;
    case TSR_DTYPE_BF16: return 32;
    default: return 0;
    }
}

/* Generate one tensor row block by row block into its final type. */
static void *make_tensor(const synth_tensor *t, uint64_t seed, int idx, uint64_t *size) {
    const dtype_traits *tr = dtype_traits_get(t->dtype);
    int64_t rows = t->n_dims >= 2 ? t->ne[1] * t->ne[2] : 1;
    size_t row_bytes = dtype_row_bytes(t->dtype, t->ne[0]);
    *size = (uint64_t)row_bytes * (uint64_t)rows;
    unsigned char *out = malloc(*size);
    float *row = malloc((size_t)t->ne[0] * sizeof *row);
    if (!out || !row) {
        free(out);
        free(row);
        return NULL;
    }
    uint64_t state = seed ^ (0x5851f42d4c957f2dull * (uint64_t)(idx + 1));
    for (int64_t r = 0; r < rows; r++) {
        fill_uniform(row, t->ne[0], t->std, &state);
        for (int64_t i = 0; i < t->ne[0]; i++) row[i] += t->center;
        if (t->dtype == TSR_DTYPE_F32)
            memcpy(out + (size_t)r * row_bytes, row, row_bytes);
        else
            tr->from_f32(row, out + (size_t)r * row_bytes, t->ne[0]);
    }
    free(row);
    return out;
}

int main(int argc, char **argv) {
    synth_opts o;
    if (parse_args(argc, argv, &o) != 0) return 2;
    int mix = !strcmp(o.type, "Q4_K_M") || !strcmp(o.type, "q4_k_m");
    int32_t base = mix ? TSR_DTYPE_Q4_K : dtype_from_name(o.type);
    const dtype_traits *tr = base >= 0 ? dtype_traits_get(base) : NULL;
    if (!tr || !tr->supported || (base != TSR_DTYPE_F32 && !tr->from_f32)) {
        fprintf(stderr, "tessera-synth: --type '%s' cannot be produced (see --help)\n", o.type);
        return 2;
    }
    gguf_file *src = o.vocab_from ? gguf_open(o.vocab_from) : NULL;
    if (o.vocab_from && !src) {
        fprintf(stderr, "tessera-synth: %s\n", error_get());
        return 1;
    }
    gguf_writer *w = gguf_writer_new();
    synth_tensor *ts = calloc((size_t)(o.layers * 24 + 16), sizeof *ts);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", o.out);
    FILE *fp = NULL;
    int n = 0, rc = 1;
    if (!w || !ts) {
        fprintf(stderr, "tessera-synth: out of memory\n");
        goto done;
    }
    if (write_metadata(w, &o, file_type_of(base, mix)) != 0 || (src ? copy_vocab(w, src, &o.vocab, o.add_tokens) : write_wpm_vocab(w, &o.vocab, o.wpm_words)) != 0 ||
        edit_metadata(w, &o) != 0) {
        fprintf(stderr, "tessera-synth: %s\n", error_get());
        goto done;
    }
    if (plan_tensors(&o, base, mix, ts, &n) != 0) goto done;
    if (o.lora_rank) { /* the adapter instead: its own keys and tensors */
        synth_tensor *lt = calloc((size_t)n * 2 + 1, sizeof *lt);
        int nl = 0;
        gguf_writer_free(w);
        w = gguf_writer_new();
        if (!lt || !w || plan_lora(&o, base, ts, n, lt, &nl) != 0 || write_lora_metadata(w, &o) != 0) {
            if (!lt || !w) fprintf(stderr, "tessera-synth: out of memory\n");
            free(lt);
            goto done;
        }
        free(ts);
        ts = lt;
        n = nl;
    }
    for (int i = 0; i < n; i++) {
        if (gguf_writer_add_tensor(w, ts[i].name, ts[i].dtype, ts[i].n_dims, ts[i].ne, NULL) != 0) {
            fprintf(stderr, "tessera-synth: %s\n", error_get());
            goto done;
        }
    }
    fp = fopen(tmp, "wb");
    if (!fp) {
        fprintf(stderr, "tessera-synth: cannot write '%s': %s\n", tmp, strerror(errno));
        goto done;
    }
    if (gguf_writer_begin(w, fp) != 0) {
        fprintf(stderr, "tessera-synth: %s\n", error_get());
        goto done;
    }
    for (int i = 0; i < n; i++) {
        uint64_t size;
        void *data = make_tensor(&ts[i], o.seed, i, &size);
        if (!data) {
            fprintf(stderr, "tessera-synth: out of memory for tensor '%s'\n", ts[i].name);
            goto done;
        }
        int wrc = gguf_writer_write_tensor_data(w, fp, i, data, size);
        free(data);
        if (wrc != 0) {
            fprintf(stderr, "tessera-synth: %s\n", error_get());
            goto done;
        }
        if (!o.quiet) fprintf(stderr, "\rtessera-synth: %d/%d tensors", i + 1, n);
    }
    if (gguf_writer_finish(w, fp) != 0) {
        fprintf(stderr, "tessera-synth: %s\n", error_get());
        goto done;
    }
    if (fclose(fp) != 0) {
        fp = NULL;
        fprintf(stderr, "tessera-synth: writing '%s' failed: %s\n", tmp, strerror(errno));
        goto done;
    }
    fp = NULL;
    if (rename(tmp, o.out) != 0) {
        fprintf(stderr, "tessera-synth: cannot rename '%s' to '%s': %s\n", tmp, o.out, strerror(errno));
        goto done;
    }
    if (!o.quiet) fprintf(stderr, "\ntessera-synth: wrote %s\n", o.out);
    rc = 0;
done:
    if (fp) fclose(fp);
    if (rc != 0) unlink(tmp);
    free(ts);
    gguf_writer_free(w);
    gguf_close(src);
    return rc;
}
