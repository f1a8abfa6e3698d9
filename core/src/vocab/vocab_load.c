/*
 * vocab_load — build a vocabulary from a GGUF file's tokenizer.ggml.* keys,
 * with llama.cpp's defaults and fix-ups (llama_vocab::impl::load):
 * per-model default special ids, pre-tokenizer flags, EOT/EOM/FIM detection
 * by token text, the end-of-generation set, the special-token split order.
 *
 * Stricter than llama.cpp where the data is plainly wrong: arrays whose
 * lengths disagree and special ids out of range are errors naming the key.
 */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "vocab/vocab_internal.h"

#define KEY_MODEL "tokenizer.ggml.model"
#define KEY_PRE "tokenizer.ggml.pre"
#define KEY_TOKENS "tokenizer.ggml.tokens"
#define KEY_SCORES "tokenizer.ggml.scores"
#define KEY_TYPES "tokenizer.ggml.token_type"
#define KEY_MERGES "tokenizer.ggml.merges"
#define KEY_ADD_BOS "tokenizer.ggml.add_bos_token"
#define KEY_ADD_EOS "tokenizer.ggml.add_eos_token"
#define KEY_ADD_SEP "tokenizer.ggml.add_sep_token"
#define KEY_ADD_PREFIX "tokenizer.ggml.add_space_prefix"

/* GGUF token types (gguf-py's TokenType). */
enum { TT_UNDEFINED, TT_NORMAL, TT_UNKNOWN, TT_CONTROL, TT_USER_DEFINED, TT_UNUSED, TT_BYTE };

static uint32_t attr_of_type(int32_t t) {
    switch (t) {
    case TT_UNKNOWN: return VOCAB_ATTR_UNKNOWN;
    case TT_UNUSED: return VOCAB_ATTR_UNUSED;
    case TT_NORMAL: return VOCAB_ATTR_NORMAL;
    case TT_CONTROL: return VOCAB_ATTR_CONTROL;
    case TT_USER_DEFINED: return VOCAB_ATTR_USER_DEFINED;
    case TT_BYTE: return VOCAB_ATTR_BYTE;
    default: return VOCAB_ATTR_UNDEFINED;
    }
}

/* ------------------------------------------------------------ helpers */

static int64_t find_array(const gguf_file *f, const char *key, bool required, gguf_type *elem,
                          uint64_t *count, const void **data) {
    int64_t k = gguf_find_key(f, key);
    if (k < 0) {
        if (required) error_set("%s: key '%s' not found", gguf_path(f), key);
        return -1;
    }
    if (gguf_kv_type(f, k) != GGUF_TYPE_ARRAY) {
        error_set("%s: key '%s' is not an array", gguf_path(f), key);
        return -2;
    }
    if (gguf_kv_arr(f, k, elem, count, data)) return -2;
    return k;
}

/* Key `key`, a required array of strings: its index and *count; -1 with
 * the error set when it is missing or not that. */
static int64_t find_strings(const gguf_file *f, const char *key, uint64_t *count) {
    gguf_type elem;
    const void *data;
    int64_t k = find_array(f, key, true, &elem, count, &data);
    if (k < 0) return -1;
    if (elem != GGUF_TYPE_STRING)
        return error_set("%s: key '%s' is an array of %s, expected strings", gguf_path(f), key,
                         gguf_type_name(elem));
    return k;
}

/* Optional per-token key `key`: an array of n_tokens values of type want
 * (or also_ok) into *type and *data, both unchanged when it is absent; -1
 * with the error set when it is there but of another type or length. */
static int per_token_array(const gguf_file *f, const char *key, uint64_t n_tokens, gguf_type want,
                           gguf_type also_ok, gguf_type *type, const void **data) {
    uint64_t n;
    int64_t k = find_array(f, key, false, type, &n, data);
    if (k == -2) return -1;
    if (k < 0) return 0;
    if (*type != want && *type != also_ok)
        return error_set("%s: key '%s' is an array of %s, expected %s", gguf_path(f), key, gguf_type_name(*type),
                         gguf_type_name(want));
    if (n != n_tokens)
        return error_set("%s: key '%s' has %" PRIu64 " entries but '%s' has %" PRIu64, gguf_path(f), key, n,
                         KEY_TOKENS, n_tokens);
    return 0;
}

