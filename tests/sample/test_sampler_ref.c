/*
 * test_sampler_ref — tessera's samplers against llama.cpp's, case by case.
 *
 * tests/sample/sampler-ref.json was written by sampler_ref.cpp (beside this
 * file), a program of ours on llama.cpp's public sampler API (llama.h), from
 * fixed candidate lists: each case is one llama.cpp sampler with its
 * parameters, the candidates in the order given, and what apply left (ids in
 * order, logits, probabilities) or, for the samplers that draw, the tokens
 * (or the kept ids) over a seeded sequence of applies. Here the same step of
 * ours runs on the same input and must leave the same: the same ids in the
 * same order (equal logits included: the tie-breaking), logits and
 * probabilities within float rounding, and the same draws from the same seed
 * (mt19937 and libstdc++'s uniform double, see sample/rng.c). DRY runs on the
 * two vocabularies in tests/data/vocab, whose tokens make the sequence
 * breakers.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera_vocab.h>

#include "harness.h"
#include "sample/sample.h"
#include "util/error.h"

enum { MAX_CANDS = 300 };

static cJSON *cases;

static float jnum(const cJSON *v) {
    if (cJSON_IsString(v)) {
        const char *s = v->valuestring;
        return !strcmp(s, "inf") ? INFINITY : !strcmp(s, "-inf") ? -INFINITY : NAN;
    }
    return (float)v->valuedouble;
}

static double param(const cJSON *c, const char *key) {
    return cJSON_GetObjectItem(cJSON_GetObjectItem(c, "params"), key)->valuedouble;
}

/* The case's input as candidates, in the order given. */
static void load_input(const cJSON *c, sample_cand *storage, sample_cands *out) {
    const cJSON *in = cJSON_GetObjectItem(c, "input");
    size_t n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, in) {
        storage[n] = (sample_cand){.id = cJSON_GetArrayItem(e, 0)->valueint, .logit = jnum(cJSON_GetArrayItem(e, 1))};
        n++;
    }
    out->data = storage;
    out->size = n;
    out->sorted = false;
}

static bool same_float(float a, float b) {
    if (isinf(a) || isinf(b)) return a == b;
    return fabsf(a - b) <= 1e-5f * (1.0f + fabsf(b));
}

/* Counters for the summary line. */
static int n_cases, n_bad;

/* Compare our candidates with the case's "out": ids in order, logits, and p
 * when check_p. */
static void compare_out(const cJSON *c, const sample_cands *got, bool check_p, const char *what) {
    const cJSON *want = cJSON_GetObjectItem(c, "out");
    int n = cJSON_GetArraySize(want);
    n_cases++;
    char *params = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "params"));
    const char *list = cJSON_GetObjectItem(c, "list")->valuestring;
    bool ok = EXPECT((int)got->size == n, "%s %s on %s: %zu candidates left, llama.cpp %d", what, params, list,
                     got->size, n);
    for (int i = 0; ok && i < n; i++) {
        const cJSON *w = cJSON_GetArrayItem(want, i);
        int id = cJSON_GetArrayItem(w, 0)->valueint;
        float lg = jnum(cJSON_GetArrayItem(w, 1)), p = jnum(cJSON_GetArrayItem(w, 2));
        const sample_cand *g = &got->data[i];
        ok = EXPECT(g->id == id && same_float(g->logit, lg) && (!check_p || same_float(g->p, p)),
                    "%s %s on %s: position %d is (%d, %.9g, %.9g), llama.cpp (%d, %.9g, %.9g)", what, params, list, i,
                    (int)g->id, (double)g->logit, (double)g->p, id, (double)lg, (double)p);
    }
    if (!ok) n_bad++;
    free(params);
}

typedef void (*step_fn)(sample_cands *c, const cJSON *cs);

static void run_top_n_sigma(sample_cands *c, const cJSON *cs) { sample_top_n_sigma(c, (float)param(cs, "n")); }
static void run_temp_ext(sample_cands *c, const cJSON *cs) {
    sample_temp_ext(c, (float)param(cs, "temp"), (float)param(cs, "range"), (float)param(cs, "exponent"));
}
static void run_top_k(sample_cands *c, const cJSON *cs) { sample_top_k(c, (int32_t)param(cs, "k")); }
static void run_top_p(sample_cands *c, const cJSON *cs) { sample_top_p(c, (float)param(cs, "p")); }
static void run_min_p(sample_cands *c, const cJSON *cs) { sample_min_p(c, (float)param(cs, "p")); }
static void run_typical(sample_cands *c, const cJSON *cs) { sample_typical(c, (float)param(cs, "p")); }
static void run_temp(sample_cands *c, const cJSON *cs) { sample_temp_ext(c, (float)param(cs, "temp"), 0.0f, 1.0f); }

