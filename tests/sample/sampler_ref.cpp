// sampler_ref VOCAB_GPT2.gguf VOCAB_SPM.gguf OUT.json
// What llama.cpp's samplers do to fixed candidate lists, through its public
// sampler API alone (llama.h: llama_sampler_init_*, llama_sampler_apply on a
// llama_token_data_array), for tests/sample/test_sampler_ref.c to compare
// tessera's samplers against. Each case is one sampler with its parameters,
// the candidates given (id, logit, in the order given) and:
//   "out": the candidates after apply (id, logit, p, in the order left),
//          with "selected" and "sorted" as apply left them;
//   "draws": for samplers that draw (dist, xtc, mirostat), the sequence of
//          apply calls on a fresh copy of the input with one sampler made
//          from "seed": the selected token of each (dist, mirostat) or the
//          kept ids (xtc);
//   "history" (DRY, penalties): tokens given to llama_sampler_accept first;
//          DRY reports only the candidates whose logit changed ("changed").
// Built and run by hand against the peer build (../shared/peer/build.sh,
// llama.cpp of October 2026); its output is tests/sample/sampler-ref.json:
//   L=~/.cache/tessera-peer/llama_cpp_python-0.3.36/vendor/llama.cpp
//   g++ -O2 -std=c++17 tests/sample/sampler_ref.cpp -I$L/include -I$L/ggml/include \
//       -L$L/build/bin -lllama -lggml -lggml-base -Wl,-rpath,$L/build/bin -o sampler_ref
//   ./sampler_ref tests/data/vocab/ggml-vocab-gpt-2.gguf \
//       tests/data/vocab/ggml-vocab-llama-spm.gguf tests/sample/sampler-ref.json
#include "llama.h"
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <algorithm>

typedef std::vector<llama_token_data> cands;

static std::string jstr(const std::string &s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        switch (c) {
        case '"': o += "\\\""; break;
        case '\\': o += "\\\\"; break;
        case '\n': o += "\\n"; break;
        default:
            if (c < 0x20) { char b[8]; snprintf(b, sizeof b, "\\u%04x", c); o += b; }
            else o += (char)c;
        }
    }
    return o + "\"";
}

static std::string jf(double v) {
    if (std::isinf(v)) return v > 0 ? "\"inf\"" : "\"-inf\"";
    if (std::isnan(v)) return "\"nan\"";
    char b[64];
    snprintf(b, sizeof b, "%.9g", v);
    return b;
}

// Fixed candidate lists: "mixed" (12 ids out of order, distinct logits),
// "ties" (equal logits), "wide" (64 ids from a formula), "flat" (near-equal).
static cands list_mixed() {
    const int ids[12] = {7, 3, 11, 0, 9, 5, 1, 10, 2, 8, 6, 4};
    const float lg[12] = {1.5f, 3.25f, -0.5f, 2.0f, 0.75f, 4.0f, -2.0f, 2.5f, 0.0f, 1.0f, -1.25f, 3.0f};
    cands c;
    for (int i = 0; i < 12; i++) c.push_back({ids[i], lg[i], 0.0f});
    return c;
}
static cands list_ties() {
    const int ids[10] = {4, 9, 1, 6, 0, 8, 3, 7, 2, 5};
    const float lg[10] = {2.0f, 3.0f, 2.0f, 3.0f, 1.0f, 2.0f, 3.0f, 0.5f, 1.0f, 2.0f};
    cands c;
    for (int i = 0; i < 10; i++) c.push_back({ids[i], lg[i], 0.0f});
    return c;
}
static cands list_wide() {
    cands c;
    for (int i = 0; i < 64; i++) c.push_back({i, (float)(4.0 * sin(0.37 * i * i + 1.3 * i)), 0.0f});
    return c;
}
static cands list_flat() {
    cands c;
    for (int i = 0; i < 16; i++) c.push_back({i, 1.0f + 0.01f * (float)((i * 7) % 5), 0.0f});
    return c;
}

// "many": 300 ids on 11 logit levels, for the sorts of larger lists.
static cands list_many() {
    cands c;
    for (int i = 0; i < 300; i++) c.push_back({i, 0.5f * (float)((i * 37) % 11), 0.0f});
    return c;
}

struct list_def { const char *name; cands (*make)(); };
static const list_def lists[] = {{"mixed", list_mixed}, {"ties", list_ties}, {"wide", list_wide}, {"flat", list_flat},
                                 {"many", list_many}};

static std::string json_cands(const llama_token_data *c, size_t n) {
    std::string o = "[";
    for (size_t i = 0; i < n; i++) {
        if (i) o += ",";
        o += "[" + std::to_string(c[i].id) + "," + jf(c[i].logit) + "," + jf(c[i].p) + "]";
    }
    return o + "]";
}