/* Optional bool key: unchanged when absent; -1 when present with a wrong
 * type. */
static int opt_bool(const gguf_file *f, const char *key, bool *out) {
    if (gguf_find_key(f, key) < 0) return 0;
    return gguf_get_bool(f, key, out);
}

/* Optional special id: -1, stored signed or as uint32 0xFFFFFFFF (llama.cpp's
 * LLAMA_TOKEN_NULL, written by its converters), means none. */
static int opt_id(const vocab *v, const gguf_file *f, const char *key, int32_t *id) {
    if (gguf_find_key(f, key) < 0) return 0;
    int64_t x;
    if (gguf_get_int(f, key, &x)) return -1;
    if (x == -1 || x == (int64_t)UINT32_MAX) {
        *id = VOCAB_TOKEN_NULL;
        return 0;
    }
    if (x < 0 || x >= v->n_tokens)
        return error_set("%s: key '%s' = %" PRId64 " is out of range (vocabulary of %" PRId32
                         " tokens)",
                         gguf_path(f), key, x, v->n_tokens);
    *id = (int32_t)x;
    return 0;
}

static int32_t find_text(const vocab *v, const char *s) { return vocab_lookup(v, s, strlen(s)); }

static void set_attr(vocab *v, int32_t id, uint32_t attr, bool on) {
    if (id < 0 || id >= v->n_tokens) return;
    if (on) v->tokens[id].attr |= attr;
    else v->tokens[id].attr &= ~attr;
}

/* -------------------------------------------------------------- steps */

static int load_model_kind(vocab *v, const gguf_file *f) {
    gguf_str s;
    if (gguf_find_key(f, KEY_MODEL) < 0)
        return error_set("%s: key '%s' not found: the file has no vocabulary", gguf_path(f),
                         KEY_MODEL);
    if (gguf_get_str(f, KEY_MODEL, &s)) return -1;
    int32_t nul = VOCAB_TOKEN_NULL;
    if (s.len == 5 && memcmp(s.ptr, "llama", 5) == 0) {
        v->type = VOCAB_TYPE_SPM;
        v->bos = 1, v->eos = 2, v->unk = 0, v->sep = nul, v->pad = nul, v->mask = nul;
        v->add_space_prefix = true;
        v->clean_spaces = false;
        v->add_bos = true;
    } else if (s.len == 4 && memcmp(s.ptr, "gpt2", 4) == 0) {
        v->type = VOCAB_TYPE_BPE;
        v->bos = 11, v->eos = 11, v->unk = nul, v->sep = nul, v->pad = nul, v->mask = nul;
    } else if (s.len == 6 && memcmp(s.ptr, "gemma4", 6) == 0) {
        /* BPE with SentencePiece-style pieces; ids come from the keys. */
        v->type = VOCAB_TYPE_BPE;
        v->bos = v->eos = v->unk = v->sep = v->pad = v->mask = nul;
    } else if (s.len == 4 && memcmp(s.ptr, "bert", 4) == 0) {
        v->type = VOCAB_TYPE_WPM;
        v->bos = 101, v->eos = nul, v->unk = 100, v->sep = 102, v->pad = 0, v->mask = 103;
        v->add_bos = true;
        v->add_sep = true;
        v->clean_spaces = true;
    } else {
        return error_set("%s: key '%s': unsupported tokenizer '%.*s' (supported: llama, gpt2, "
                         "gemma4, bert)",
                         gguf_path(f), KEY_MODEL, (int)(s.len > 64 ? 64 : s.len), s.ptr);
    }
    memcpy(v->model_name, s.ptr, s.len);
    v->model_name[s.len] = '\0';
    return 0;
}

