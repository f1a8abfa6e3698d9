// golden_lora MODEL PROMPTS.jsonl OUT.jsonl n_greedy n_ctx [LORA SCALE]...
// ../shared/peer/golden_gen.cpp with LoRA adapters (llama_adapter_lora_init,
// llama_set_adapters_lora): reference outputs of a model with adapters from
// llama.cpp (libllama) in the format of shared/golden/*.jsonl. Built like
// golden_gen (tests/data/README.md says how; not part of the build).
// PROMPTS.jsonl: one {"prompt": "...", "special": false} per line (special: parse special tokens).
// greedy_pieces: the text of each greedy token (none for an end-of-generation token).
// Flash attention off, 2 threads, f16 KV cache: llama.cpp's plain CPU path.
#include "llama.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <fstream>
#include <algorithm>

static std::string jstr(const std::string &s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        switch (c) {
        case '"': o += "\\\""; break; case '\\': o += "\\\\"; break;
        case '\n': o += "\\n"; break; case '\r': o += "\\r"; break; case '\t': o += "\\t"; break;
        default: if (c < 0x20) { char b[8]; snprintf(b, sizeof b, "\\u%04x", c); o += b; } else o += (char)c;
        }
    }
    return o + "\"";
}
// minimal extraction of "prompt" (JSON string with escapes) and "special" from one line
static bool parse_line(const std::string &l, std::string &prompt, bool &special) {
    size_t k = l.find("\"prompt\""); if (k == std::string::npos) return false;
    k = l.find('"', l.find(':', k) + 1) + 1; prompt.clear();
    for (; k < l.size() && l[k] != '"'; k++) {
        if (l[k] == '\\') { char e = l[++k];
            if (e == 'n') prompt += '\n'; else if (e == 't') prompt += '\t'; else if (e == 'r') prompt += '\r';
            else if (e == 'u') { unsigned cp = strtoul(l.substr(k + 1, 4).c_str(), nullptr, 16); k += 4;
                if (cp < 0x80) prompt += (char)cp; else if (cp < 0x800) { prompt += (char)(0xC0 | (cp >> 6)); prompt += (char)(0x80 | (cp & 63)); }
                else { prompt += (char)(0xE0 | (cp >> 12)); prompt += (char)(0x80 | ((cp >> 6) & 63)); prompt += (char)(0x80 | (cp & 63)); } }
            else prompt += e;
        } else prompt += l[k];
    }
    special = l.find("\"special\": true") != std::string::npos || l.find("\"special\":true") != std::string::npos;
    return true;
}