static std::string json_input(const cands &c) {
    std::string o = "[";
    for (size_t i = 0; i < c.size(); i++) {
        if (i) o += ",";
        o += "[" + std::to_string(c[i].id) + "," + jf(c[i].logit) + "]";
    }
    return o + "]";
}

static bool first = true;
static FILE *out;

static void emit(const std::string &s) {
    fprintf(out, "%s\n  %s", first ? "" : ",", s.c_str());
    first = false;
}

// One apply on a copy of list.
static void case_apply(const char *sampler, const std::string &params, llama_sampler *smp, const char *list_name,
                       const cands &in) {
    cands c = in;
    llama_token_data_array a = {c.data(), c.size(), -1, false};
    llama_sampler_apply(smp, &a);
    emit("{\"sampler\":" + jstr(sampler) + ",\"params\":{" + params + "},\"list\":" + jstr(list_name) +
         ",\"input\":" + json_input(in) + ",\"out\":" + json_cands(a.data, a.size) +
         ",\"selected\":" + std::to_string(a.selected) + ",\"sorted\":" + (a.sorted ? "true" : "false") + "}");
    llama_sampler_free(smp);
}

// n applies, each on a fresh copy, with one sampler (its RNG and state go on).
static void case_draws(const char *sampler, const std::string &params, llama_sampler *smp, const char *list_name,
                       const cands &in, int n, bool kept_ids) {
    std::string d = "[";
    for (int k = 0; k < n; k++) {
        cands c = in;
        llama_token_data_array a = {c.data(), c.size(), -1, false};
        llama_sampler_apply(smp, &a);
        if (k) d += ",";
        if (kept_ids) {
            d += "[";
            for (size_t i = 0; i < a.size; i++) d += (i ? "," : "") + std::to_string(a.data[i].id);
            d += "]";
        } else {
            llama_token id = a.selected >= 0 ? a.data[a.selected].id : -1;
            d += std::to_string(id);
            llama_sampler_accept(smp, id);
        }
    }
    d += "]";
    emit("{\"sampler\":" + jstr(sampler) + ",\"params\":{" + params + "},\"list\":" + jstr(list_name) +
         ",\"input\":" + json_input(in) + ",\"draws\":" + d + "}");
    llama_sampler_free(smp);
}

static std::string P(const char *k, double v) { return std::string("\"") + k + "\":" + jf(v); }

static void dry_case(const char *vname, const llama_vocab *vocab, float mult, float base, int allowed, int last_n,
                     const std::vector<std::string> &breakers, bool defaults, const std::vector<llama_token> &hist) {
    std::vector<const char *> br;
    for (auto &s : breakers) br.push_back(s.c_str());
    llama_sampler *smp = llama_sampler_init_dry(vocab, mult, base, allowed, last_n, br.data(), br.size());
    for (llama_token t : hist) llama_sampler_accept(smp, t);
    int nv = llama_vocab_n_tokens(vocab);
    cands c;
    for (int i = 0; i < nv; i++) c.push_back({i, (float)(2.0 * sin(0.1 * i)), 0.0f});
    cands in = c;
    llama_token_data_array a = {c.data(), c.size(), -1, false};
    llama_sampler_apply(smp, &a);
    std::string ch = "[";
    bool f1 = true;
    for (size_t i = 0; i < a.size; i++) {
        if (c[i].id != in[i].id || c[i].logit != in[i].logit) {
            ch += std::string(f1 ? "" : ",") + "[" + std::to_string(c[i].id) + "," + jf(c[i].logit) + "]";
            f1 = false;
        }
    }
    ch += "]";
    std::string h = "[";
    for (size_t i = 0; i < hist.size(); i++) h += (i ? "," : "") + std::to_string(hist[i]);
    h += "]";
    std::string b = "[";
    for (size_t i = 0; i < breakers.size(); i++) b += (i ? "," : "") + jstr(breakers[i]);
    b += "]";
    emit("{\"sampler\":\"dry\",\"vocab\":" + jstr(vname) + ",\"params\":{" + P("multiplier", mult) + "," +
         P("base", base) + "," + P("allowed_length", allowed) + "," + P("penalty_last_n", last_n) +
         ",\"sequence_breakers\":" + b + ",\"default_breakers\":" + (defaults ? "true" : "false") +
         "},\"history\":" + h + ",\"size\":" + std::to_string(a.size) + ",\"changed\":" + ch + "}");
    llama_sampler_free(smp);
}

static std::vector<llama_token> tok(const llama_vocab *v, const std::string &s) {
    std::vector<llama_token> t(s.size() + 8);
    int n = llama_tokenize(v, s.c_str(), (int)s.size(), t.data(), (int)t.size(), false, false);
    t.resize(n > 0 ? n : 0);
    return t;
}