static int load_pre(vocab *v, const gguf_file *f) {
    char name[128] = "default";
    if (gguf_find_key(f, KEY_PRE) >= 0) {
        gguf_str s;
        if (gguf_get_str(f, KEY_PRE, &s)) return -1;
        if (s.len >= sizeof name)
            return error_set("%s: key '%s': value too long (%" PRIu64 " bytes)", gguf_path(f),
                             KEY_PRE, s.len);
        if (s.len > 0) {
            memcpy(name, s.ptr, s.len);
            name[s.len] = '\0';
        }
    }
    if (strcmp(v->model_name, "gemma4") == 0) strcpy(name, "gemma4"); /* as llama.cpp */
    v->pre_name = strdup(name);
    if (!v->pre_name) return error_set("vocab: out of memory");
    if (v->type != VOCAB_TYPE_BPE) return 0;

    /* llama.cpp warns and uses "default" when the key is missing. */
    pretok_info info;
    v->pre = pretok_new(name, &info);
    if (!v->pre) return error_wrap("%s", gguf_path(f));
    v->clean_spaces = info.clean_spaces;
    v->ignore_merges = info.ignore_merges;
    v->add_bos = info.add_bos;
    if (info.no_bos) v->bos = VOCAB_TOKEN_NULL;
    v->escape_spaces = info.spm_style;
    v->force_bos = info.force_bos;
    v->newline_words = info.newline_words;
    return 0;
}

/* Token i's score (float32, or int32 converted) and attributes (from its
 * GGUF token type) from the per-token arrays; either may be absent. */
static int token_score_and_attr(const gguf_file *f, uint64_t i, const void *scores, gguf_type score_type,
                                const void *types, vocab_token_data *t) {
    t->score = 0.0f;
    if (scores && score_type == GGUF_TYPE_FLOAT32) {
        memcpy(&t->score, (const char *)scores + 4 * i, 4);
        /* SPM merges by score: a NaN would make the order meaningless. */
        if (!isfinite(t->score))
            return error_set("%s: key '%s': token %" PRIu64 " has score %g (must be finite)", gguf_path(f),
                             KEY_SCORES, i, (double)t->score);
    } else if (scores) {
        int32_t x;
        memcpy(&x, (const char *)scores + 4 * i, 4);
        t->score = (float)x;
    }
    t->attr = VOCAB_ATTR_NORMAL;
    if (types) {
        int32_t x;
        memcpy(&x, (const char *)types + 4 * i, 4);
        if (x < TT_UNDEFINED || x > TT_BYTE)
            return error_set("%s: key '%s': token %" PRIu64 " has type %" PRId32
                             " (types are 0..6: undefined, normal, unknown, control, "
                             "user-defined, unused, byte)",
                             gguf_path(f), KEY_TYPES, i, x);
        t->attr = attr_of_type(x);
    }
    return 0;
}

static int load_tokens(vocab *v, const gguf_file *f) {
    uint64_t count;
    int64_t k = find_strings(f, KEY_TOKENS, &count);
    if (k < 0) return -1;
    if (count == 0 || count > INT32_MAX)
        return error_set("%s: key '%s' has %" PRIu64 " tokens", gguf_path(f), KEY_TOKENS, count);
    v->n_tokens = (int32_t)count;

    /* scores: float32 (or int32) per token */
    const void *scores = NULL;
    gguf_type score_type = GGUF_TYPE_FLOAT32;
    if (per_token_array(f, KEY_SCORES, count, GGUF_TYPE_FLOAT32, GGUF_TYPE_INT32, &score_type, &scores)) return -1;
    const void *types = NULL;
    gguf_type type_type = GGUF_TYPE_INT32;
    if (per_token_array(f, KEY_TYPES, count, GGUF_TYPE_INT32, GGUF_TYPE_INT32, &type_type, &types)) return -1;

    /* One arena for every token's text, NUL-terminated. Empty tokens get
     * llama.cpp's "[EMPTY_<id>]" text. */
    size_t arena = 0;
    for (uint64_t i = 0; i < count; i++) {
        gguf_str s;
        if (gguf_kv_arr_str(f, k, i, &s)) return -1;
        if (s.len > (1u << 20))
            return error_set("%s: key '%s': token %" PRIu64 " is %" PRIu64 " bytes long",
                             gguf_path(f), KEY_TOKENS, i, s.len);
        arena += (s.len ? s.len : 24) + 1;
    }
    v->text_arena = malloc(arena);
    v->tokens = calloc(count, sizeof *v->tokens);
    if (!v->text_arena || !v->tokens || strmap_init(&v->token_ids, count))
        return error_set("%s: out of memory for %" PRIu64 " tokens", gguf_path(f), count);

    char *p = v->text_arena;
    for (uint64_t i = 0; i < count; i++) {
        gguf_str s;
        gguf_kv_arr_str(f, k, i, &s);
        vocab_token_data *t = &v->tokens[i];
        t->text = p;
        if (s.len) {
            memcpy(p, s.ptr, s.len);
            t->len = (uint32_t)s.len;
        } else {
            t->len = (uint32_t)snprintf(p, 24, "[EMPTY_%" PRIu64 "]", i);
        }
        p[t->len] = '\0';
        p += t->len + 1;
        if ((int)t->len > v->max_token_len) v->max_token_len = (int)t->len;

        int32_t prev;
        if (strmap_insert(&v->token_ids, t->text, t->len, (int32_t)i, &prev) == 0)
            return error_set("%s: key '%s': duplicate token '%.*s' (ids %" PRId32
                             " and %" PRIu64 ")",
                             gguf_path(f), KEY_TOKENS, (int)(t->len > 64 ? 64 : t->len), t->text,
                             prev, i);

        if (token_score_and_attr(f, i, scores, score_type, types, t) != 0) return -1;
    }
    return 0;
}