static const struct {
    const char *name;
    step_fn fn;
    bool check_p; /* llama.cpp computed probabilities */
} steps[] = {
    {"top_n_sigma", run_top_n_sigma, false}, {"temp_ext", run_temp_ext, true}, {"top_k", run_top_k, false},
    {"top_p", run_top_p, true},              {"min_p", run_min_p, false},       {"typical", run_typical, true},
    {"temp", run_temp, false},
};

static void check_apply(const char *name) {
    int which = -1;
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++)
        if (!strcmp(steps[i].name, name)) which = (int)i;
    REQUIRE(which >= 0, "no step %s", name);
    int seen = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        if (strcmp(cJSON_GetObjectItem(c, "sampler")->valuestring, name)) continue;
        sample_cand storage[MAX_CANDS];
        sample_cands cands;
        load_input(c, storage, &cands);
        steps[which].fn(&cands, c);
        /* p is only meaningful where llama.cpp's step computed it (range > 0
         * for temp_ext). */
        bool check_p = steps[which].check_p && (strcmp(name, "temp_ext") || param(c, "range") > 0);
        compare_out(c, &cands, check_p, name);
        seen++;
    }
    EXPECT(seen > 0, "no %s case in the reference file", name);
}

TEST(test_top_n_sigma) { check_apply("top_n_sigma"); }
TEST(test_temp_ext) { check_apply("temp_ext"); }
TEST(test_top_k) { check_apply("top_k"); }
TEST(test_top_p) { check_apply("top_p"); }
TEST(test_min_p) { check_apply("min_p"); }
TEST(test_typical) { check_apply("typical"); }
TEST(test_temp) { check_apply("temp"); }

/* The samplers that draw: each apply on a fresh copy of the input, the
 * sampler's RNG (and mirostat's mu) going on between them. */
static void check_draws(const char *name) {
    int seen = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        if (strcmp(cJSON_GetObjectItem(c, "sampler")->valuestring, name)) continue;
        sample_rng rng;
        sample_rng_seed(&rng, (uint32_t)param(c, "seed"));
        float mu = 2.0f * (strcmp(name, "mirostat") && strcmp(name, "mirostat_v2") ? 0.0f : (float)param(c, "tau"));
        const cJSON *draws = cJSON_GetObjectItem(c, "draws");
        char *params = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "params"));
        const char *list = cJSON_GetObjectItem(c, "list")->valuestring;
        int k = 0;
        bool ok = true;
        const cJSON *d;
        n_cases++;
        cJSON_ArrayForEach(d, draws) {
            sample_cand storage[MAX_CANDS];
            sample_cands cands;
            load_input(c, storage, &cands);
            if (!strcmp(name, "dist_one")) { /* every third apply on a list of one */
                if (k % 3 == 1) cands.size = 0, cands.data[cands.size++] = (sample_cand){.id = 5, .logit = 1.0f};
                int32_t id = sample_dist(&cands, &rng);
                ok = EXPECT(id == d->valueint, "dist_one: draw %d is %d, llama.cpp %d", k, (int)id, d->valueint);
            } else if (!strcmp(name, "xtc") || !strcmp(name, "xtc_one")) {
                if (!strcmp(name, "xtc_one") && k % 3 == 1)
                    cands.size = 0, cands.data[cands.size++] = (sample_cand){.id = 5, .logit = 1.0f};
                sample_xtc(&cands, (float)param(c, "probability"), (float)param(c, "threshold"),
                           (size_t)param(c, "min_keep"), &rng);
                bool same = (int)cands.size == cJSON_GetArraySize(d);
                for (size_t i = 0; same && i < cands.size; i++)
                    same = cands.data[i].id == cJSON_GetArrayItem(d, (int)i)->valueint;
                ok = EXPECT(same, "xtc %s on %s: apply %d kept %zu candidates (first %d), llama.cpp %d", params, list, k,
                            cands.size, (int)cands.data[0].id, cJSON_GetArraySize(d));
            } else {
                int32_t id = !strcmp(name, "dist") ? sample_dist(&cands, &rng)
                             : !strcmp(name, "mirostat")
                                 ? sample_mirostat(&cands, (float)param(c, "tau"), (float)param(c, "eta"),
                                                   (int32_t)param(c, "m"), (int32_t)param(c, "n_vocab"), &mu, &rng)
                                 : sample_mirostat_v2(&cands, (float)param(c, "tau"), (float)param(c, "eta"), &mu, &rng);
                ok = EXPECT(id == d->valueint, "%s %s on %s: draw %d is %d, llama.cpp %d", name, params, list, k,
                            (int)id, d->valueint);
            }
            if (!ok) break;
            k++;
        }
        if (!ok) n_bad++;
        free(params);
        seen++;
    }
    EXPECT(seen > 0, "no %s case in the reference file", name);
}