static void dry_cases(const char *vname, const char *path) {
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model *m = llama_model_load_from_file(path, mp);
    if (!m) { fprintf(stderr, "cannot load %s\n", path); exit(1); }
    const llama_vocab *v = llama_model_get_vocab(m);
    const std::vector<std::string> defs = {"\n", ":", "\"", "*"};
    const char *texts[] = {
        "the cat sat on the mat. the cat sat on the mat. the cat sat on the",
        "Alice: hello there\nBob: hello there\nAlice: hello there\nBob: hello",
        "one two three four five one two three four five one two three four",
        "a \"quoted *thing* here\" and a \"quoted *thing* here\" and a \"quoted *thing",
        "x y z x y z x y z x y z x y z x y z x y z",
        "def f(x): return x\ndef f(x): return x\ndef f(x):",
    };
    int ti = 0;
    for (const char *t : texts) {
        std::vector<llama_token> h = tok(v, t);
        dry_case(vname, v, 0.8f, 1.75f, 2, 1000, defs, true, h);
        dry_case(vname, v, 1.5f, 2.0f, 3, 64, defs, true, h);
        if (ti % 2 == 0) {
            dry_case(vname, v, 0.8f, 1.75f, 1, 16, defs, true, h);
            dry_case(vname, v, 0.8f, 1.75f, 2, 1000, {}, false, h);
            dry_case(vname, v, 0.8f, 1.75f, 2, 1000, {" the", "five", "\n\n", "re"}, false, h);
            dry_case(vname, v, 0.8f, 1.75f, 2, 0, defs, true, h);
        }
        ti++;
    }
    llama_model_free(m);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: sampler_ref VOCAB_GPT2.gguf VOCAB_SPM.gguf OUT.json\n");
        return 2;
    }
    llama_backend_init();
    out = fopen(argv[3], "w");
    if (!out) { perror(argv[3]); return 1; }
    fprintf(out, "{\"cases\":[");

    for (const list_def &L : lists) {
        cands in = L.make();
        // top-n-sigma
        for (float n : {0.5f, 1.0f, 2.0f, 0.0f, -1.0f})
            case_apply("top_n_sigma", P("n", n), llama_sampler_init_top_n_sigma(n), L.name, in);
        // dynamic temperature (temp_ext)
        const bool big = in.size() > 50; // fewer cases where each is long
        for (float t : {0.8f, 1.0f, 1.5f, 0.0f})
            for (float r : {0.0f, 0.5f, 1.0f})
                for (float e : {1.0f, 0.5f, 2.0f})
                    if (!big || (t != 1.0f && r != 1.0f && e != 0.5f))
                    case_apply("temp_ext", P("temp", t) + "," + P("range", r) + "," + P("exponent", e),
                               llama_sampler_init_temp_ext(t, r, e), L.name, in);
        // the existing steps too, for the order and tie-breaking they leave
        for (int k : {1, 3, 5, 0, 40, 200})
            case_apply("top_k", P("k", k), llama_sampler_init_top_k(k), L.name, in);
        for (float p : {0.5f, 0.9f, 0.95f})
            case_apply("top_p", P("p", p) + "," + P("min_keep", 1), llama_sampler_init_top_p(p, 1), L.name, in);
        for (float p : {0.05f, 0.3f})
            case_apply("min_p", P("p", p) + "," + P("min_keep", 1), llama_sampler_init_min_p(p, 1), L.name, in);
        for (float p : {0.5f, 0.9f})
            case_apply("typical", P("p", p) + "," + P("min_keep", 1), llama_sampler_init_typical(p, 1), L.name,
                       in);
        for (float t : {0.5f, 0.0f})
            case_apply("temp", P("temp", t), llama_sampler_init_temp(t), L.name, in);
        // XTC: the kept ids over a seeded sequence
        for (float p : {1.0f, 0.5f})
            for (float t : {0.1f, 0.05f, 0.2f})
                for (uint32_t seed : {1u, 42u})
                    if (!big || (p == 0.5f && t == 0.1f))
                    case_draws("xtc", P("probability", p) + "," + P("threshold", t) + "," + P("min_keep", 1) +
                               "," + P("seed", seed), llama_sampler_init_xtc(p, t, 1, seed), L.name, in, big ? 12 : 40, true);
        // the draw: dist alone
        for (uint32_t seed : {0u, 1u, 42u, 1234u})
            case_draws("dist", P("seed", seed), llama_sampler_init_dist(seed), L.name, in, 200, false);
        // mirostat v1 and v2 (their own draw and mu update)
        for (uint32_t seed : {1u, 42u})
            for (float tau : {5.0f, 2.0f})
                for (float eta : {0.1f, 0.5f}) {
                    case_draws("mirostat", P("seed", seed) + "," + P("tau", tau) + "," + P("eta", eta) + "," +
                               P("m", 100) + "," + P("n_vocab", 64),
                               llama_sampler_init_mirostat(64, seed, tau, eta, 100), L.name, in, 60, false);
                    case_draws("mirostat_v2", P("seed", seed) + "," + P("tau", tau) + "," + P("eta", eta),
                               llama_sampler_init_mirostat_v2(seed, tau, eta), L.name, in, 60, false);
                }
    }
    // dist on lists of one and of twelve in turn: whether a single
    // candidate takes a number from the generator.
    {
        llama_sampler *smp = llama_sampler_init_dist(7);
        cands mixed = list_mixed(), one = {{5, 1.0f, 0.0f}};
        std::string d = "[";
        for (int k = 0; k < 40; k++) {
            cands c = k % 3 == 1 ? one : mixed;
            llama_token_data_array a = {c.data(), c.size(), -1, false};
            llama_sampler_apply(smp, &a);
            d += (k ? "," : "") + std::to_string(a.data[a.selected].id);
        }
        emit("{\"sampler\":\"dist_one\",\"params\":{\"seed\":7},\"list\":\"mixed\",\"input\":" +
             json_input(mixed) + ",\"draws\":" + d + "]}");
        llama_sampler_free(smp);
    }
    // XTC likewise: does a list of one take a number?
    {
        llama_sampler *smp = llama_sampler_init_xtc(0.5f, 0.1f, 0, 7);
        cands mixed = list_mixed(), one = {{5, 1.0f, 0.0f}};
        std::string d = "[";
        for (int k = 0; k < 40; k++) {
            cands c = k % 3 == 1 ? one : mixed;
            llama_token_data_array a = {c.data(), c.size(), -1, false};
            llama_sampler_apply(smp, &a);
            d += std::string(k ? "," : "") + "[";
            for (size_t i = 0; i < a.size; i++) d += (i ? "," : "") + std::to_string(a.data[i].id);
            d += "]";
        }
        emit("{\"sampler\":\"xtc_one\",\"params\":{\"seed\":7,\"probability\":0.5,\"threshold\":0.1,"
             "\"min_keep\":0},\"list\":\"mixed\",\"input\":" + json_input(mixed) + ",\"draws\":" + d + "]}");
        llama_sampler_free(smp);
    }
    // Whole chains in llama.cpp's default order (as its common sampler
    // builds them): penalties, top-n-sigma, top-k, typical, top-p, min-p,
    // XTC, temperature (dynamic), dist, each apply followed by accept.
    struct chain_def { float xtc_p, xtc_t, top_n_sigma, dyn_range, rep; uint32_t seed; };
    const chain_def chains[] = {{0.5f, 0.05f, -1.0f, 0.0f, 1.0f, 3}, {0.9f, 0.1f, -1.0f, 0.0f, 1.1f, 4},
                                {0.0f, 0.1f, 1.5f, 0.5f, 1.0f, 5},  {1.0f, 0.02f, 2.0f, 0.3f, 1.3f, 6}};
    for (const list_def &L : lists) {
        cands in = L.make(); // as a row of logits: in id order
        std::sort(in.begin(), in.end(), [](const llama_token_data &a, const llama_token_data &b) { return a.id < b.id; });
        for (const chain_def &cd : chains) {
            llama_sampler *ch = llama_sampler_chain_init(llama_sampler_chain_default_params());
            llama_sampler_chain_add(ch, llama_sampler_init_penalties(1000, 64, cd.rep, 0.0f, 0.0f));
            llama_sampler_chain_add(ch, llama_sampler_init_top_n_sigma(cd.top_n_sigma));
            llama_sampler_chain_add(ch, llama_sampler_init_top_k(40));
            llama_sampler_chain_add(ch, llama_sampler_init_typical(1.0f, 0));
            llama_sampler_chain_add(ch, llama_sampler_init_top_p(0.95f, 0));
            llama_sampler_chain_add(ch, llama_sampler_init_min_p(0.05f, 0));
            llama_sampler_chain_add(ch, llama_sampler_init_xtc(cd.xtc_p, cd.xtc_t, 0, cd.seed));
            llama_sampler_chain_add(ch, llama_sampler_init_temp_ext(0.8f, cd.dyn_range, 1.0f));
            llama_sampler_chain_add(ch, llama_sampler_init_dist(cd.seed));
            case_draws("chain",
                       P("xtc_probability", cd.xtc_p) + "," + P("xtc_threshold", cd.xtc_t) + "," +
                           P("top_n_sigma", cd.top_n_sigma) + "," + P("dynatemp_range", cd.dyn_range) + "," +
                           P("repeat_penalty", cd.rep) + "," + P("seed", cd.seed),
                       ch, L.name, in, 60, false);
        }
    }
    dry_cases("gpt-2", argv[1]);
    dry_cases("llama-spm", argv[2]);
    fprintf(out, "\n]}\n");
    fclose(out);
    return 0;
}