static int load_merges(vocab *v, const gguf_file *f) {
    if (v->type != VOCAB_TYPE_BPE) return 0;
    uint64_t count;
    int64_t k = find_strings(f, KEY_MERGES, &count);
    if (k < 0) return -1;
    if (count > INT32_MAX)
        return error_set("%s: key '%s' has %" PRIu64 " merges", gguf_path(f), KEY_MERGES, count);
    size_t arena = 1;
    for (uint64_t i = 0; i < count; i++) {
        gguf_str s;
        if (gguf_kv_arr_str(f, k, i, &s)) return -1;
        arena += s.len;
    }
    v->merge_arena = malloc(arena);
    if (!v->merge_arena || strmap_init(&v->merge_ranks, count))
        return error_set("%s: out of memory for %" PRIu64 " merges", gguf_path(f), count);
    /* Keys are the "left right" strings themselves: BPE symbols never hold a
     * raw space (GPT-2 maps it to U+0120), so the split is unambiguous. */
    char *p = v->merge_arena;
    for (uint64_t i = 0; i < count; i++) {
        gguf_str s;
        gguf_kv_arr_str(f, k, i, &s);
        memcpy(p, s.ptr, s.len);
        strmap_insert(&v->merge_ranks, p, s.len, (int32_t)i, NULL); /* first rank wins */
        p += s.len;
    }
    return 0;
}