int main(int argc, char **argv) {
    if (argc < 6 || (argc - 6) % 2) { fprintf(stderr, "usage: golden_lora MODEL PROMPTS.jsonl OUT.jsonl n_greedy n_ctx [LORA SCALE]...\n"); return 2; }
    int n_greedy = argc > 4 ? atoi(argv[4]) : 64, n_ctx = argc > 5 ? atoi(argv[5]) : 0;
    llama_backend_init();
    llama_model_params mp = llama_model_default_params(); mp.n_gpu_layers = 0;
    llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
    std::vector<llama_adapter_lora *> loras; std::vector<float> scales;
    for (int a = 6; a + 1 < argc; a += 2) {
        llama_adapter_lora *l = llama_adapter_lora_init(model, argv[a]);
        if (!l) { fprintf(stderr, "cannot load adapter %s\n", argv[a]); return 1; }
        loras.push_back(l); scales.push_back((float)atof(argv[a + 1]));
    }
    const llama_vocab *vocab = llama_model_get_vocab(model);
    int nv = llama_vocab_n_tokens(vocab);
    std::ifstream in(argv[2]); std::ofstream out(argv[3]); std::string line;
    while (std::getline(in, line)) {
        std::string prompt; bool special;
        if (!parse_line(line, prompt, special)) continue;
        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = n_ctx; cp.n_batch = 4096; cp.n_ubatch = 512; cp.n_threads = 2; cp.n_threads_batch = 2;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
        llama_context *ctx = llama_init_from_model(model, cp);
        if (!loras.empty() && llama_set_adapters_lora(ctx, loras.data(), loras.size(), scales.data()) != 0) { fprintf(stderr, "cannot set adapters\n"); return 1; }
        std::vector<llama_token> toks(prompt.size() + 16);
        int nt = llama_tokenize(vocab, prompt.c_str(), prompt.size(), toks.data(), toks.size(), true, special);
        toks.resize(nt);
        llama_batch b = llama_batch_init(nt, 0, 1);
        for (int i = 0; i < nt; i++) { b.token[i] = toks[i]; b.pos[i] = i; b.n_seq_id[i] = 1; b.seq_id[i][0] = 0; b.logits[i] = 1; }
        b.n_tokens = nt;
        if (llama_decode(ctx, b)) { fprintf(stderr, "decode failed\n"); return 1; }
        std::string top = "[", all = "[";
        for (int i = 0; i < nt; i++) {
            const float *lg = llama_get_logits_ith(ctx, i);
            std::vector<int> idx(nv); for (int j = 0; j < nv; j++) idx[j] = j;
            std::partial_sort(idx.begin(), idx.begin() + 8, idx.end(), [&](int a, int c) { return lg[a] > lg[c]; });
            top += i ? ",[" : "[";
            for (int j = 0; j < 8; j++) { char s[64]; snprintf(s, sizeof s, "%s[%d,%g]", j ? "," : "", idx[j], lg[idx[j]]); top += s; }
            top += "]";
            if (nv <= 1024) { all += i ? ",[" : "["; for (int j = 0; j < nv; j++) { char s[32]; snprintf(s, sizeof s, "%s%g", j ? "," : "", lg[j]); all += s; } all += "]"; }
        }
        top += "]"; all += "]";
        llama_batch_free(b);
        std::string greedy = "[", margin = "[", pieces = "[", text; int pos = nt;
        const float *lg = llama_get_logits_ith(ctx, nt - 1);
        for (int s = 0; s < n_greedy; s++) {
            int best = 0, second = -1;
            for (int j = 1; j < nv; j++) { if (lg[j] > lg[best]) { second = best; best = j; } else if (second < 0 || lg[j] > lg[second]) second = j; }
            char sbuf[64]; snprintf(sbuf, sizeof sbuf, "%s%d", s ? "," : "", best); greedy += sbuf;
            snprintf(sbuf, sizeof sbuf, "%s%g", s ? "," : "", lg[best] - lg[second]); margin += sbuf;
            if (llama_vocab_is_eog(vocab, best)) break;
            char piece[256]; int n = llama_token_to_piece(vocab, best, piece, sizeof piece, 0, false); std::string ps = n > 0 ? std::string(piece, n) : std::string();
            text += ps; pieces += (s ? "," : "") + jstr(ps);
            llama_token t = best; llama_batch one = llama_batch_get_one(&t, 1); (void)pos;
            if (llama_decode(ctx, one)) { fprintf(stderr, "decode failed (context full?)\n"); break; }
            lg = llama_get_logits_ith(ctx, -1); pos++;
        }
        greedy += "]"; margin += "]"; pieces += "]";
        std::string tks = "["; for (int i = 0; i < nt; i++) { tks += (i ? "," : "") + std::to_string(toks[i]); } tks += "]";
        out << "{\"prompt\":" << jstr(prompt) << (special ? ",\"special\":true" : "") << ",\"tokens\":" << tks << ",\"top_logits\":" << top
            << ",\"all_logits\":" << (nv <= 1024 ? all : std::string("null")) << ",\"greedy\":" << greedy
            << ",\"greedy_margin\":" << margin << ",\"greedy_pieces\":" << pieces << ",\"greedy_text\":" << jstr(text) << "}\n";
        llama_free(ctx);
        fprintf(stderr, "%s: %d prompt tokens, greedy done\n", argv[1], nt);
    }
    llama_model_free(model);
    return 0;
}