/* Whole chains in llama.cpp's default order: our chain with the same
 * settings must draw the same tokens (each accepted, for the penalties). */
TEST(test_chain) {
    int seen = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        if (strcmp(cJSON_GetObjectItem(c, "sampler")->valuestring, "chain")) continue;
        sample_cand storage[MAX_CANDS];
        sample_cands cands;
        load_input(c, storage, &cands);
        /* The input as a row of logits by id (ids 0..n-1, -inf for none). */
        float row[MAX_CANDS];
        int32_t n_vocab = 0;
        for (size_t i = 0; i < cands.size; i++)
            if (cands.data[i].id + 1 > n_vocab) n_vocab = cands.data[i].id + 1;
        for (int32_t i = 0; i < n_vocab; i++) row[i] = -INFINITY;
        for (size_t i = 0; i < cands.size; i++) row[cands.data[i].id] = cands.data[i].logit;
        sample_params p = sample_params_default();
        p.seed = (uint32_t)param(c, "seed");
        p.xtc_probability = (float)param(c, "xtc_probability");
        p.xtc_threshold = (float)param(c, "xtc_threshold");
        p.top_n_sigma = (float)param(c, "top_n_sigma");
        p.dynatemp_range = (float)param(c, "dynatemp_range");
        p.penalty_repeat = (float)param(c, "repeat_penalty");
        sample_chain *ch = sample_chain_new(&p, n_vocab);
        REQUIRE(ch, "chain: %s", error_get());
        char *params = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "params"));
        const char *list = cJSON_GetObjectItem(c, "list")->valuestring;
        int k = 0;
        bool ok = true;
        const cJSON *d;
        n_cases++;
        cJSON_ArrayForEach(d, cJSON_GetObjectItem(c, "draws")) {
            int32_t id = sample_chain_sample(ch, row);
            ok = EXPECT(id == d->valueint, "chain %s on %s: draw %d is %d, llama.cpp %d", params, list, k, (int)id,
                        d->valueint);
            if (!ok) break;
            sample_chain_accept(ch, id);
            k++;
        }
        if (!ok) n_bad++;
        free(params);
        sample_chain_free(ch);
        seen++;
    }
    EXPECT(seen > 0, "no chain case in the reference file");
}

TEST(test_dist) {
    check_draws("dist");
    check_draws("dist_one");
}
TEST(test_xtc) {
    check_draws("xtc");
    check_draws("xtc_one");
}
TEST(test_mirostat) { check_draws("mirostat"); }
TEST(test_mirostat_v2) { check_draws("mirostat_v2"); }

/* ------------------------------------------------------------------- DRY */

static int32_t vocab_piece(void *user, int32_t id, char *buf, int32_t size) {
    int32_t n = tessera_vocab_detokenize(user, &id, 1, buf, size, false, true);
    return n < 0 ? 0 : n;
}

static int32_t vocab_tokenize(void *user, const char *text, size_t len, int32_t *out, int32_t cap) {
    return tessera_vocab_tokenize(user, text, len, out, cap, false, false);
}