static int load_special_ids(vocab *v, const gguf_file *f) {
    /* Defaults that do not fit the vocabulary are dropped (llama.cpp). */
    int32_t *defaults[] = {&v->bos, &v->eos, &v->unk, &v->sep, &v->pad, &v->mask};
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        if (*defaults[i] >= v->n_tokens) *defaults[i] = VOCAB_TOKEN_NULL;
    v->eot = v->eom = VOCAB_TOKEN_NULL;
    v->fim_pre = v->fim_suf = v->fim_mid = VOCAB_TOKEN_NULL;
    v->fim_pad = v->fim_rep = v->fim_sep = VOCAB_TOKEN_NULL;

    static const struct {
        const char *key;
        size_t off;
    } keys[] = {
        {"tokenizer.ggml.bos_token_id", offsetof(vocab, bos)},
        {"tokenizer.ggml.eos_token_id", offsetof(vocab, eos)},
        {"tokenizer.ggml.eot_token_id", offsetof(vocab, eot)},
        {"tokenizer.ggml.eom_token_id", offsetof(vocab, eom)},
        {"tokenizer.ggml.unknown_token_id", offsetof(vocab, unk)},
        {"tokenizer.ggml.seperator_token_id", offsetof(vocab, sep)}, /* sic, as in GGUF */
        {"tokenizer.ggml.padding_token_id", offsetof(vocab, pad)},
        {"tokenizer.ggml.mask_token_id", offsetof(vocab, mask)},
        {"tokenizer.ggml.fim_pre_token_id", offsetof(vocab, fim_pre)},
        {"tokenizer.ggml.fim_suf_token_id", offsetof(vocab, fim_suf)},
        {"tokenizer.ggml.fim_mid_token_id", offsetof(vocab, fim_mid)},
        {"tokenizer.ggml.fim_pad_token_id", offsetof(vocab, fim_pad)},
        {"tokenizer.ggml.fim_rep_token_id", offsetof(vocab, fim_rep)},
        {"tokenizer.ggml.fim_sep_token_id", offsetof(vocab, fim_sep)},
        {"tokenizer.ggml.prefix_token_id", offsetof(vocab, fim_pre)}, /* deprecated names */
        {"tokenizer.ggml.suffix_token_id", offsetof(vocab, fim_suf)},
        {"tokenizer.ggml.middle_token_id", offsetof(vocab, fim_mid)},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        int32_t *id = (int32_t *)((char *)v + keys[i].off);
        if (opt_id(v, f, keys[i].key, id)) return -1;
    }
    /* BERT files name [CLS] only as tokenizer.ggml.cls_token_id: it is their BOS. */
    if (v->bos == VOCAB_TOKEN_NULL && opt_id(v, f, "tokenizer.ggml.cls_token_id", &v->bos)) return -1;

    if (opt_bool(f, KEY_ADD_PREFIX, &v->add_space_prefix) || opt_bool(f, KEY_ADD_BOS, &v->add_bos) ||
        opt_bool(f, KEY_ADD_EOS, &v->add_eos) || opt_bool(f, KEY_ADD_SEP, &v->add_sep))
        return -1;
    if (v->force_bos) v->add_bos = true; /* llama.cpp's gemma4 workaround */
    /* BERT normaliser: both default to true; strip_accents follows lowercase
     * unless given (as Hugging Face's BertNormalizer). */
    v->wpm_lowercase = true;
    if (opt_bool(f, "tokenizer.ggml.normalizer.lowercase", &v->wpm_lowercase)) return -1;
    v->wpm_strip_accents = v->wpm_lowercase;
    if (opt_bool(f, "tokenizer.ggml.normalizer.strip_accents", &v->wpm_strip_accents)) return -1;

    if (v->add_bos && v->bos == VOCAB_TOKEN_NULL)
        return error_set("%s: %s is true, but tokenizer.ggml.bos_token_id is not set",
                         gguf_path(f), KEY_ADD_BOS);
    if (v->add_eos && v->eos == VOCAB_TOKEN_NULL)
        return error_set("%s: %s is true, but tokenizer.ggml.eos_token_id is not set",
                         gguf_path(f), KEY_ADD_EOS);
    if (v->type == VOCAB_TYPE_WPM && v->add_sep && v->sep == VOCAB_TOKEN_NULL)
        return error_set("%s: %s is true, but tokenizer.ggml.seperator_token_id is not set",
                         gguf_path(f), KEY_ADD_SEP);
    return 0;
}

/* The first candidate text present in the vocabulary becomes *id (when not
 * set by a key) and is made a control token. llama.cpp walks its hash map
 * instead, so with several candidates present its pick is arbitrary; ours is
 * the list order. */
static void detect_by_text(vocab *v, int32_t *id, const char *const *texts) {
    if (*id != VOCAB_TOKEN_NULL) return;
    for (size_t i = 0; texts[i]; i++) {
        int32_t t = find_text(v, texts[i]);
        if (t >= 0) {
            *id = t;
            set_attr(v, t, VOCAB_ATTR_CONTROL, true);
            return;
        }
    }
}

