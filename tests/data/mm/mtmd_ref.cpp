// mtmd_ref — llama.cpp's libmtmd as the reference for Tessera's multimodal
// goldens, through its public headers only (include/llama.h,
// tools/mtmd/mtmd.h, mtmd-helper.h): it runs llama.cpp, it copies none of it.
//
//   mtmd_ref MODEL MMPROJ MEDIA PROMPT N_GREEDY OUT.json
//
// PROMPT holds the media marker <__media__>; it is tokenized by
// mtmd_tokenize with BOS and special tokens parsed. Writes the media chunk's
// embedding rows (mtmd_encode_chunk), the chunks (text tokens, media token
// counts, whether the media is decoded with non-causal attention), and N_GREEDY greedy tokens after the whole prompt with the gap
// between the best two logits at each step, and the logits after the prompt.
// CPU, 2 threads; context and batch 512 tokens, or $MTMD_REF_CTX (long audio).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "llama.h"
#include "mtmd.h"
#include "mtmd-helper.h"

static void quiet(ggml_log_level level, const char *text, void *) {
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: mtmd_ref MODEL MMPROJ MEDIA PROMPT N_GREEDY OUT.json\n");
        return 2;
    }
    llama_log_set(quiet, nullptr);
    mtmd_helper_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) return fprintf(stderr, "cannot load %s\n", argv[1]), 1;
    mtmd_context_params cp = mtmd_context_params_default();
    cp.use_gpu = false;
    cp.n_threads = 2;
    cp.print_timings = false;
    cp.warmup = false;
    mtmd_context *mctx = mtmd_init_from_file(argv[2], model, cp);
    if (!mctx) return fprintf(stderr, "cannot load %s\n", argv[2]), 1;
    mtmd_helper_bitmap_wrapper bw =
        mtmd_helper_bitmap_init_from_file(mctx, argv[3], false, mtmd_helper_init_opt_default());
    if (!bw.bitmap) return fprintf(stderr, "cannot load %s\n", argv[3]), 1;
    mtmd_input_chunks *chunks = mtmd_input_chunks_init();
    mtmd_input_text text = {argv[4], strlen(argv[4]), true, true};
    const mtmd_bitmap *bms[1] = {bw.bitmap};
    if (mtmd_tokenize(mctx, chunks, &text, bms, 1) != 0) return fprintf(stderr, "tokenize\n"), 1;
    int n_greedy = atoi(argv[5]);
    FILE *out = fopen(argv[6], "w");
    if (!out) return 1;
    int n_embd = llama_model_n_embd(model);
    fprintf(out, "{\"n_embd\": %d, \"chunks\": [", n_embd);
    for (size_t i = 0; i < mtmd_input_chunks_size(chunks); i++) {
        const mtmd_input_chunk *c = mtmd_input_chunks_get(chunks, i);
        if (i) fprintf(out, ", ");
        if (mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
            size_t n;
            const llama_token *t = mtmd_input_chunk_get_tokens_text(c, &n);
            fprintf(out, "{\"type\": \"text\", \"tokens\": [");
            for (size_t j = 0; j < n; j++) fprintf(out, "%s%d", j ? ", " : "", t[j]);
            fprintf(out, "]}");
        } else {
            size_t n = mtmd_input_chunk_get_n_tokens(c);
            if (mtmd_encode_chunk(mctx, c) != 0) return fprintf(stderr, "encode\n"), 1;
            const float *e = mtmd_get_output_embd(mctx);
            fprintf(out, "{\"type\": \"%s\", \"n_tokens\": %zu, \"n_pos\": %d, \"non_causal\": %s, \"embd\": [",
                    mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_IMAGE ? "image" : "audio", n,
                    (int)mtmd_input_chunk_get_n_pos(c), mtmd_decode_use_non_causal(mctx, c) ? "true" : "false");
            for (size_t j = 0; j < n * (size_t)n_embd; j++) fprintf(out, "%s%.7g", j ? ", " : "", e[j]);
            fprintf(out, "]}");
        }
    }
    fprintf(out, "], ");
    llama_context_params lp = llama_context_default_params();
    const int n_ctx = getenv("MTMD_REF_CTX") ? atoi(getenv("MTMD_REF_CTX")) : 512;
    lp.n_ctx = n_ctx;
    lp.n_batch = n_ctx;
    lp.n_threads = lp.n_threads_batch = 2;
    lp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    llama_context *lctx = llama_init_from_model(model, lp);
    llama_pos n_past = 0;
    if (mtmd_helper_eval_chunks(mctx, lctx, chunks, 0, 0, n_ctx, true, &n_past) != 0)
        return fprintf(stderr, "eval\n"), 1;
    const llama_vocab *vocab = llama_model_get_vocab(model);
    int n_vocab = llama_vocab_n_tokens(vocab);
    {  // the logits after the prompt, to compare more than the argmax
        const float *lg = llama_get_logits_ith(lctx, -1);
        fprintf(out, "\"logits0\": [");
        for (int v = 0; v < n_vocab; v++) fprintf(out, "%s%.7g", v ? ", " : "", lg[v]);
        fprintf(out, "], ");
    }
    fprintf(out, "\"n_past\": %d, \"greedy\": [", (int)n_past);
    std::vector<float> margins;
    for (int i = 0; i < n_greedy; i++) {
        const float *lg = llama_get_logits_ith(lctx, -1);
        int best = 0, second = -1;
        for (int v = 1; v < n_vocab; v++)
            if (lg[v] > lg[best]) second = best, best = v;
            else if (second < 0 || lg[v] > lg[second]) second = v;
        margins.push_back(lg[best] - lg[second]);
        fprintf(out, "%s%d", i ? ", " : "", best);
        llama_token tok = best;
        llama_batch b = llama_batch_get_one(&tok, 1);
        if (llama_decode(lctx, b) != 0) return fprintf(stderr, "decode\n"), 1;
    }
    fprintf(out, "], \"greedy_margin\": [");
    for (size_t i = 0; i < margins.size(); i++) fprintf(out, "%s%.5g", i ? ", " : "", margins[i]);
    fprintf(out, "]}\n");
    fclose(out);
    llama_free(lctx);
    mtmd_input_chunks_free(chunks);
    mtmd_bitmap_free(bw.bitmap);
    mtmd_free(mctx);
    llama_model_free(model);
    return 0;
}
