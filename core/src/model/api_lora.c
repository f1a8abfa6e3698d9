/* Public API: LoRA adapters of a model, and the set a context uses. */
#include <stdlib.h>
#include <string.h>

#include "model/public.h"
#include "util/error.h"

/* The adapter is read and checked without the model's lock (the model is
 * only read); the lock covers the model's list of adapters. */
tessera_lora *tessera_lora_load(tessera_model *tm, const char *path) {
    if (!tm || !path) {
        error_set("lora: no model or no path");
        return NULL;
    }
    tessera_lora *lo = calloc(1, sizeof *lo);
    if (!lo) {
        error_set("%s: out of memory", path);
        return NULL;
    }
    lo->model = tm;
    lo->l = model_lora_load(tm->m, path);
    if (!lo->l) {
        free(lo);
        return NULL;
    }
    pthread_mutex_lock(&tm->mu);
    if (tm->n_loras == tm->cap_loras) {
        int32_t cap = tm->cap_loras ? 2 * tm->cap_loras : 4;
        tessera_lora **a = realloc(tm->loras, (size_t)cap * sizeof *a);
        if (!a) {
            pthread_mutex_unlock(&tm->mu);
            model_lora_free(lo->l);
            free(lo);
            error_set("%s: out of memory", path);
            return NULL;
        }
        tm->loras = a;
        tm->cap_loras = cap;
    }
    tm->loras[tm->n_loras++] = lo;
    pthread_mutex_unlock(&tm->mu);
    return lo;
}

static void lora_destroy(tessera_lora *lo) {
    model_lora_free(lo->l);
    free(lo);
}

void tessera_lora_free(tessera_lora *lo) {
    if (!lo) return;
    tessera_model *tm = lo->model;
    pthread_mutex_lock(&tm->mu);
    for (int32_t i = 0; i < tm->n_loras; i++) {
        if (tm->loras[i] != lo) continue;
        memmove(&tm->loras[i], &tm->loras[i + 1], (size_t)(tm->n_loras - i - 1) * sizeof *tm->loras);
        tm->n_loras--;
        break;
    }
    pthread_mutex_unlock(&tm->mu);
    lora_destroy(lo);
}

void model_loras_free(tessera_model *tm) {
    for (int32_t i = 0; i < tm->n_loras; i++) lora_destroy(tm->loras[i]);
    free(tm->loras);
    tm->loras = NULL;
    tm->n_loras = tm->cap_loras = 0;
}

float tessera_lora_alpha(const tessera_lora *lo) { return lo ? lo->l->alpha : 0.0f; }
const char *tessera_lora_path(const tessera_lora *lo) { return lo ? gguf_path(lo->l->file) : ""; }
int32_t tessera_lora_n_weights(const tessera_lora *lo) { return lo ? lo->l->n_pairs : 0; }

int tessera_context_set_loras(tessera_context *ctx, tessera_lora *const *loras, const float *scales, int32_t n) {
    if (!ctx) return error_set("lora: no context");
    if (n < 0 || (n > 0 && (!loras || !scales))) return error_set("lora: bad adapter list (%d adapters)", n);
    model_lora_use *use = n > 0 ? calloc((size_t)n, sizeof *use) : NULL;
    if (n > 0 && !use) return error_set("lora: out of memory");
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        if (!loras[i] || loras[i]->model != ctx->model) {
            free(use);
            return error_set("lora: adapter %d (%s) is not one of this context's model", i,
                             loras[i] ? tessera_lora_path(loras[i]) : "NULL");
        }
        if (!(scales[i] == scales[i]) || scales[i] > 1e30f || scales[i] < -1e30f) {
            free(use);
            return error_set("lora: adapter %s has scale %g, which is not finite", tessera_lora_path(loras[i]),
                             (double)scales[i]);
        }
        if (scales[i] == 0.0f) continue; /* adds nothing */
        use[k++] = (model_lora_use){.lora = loras[i]->l, .scale = scales[i]};
    }
    bool same = k == ctx->lora.n;
    for (int32_t i = 0; same && i < k; i++)
        same = use[i].lora == ctx->lora_use[i].lora && use[i].scale == ctx->lora_use[i].scale;
    if (same) {
        free(use);
        return 0;
    }
    free(ctx->lora_use);
    ctx->lora_use = use;
    ctx->lora = (model_lora_set){.use = use, .n = k};
    step_graph_drop(&ctx->step); /* its nodes hold the old adapters */
    return 0;
}