static void detect_specials(vocab *v) {
    static const char *const eot[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                                      "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>",
                                      "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>", NULL};
    static const char *const eom[] = {"<|eom_id|>", NULL};
    static const char *const fim_pre[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                                          "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>",
                                          "<|prefix|>", NULL};
    static const char *const fim_suf[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                                          "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>",
                                          "<|suffix|>", NULL};
    static const char *const fim_mid[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                                          "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>",
                                          "<|middle|>", NULL};
    static const char *const fim_pad[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
                                          "[PAD]", NULL};
    static const char *const fim_rep[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                          "<REPO>", "<reponame>", NULL};
    static const char *const fim_sep[] = {"<|file_sep|>", NULL};
    detect_by_text(v, &v->eot, eot);
    detect_by_text(v, &v->eom, eom);
    detect_by_text(v, &v->fim_pre, fim_pre);
    detect_by_text(v, &v->fim_suf, fim_suf);
    detect_by_text(v, &v->fim_mid, fim_mid);
    detect_by_text(v, &v->fim_pad, fim_pad);
    detect_by_text(v, &v->fim_rep, fim_rep);
    detect_by_text(v, &v->fim_sep, fim_sep);

    /* Control tokens named "...unused..." are unused. */
    for (int32_t i = 0; i < v->n_tokens; i++) {
        vocab_token_data *t = &v->tokens[i];
        if ((t->attr & VOCAB_ATTR_CONTROL) && strstr(t->text, "unused"))
            t->attr |= VOCAB_ATTR_UNUSED;
    }
}

static void build_eog(vocab *v) {
    static const char *const eog_texts[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
        "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>",
        "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>",
        "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~[", NULL};
    int32_t always[] = {v->fim_pad, v->fim_rep, v->fim_sep, v->eos, v->eot, v->eom};
    for (size_t i = 0; i < sizeof always / sizeof always[0]; i++)
        if (always[i] >= 0) v->eog[always[i]] = 1;
    for (size_t i = 0; eog_texts[i]; i++) {
        int32_t t = find_text(v, eog_texts[i]);
        if (t < 0) continue;
        v->eog[t] = 1;
        set_attr(v, t, VOCAB_ATTR_CONTROL, true);
    }
    /* gpt-oss: these are rendered, never hidden. */
    static const char *const shown[] = {"<|channel|>", "<|message|>", "<|start|>",
                                        "<|constrain|>", NULL};
    for (size_t i = 0; shown[i]; i++) {
        int32_t t = find_text(v, shown[i]);
        if (t >= 0) v->tokens[t].attr = VOCAB_ATTR_USER_DEFINED;
    }
    /* o200k_harmony / solar-open: <|end|> is not the end of generation when
     * <|return|> and <|call|> (or <|calls|> and <|flush|>) exist. */
    int32_t end = find_text(v, "<|end|>");
    bool ret = find_text(v, "<|return|>") >= 0;
    bool call = find_text(v, "<|call|>") >= 0 || find_text(v, "<|calls|>") >= 0;
    bool flush = find_text(v, "<|flush|>") >= 0;
    if (end >= 0 && v->eog[end] && call && (ret || flush)) {
        v->eog[end] = 0;
        v->tokens[end].attr = VOCAB_ATTR_USER_DEFINED;
    }
    /* gemma4 / paddleocr: </s> is not an end of generation next to
     * <|tool_response>. */
    int32_t s = find_text(v, "</s>");
    if (s >= 0 && v->eog[s] && find_text(v, "<|tool_response>") >= 0) {
        v->eog[s] = 0;
        v->tokens[s].attr = VOCAB_ATTR_NORMAL;
    }
}

static int cmp_special(const void *a, const void *b, void *ctx) {
    const vocab *v = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = v->tokens[x].len, ly = v->tokens[y].len;
    if (lx != ly) return lx > ly ? -1 : 1;
    return x < y ? -1 : (x > y);
}

static int build_special_order(vocab *v) {
    const uint32_t special = VOCAB_ATTR_CONTROL | VOCAB_ATTR_USER_DEFINED | VOCAB_ATTR_UNKNOWN;
    size_t n = 0;
    for (int32_t i = 0; i < v->n_tokens; i++)
        if (v->tokens[i].attr & special) n++;
    v->special_order = malloc((n ? n : 1) * sizeof *v->special_order);
    if (!v->special_order) return error_set("vocab: out of memory");
    for (int32_t i = 0; i < v->n_tokens; i++)
        if (v->tokens[i].attr & special) v->special_order[v->n_special++] = i;
    qsort_r(v->special_order, v->n_special, sizeof *v->special_order, cmp_special, v);
    return 0;
}

