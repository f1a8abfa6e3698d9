/*
 * test_goldens — the tokens llama.cpp produced for the golden prompts
 * (shared/golden/<model>.jsonl: "prompt", "tokens" with BOS) and the text of
 * its greedy continuations ("greedy" ids, "greedy_text"), for stories260K and
 * the synth-s family (same 512-token SentencePiece vocabulary).
 *
 *   tokenize(prompt, add_special, parse_special) == tokens
 *   detokenize(tokens without BOS) == prompt (SPM leading space removed)
 *   concatenated pieces of greedy == greedy_text
 */
#include "test_util.h"

/* Minimal JSON access for these flat objects: the string or int array that
 * follows "key": in line. */
static const char *find_key(const char *line, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    return p ? p + strlen(pat) : NULL;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static size_t put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) return (size_t)(o[0] = (char)cp, 1);
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6)), o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)), o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18)), o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decode the JSON string at p (which points at the opening quote). */
static char *json_string(const char *p, size_t *len) {
    if (!p || *p != '"') return NULL;
    p++;
    char *out = malloc(strlen(p) + 1);
    size_t n = 0;
    while (*p && *p != '"') {
        if (*p != '\\') {
            out[n++] = *p++;
            continue;
        }
        p++;
        switch (*p) {
        case 'n': out[n++] = '\n'; break;
        case 't': out[n++] = '\t'; break;
        case 'r': out[n++] = '\r'; break;
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'u': {
            unsigned cp = 0;
            for (int i = 1; i <= 4; i++) cp = cp * 16 + (unsigned)hexval(p[i]);
            p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && p[1] == '\\' && p[2] == 'u') {
                unsigned lo = 0;
                for (int i = 3; i <= 6; i++) lo = lo * 16 + (unsigned)hexval(p[i]);
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                p += 6;
            }
            n += put_utf8(out + n, cp);
            break;
        }
        default: out[n++] = *p; break;
        }
        p++;
    }
    out[n] = '\0';
    *len = n;
    return out;
}

static size_t json_ints(const char *p, int32_t *ids, size_t cap) {
    size_t n = 0;
    if (!p || *p != '[') return 0;
    p++;
    while (*p && *p != ']') {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p) break;
        if (n < cap) ids[n++] = (int32_t)x;
        p = end;
        while (*p == ',' || *p == ' ') p++;
    }
    return n;
}

static void check_golden(const char *model_rel, const char *golden_rel) {
    harness_path path = harness_shared_file(golden_rel);
    vocab *v = load_shared_vocab(model_rel);
    char *all = harness_read_file(path.s, NULL);
    REQUIRE(all != NULL, "cannot read %s", path.s);
    if (!v) {
        free(all);
        return;
    }
    int lines = 0;
    for (char *line = all; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        size_t plen = 0, glen = 0;
        char *prompt = json_string(find_key(line, "prompt"), &plen);
        int32_t want[1024], greedy[1024];
        size_t n_want = json_ints(find_key(line, "tokens"), want, 1024);
        size_t n_greedy = json_ints(find_key(line, "greedy"), greedy, 1024);
        char *greedy_text = json_string(find_key(line, "greedy_text"), &glen);
        EXPECT(prompt && n_want > 0, "%s line %d: no prompt/tokens", golden_rel, lines + 1);
        if (prompt && n_want > 0) {
            vocab_tokens got = {0};
            int rc = vocab_tokenize(v, prompt, plen, true, true, &got);
            expect_tokens(golden_rel, prompt, plen, rc, &got, want, n_want);
            char *text = NULL;
            size_t tlen = 0;
            rc = vocab_detokenize(v, want + 1, n_want - 1, 0, &text, &tlen);
            EXPECT(rc == 0 && tlen == plen && memcmp(text, prompt, plen) == 0,
                   "%s: detokenize(tokens[1:]) != prompt", golden_rel);
            free(text);
            /* With BOS dropped by remove_special, llama.cpp keeps the space. */
            rc = vocab_detokenize(v, want, n_want, VOCAB_DETOK_REMOVE_SPECIAL, &text, &tlen);
            EXPECT(rc == 0 && tlen == plen + 1 && text[0] == ' ' &&
                      memcmp(text + 1, prompt, plen) == 0,
                   "%s: detokenize(tokens, remove_special) != ' ' + prompt", golden_rel);
            free(text);
            vocab_tokens_free(&got);
        }
        if (greedy_text && n_greedy > 0) {
            char *cat = malloc(16 * n_greedy + 1);
            size_t n = 0;
            for (size_t i = 0; i < n_greedy; i++) {
                int32_t w = vocab_token_to_piece(v, greedy[i], cat + n, 16, 0, false);
                EXPECT(w >= 0, "piece of %d", greedy[i]);
                if (w > 0) n += (size_t)w;
            }
            EXPECT(n == glen && memcmp(cat, greedy_text, n) == 0,
                   "%s line %d: pieces of greedy != greedy_text", golden_rel, lines + 1);
            free(cat);
        }
        free(prompt);
        free(greedy_text);
        lines++;
        line = nl ? nl + 1 : NULL;
    }
    printf("%s: %d prompts checked\n", golden_rel, lines);
    EXPECT(lines > 0, "%s has no lines", golden_rel);
    free(all);
    vocab_free(v);
}

TEST(test_stories260K) {
    check_golden("models/stories260K.gguf", "golden/stories260K.jsonl");
}

TEST(test_synth_s_f32) {
    check_golden("models/synth-s-f32.gguf", "golden/synth-s-f32.jsonl");
}

TEST(test_synth_s_q4_k_m) {
    check_golden("models/synth-s-Q4_K_M-mix.gguf", "golden/synth-s-Q4_K_M-mix.jsonl");
}

HARNESS_MAIN("vocab goldens", HARNESS_TEST(test_stories260K), HARNESS_TEST(test_synth_s_f32),
             HARNESS_TEST(test_synth_s_q4_k_m))
