/* The architecture registry: names in general.architecture we can run. */
#include <string.h>

#include "model/model.h"
#include "util/error.h"

static const model_arch_info model_archs[] = {
    /* Llama 2/3, TinyLlama, SmolLM, Mistral (no sliding window) */
    {"llama", MODEL_ARCH_LLAMA, TSR_ROPE_NORMAL, false},
    /* Qwen2 / Qwen2.5: biases on Q, K, V; NeoX-style rotary pairs */
    {"qwen2", MODEL_ARCH_QWEN2, TSR_ROPE_NEOX, true},
};
enum { N_ARCHS = sizeof model_archs / sizeof model_archs[0] };

const char *model_arch_list(void) { return "llama, qwen2"; }

const model_arch_info *model_arch_find(const char *name, size_t len) {
    for (int i = 0; i < N_ARCHS; i++)
        if (strlen(model_archs[i].name) == len && !memcmp(model_archs[i].name, name, len))
            return &model_archs[i];
    error_set("architecture '%.*s' is not supported (supported: %s)", (int)(len > 64 ? 64 : len),
              name, model_arch_list());
    return NULL;
}

int model_build_graph(const model *m, kv_cache *kv, int32_t n_tokens, int32_t kv_head,
                      int32_t n_kv, int32_t n_out, model_batch_graph *out) {
    switch (m->hp.arch) {
    case MODEL_ARCH_LLAMA:
    case MODEL_ARCH_QWEN2:
        return llama_build_graph(m, kv, n_tokens, kv_head, n_kv, n_out, out);
    default:
        return error_set("model: no graph builder for architecture %d", (int)m->hp.arch);
    }
}