/* llama.cpp sets a few attributes by model name (phi-3's special tokens eat
 * the whitespace after them; some BERTs' mask eats the space before it). */
static void name_attr_fixups(vocab *v, const gguf_file *f) {
    char name[256] = "", arch[128] = "";
    gguf_str s;
    if (gguf_find_key(f, "general.name") >= 0 && gguf_get_str(f, "general.name", &s) == 0) {
        size_t n = s.len < sizeof name - 1 ? s.len : sizeof name - 1;
        for (size_t i = 0; i < n; i++) name[i] = (char)tolower((unsigned char)s.ptr[i]);
        name[n] = '\0';
    }
    if (gguf_find_key(f, "general.architecture") >= 0 &&
        gguf_get_str(f, "general.architecture", &s) == 0) {
        size_t n = s.len < sizeof arch - 1 ? s.len : sizeof arch - 1;
        memcpy(arch, s.ptr, n);
        arch[n] = '\0';
    }
    const char *pre = v->pre_name;
    if (strstr(pre, "jina-v2-de") || strstr(pre, "jina-v2-es") || strstr(pre, "jina-v2-code") ||
        strstr(arch, "nomic-bert-moe") || strstr(arch, "jina-bert-v3")) {
        set_attr(v, find_text(v, "<mask>"), VOCAB_ATTR_LSTRIP, true);
    } else if (strstr(name, "phi-3") || strstr(name, "phi3")) {
        for (size_t i = 0; i < v->n_special; i++)
            set_attr(v, v->special_order[i], VOCAB_ATTR_RSTRIP, true);
        set_attr(v, find_text(v, "</s>"), VOCAB_ATTR_RSTRIP, true);
        set_attr(v, find_text(v, "<unk>"), VOCAB_ATTR_RSTRIP, false);
        set_attr(v, find_text(v, "<s>"), VOCAB_ATTR_RSTRIP, false);
        set_attr(v, find_text(v, "<|endoftext|>"), VOCAB_ATTR_RSTRIP, false);
    } else if (strstr(name, "modern-bert")) {
        set_attr(v, find_text(v, "[MASK]"), VOCAB_ATTR_LSTRIP, true);
    }
}

static void build_byte_tokens(vocab *v) {
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        char buf[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
        int32_t id = vocab_lookup(v, buf, 6);
        if (id < 0) {
            char c = (char)b;
            id = vocab_lookup(v, &c, 1);
        }
        v->byte_token[b] = id;
    }
}

static void build_pair_table(vocab *v) {
    for (int32_t i = 0; i < v->n_tokens; i++) {
        const uint8_t *t = (const uint8_t *)v->tokens[i].text;
        for (uint32_t j = 0; j + 1 < v->tokens[i].len; j++) {
            unsigned pair = (unsigned)t[j] << 8 | t[j + 1];
            v->pair_seen[pair >> 3] |= (uint8_t)(1u << (pair & 7));
        }
    }
}

static int find_newline(vocab *v) {
    v->nl = VOCAB_TOKEN_NULL;
    if (v->type == VOCAB_TYPE_SPM) {
        v->nl = v->byte_token['\n'] >= 0 ? v->byte_token['\n'] : v->pad;
    } else if (v->type == VOCAB_TYPE_WPM) {
        v->nl = v->pad;
    } else {
        vocab_tokens t = {0};
        if (vocab_tokenize(v, "\n", 1, false, false, &t)) return -1;
        v->nl = t.n ? t.ids[0] : v->pad;
        vocab_tokens_free(&t);
    }
    return 0;
}

/* --------------------------------------------------------------- load */

/* A model file's token_embd.weight has one row per token (llama.cpp makes
 * the same demand): more tokens than rows would index past the matrix,
 * fewer would let the model pick ids with no text. A vocabulary-only file
 * has no such tensor. */