static void check_dry(const char *vname, const char *file) {
    harness_path path = harness_source_file(file);
    tessera_vocab *v = tessera_vocab_load(path.s);
    REQUIRE(v, "%s: %s", file, tessera_last_error());
    int32_t nv = tessera_vocab_n_tokens(v);
    sample_cand *storage = malloc((size_t)nv * sizeof *storage);
    REQUIRE(storage, "out of memory");
    sample_vocab_fns fns = {vocab_piece, vocab_tokenize, v, nv};
    int seen = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        if (strcmp(cJSON_GetObjectItem(c, "sampler")->valuestring, "dry") ||
            strcmp(cJSON_GetObjectItem(c, "vocab")->valuestring, vname))
            continue;
        const cJSON *br = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "params"), "sequence_breakers");
        const char *strs[8];
        size_t n_br = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, br) strs[n_br++] = e->valuestring;
        sample_dry_breakers b;
        REQUIRE(sample_dry_breakers_build(&b, &fns, strs, n_br) == 0, "breakers: %s", error_get());
        const cJSON *hist = cJSON_GetObjectItem(c, "history");
        sample_history h;
        REQUIRE(sample_history_init(&h, (size_t)cJSON_GetArraySize(hist) + 1) == 0, "history");
        cJSON_ArrayForEach(e, hist) sample_history_push(&h, e->valueint);
        for (int32_t i = 0; i < nv; i++) storage[i] = (sample_cand){.id = i, .logit = (float)(2.0 * sin(0.1 * i))};
        sample_cands cands = {storage, (size_t)nv, false};
        int32_t last_n = (int32_t)param(c, "penalty_last_n");
        sample_dry(&cands, &h, &b, (float)param(c, "multiplier"), (float)param(c, "base"),
                   (int32_t)param(c, "allowed_length"), last_n < 0 ? -1 : last_n);
        /* The changed candidates must be llama.cpp's, with its logits. */
        const cJSON *changed = cJSON_GetObjectItem(c, "changed");
        int n_changed = 0;
        char *params = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "params"));
        bool ok = true;
        for (int32_t i = 0; i < nv && ok; i++) {
            float orig = (float)(2.0 * sin(0.1 * i));
            if (storage[i].logit != orig) n_changed++;
        }
        n_cases++;
        ok = EXPECT(n_changed == cJSON_GetArraySize(changed), "dry %s %s after %d tokens: %d logits changed, llama.cpp %d",
                    vname, params, cJSON_GetArraySize(hist), n_changed, cJSON_GetArraySize(changed));
        cJSON_ArrayForEach(e, changed) {
            int id = cJSON_GetArrayItem(e, 0)->valueint;
            float want = jnum(cJSON_GetArrayItem(e, 1));
            if (!EXPECT(same_float(storage[id].logit, want), "dry %s %s: token %d logit %.9g, llama.cpp %.9g", vname,
                        params, id, (double)storage[id].logit, (double)want))
                ok = false;
        }
        if (!ok) n_bad++;
        free(params);
        sample_history_free(&h);
        sample_dry_breakers_free(&b);
        seen++;
    }
    EXPECT(seen > 0, "no DRY case for %s", vname);
    free(storage);
    tessera_vocab_free(v);
}

TEST(test_dry_gpt2) { check_dry("gpt-2", "tests/data/vocab/ggml-vocab-gpt-2.gguf"); }
TEST(test_dry_spm) { check_dry("llama-spm", "tests/data/vocab/ggml-vocab-llama-spm.gguf"); }

TEST(test_summary) {
    printf("sampler cases compared with llama.cpp: %d, differing: %d\n", n_cases, n_bad);
}

FIXTURE(load_cases) {
    harness_path path = harness_source_file("tests/sample/sampler-ref.json");
    FILE *f = fopen(path.s, "rb");
    REQUIRE(f, "cannot open %s", path.s);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    REQUIRE(text && fread(text, 1, (size_t)n, f) == (size_t)n, "cannot read %s", path.s);
    text[n] = 0;
    fclose(f);
    cJSON *root = cJSON_Parse(text);
    free(text);
    REQUIRE(root, "%s is not JSON", path.s);
    cases = cJSON_GetObjectItem(root, "cases");
    return 0;
}

HARNESS_MAIN_GROUP("sampler-ref", load_cases, NULL, HARNESS_TEST(test_top_n_sigma), HARNESS_TEST(test_temp_ext),
                   HARNESS_TEST(test_top_k), HARNESS_TEST(test_top_p), HARNESS_TEST(test_min_p),
                   HARNESS_TEST(test_typical), HARNESS_TEST(test_temp), HARNESS_TEST(test_dist), HARNESS_TEST(test_xtc), HARNESS_TEST(test_chain),
                   HARNESS_TEST(test_mirostat), HARNESS_TEST(test_mirostat_v2), HARNESS_TEST(test_dry_gpt2),
                   HARNESS_TEST(test_dry_spm), HARNESS_TEST(test_summary))