static int check_embedding_rows(const vocab *v, const gguf_file *f) {
    const gguf_tensor_info *emb = gguf_find_tensor(f, "token_embd.weight");
    if (!emb || emb->n_dims != 2) return 0; /* a missing or malformed tensor is the model's error */
    if (emb->ne[1] != v->n_tokens)
        return error_set("%s: key '%s' has %" PRId32 " tokens but tensor 'token_embd.weight' has %" PRId64
                         " rows",
                         gguf_path(f), KEY_TOKENS, v->n_tokens, emb->ne[1]);
    return 0;
}

vocab *vocab_load(const gguf_file *f) {
    vocab *v = calloc(1, sizeof *v);
    if (!v) {
        error_set("vocab: out of memory");
        return NULL;
    }
    if (load_model_kind(v, f) || load_pre(v, f) || load_tokens(v, f) || check_embedding_rows(v, f) ||
        load_merges(v, f) || load_special_ids(v, f))
        goto fail;
    v->eog = calloc((size_t)v->n_tokens, 1);
    if (!v->eog) {
        error_set("vocab: out of memory");
        goto fail;
    }
    detect_specials(v);
    build_eog(v);
    if (build_special_order(v)) goto fail;
    build_byte_tokens(v);
    build_pair_table(v);
    if (vocab_build_pieces(v)) goto fail;
    name_attr_fixups(v, f);
    if (find_newline(v)) goto fail;
    return v;
fail:
    vocab_free(v);
    return NULL;
}

void vocab_free(vocab *v) {
    if (!v) return;
    free(v->pre_name);
    free(v->tokens);
    free(v->text_arena);
    strmap_free(&v->token_ids);
    free(v->merge_arena);
    strmap_free(&v->merge_ranks);
    pretok_free(v->pre);
    free(v->piece_arena);
    free(v->piece_off);
    free(v->special_order);
    free(v->eog);
    free(v);
}

/* --------------------------------------------------------- properties */

vocab_type vocab_get_type(const vocab *v) { return v->type; }
const char *vocab_model_name(const vocab *v) { return v->model_name; }
const char *vocab_pre_name(const vocab *v) { return v->pre_name; }
int32_t vocab_n_tokens(const vocab *v) { return v->n_tokens; }
int32_t vocab_bos(const vocab *v) { return v->bos; }
int32_t vocab_eos(const vocab *v) { return v->eos; }
int32_t vocab_eot(const vocab *v) { return v->eot; }
int32_t vocab_eom(const vocab *v) { return v->eom; }
int32_t vocab_unk(const vocab *v) { return v->unk; }
int32_t vocab_sep(const vocab *v) { return v->sep; }
int32_t vocab_pad(const vocab *v) { return v->pad; }
int32_t vocab_nl(const vocab *v) { return v->nl; }
bool vocab_add_bos(const vocab *v) { return v->add_bos; }
bool vocab_add_eos(const vocab *v) { return v->add_eos; }
bool vocab_add_sep(const vocab *v) { return v->add_sep; }
bool vocab_add_space_prefix(const vocab *v) { return v->add_space_prefix; }

bool vocab_is_eog(const vocab *v, int32_t id) {
    return id >= 0 && id < v->n_tokens && v->eog[id];
}

bool vocab_is_control(const vocab *v, int32_t id) {
    return id >= 0 && id < v->n_tokens && (v->tokens[id].attr & VOCAB_ATTR_CONTROL);
}

const char *vocab_token_text(const vocab *v, int32_t id, size_t *len) {
    if (id < 0 || id >= v->n_tokens) return NULL;
    if (len) *len = v->tokens[id].len;
    return v->tokens[id].text;
}

float vocab_token_score(const vocab *v, int32_t id) {
    return id >= 0 && id < v->n_tokens ? v->tokens[id].score : 0.0f;
}

uint32_t vocab_token_attr(const vocab *v, int32_t id) {
    return id >= 0 && id < v->n_tokens ? v->tokens[id].attr : VOCAB_ATTR_UNDEFINED;
}

int32_t vocab_text_to_token(const vocab *v, const char *text, size_t len) {
    return vocab_lookup(v, text, len);
}
