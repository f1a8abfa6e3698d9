/* Public API: model loading, model properties, tokens. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "model/placement.h"
#include "model/public.h"
#include "util/error.h"

tessera_model_params tessera_model_default_params(void) {
    return (tessera_model_params){.devices = NULL, .n_gpu_layers = 0};
}

/* Which of the chosen devices hold what: the first non-CPU device takes
 * offloaded layers, the first CPU device computes the rest. */
void model_pick_devices(host_device *const *devices, int32_t n, host_device **gpu, host_device **cpu) {
    *gpu = NULL;
    *cpu = NULL;
    for (int32_t i = 0; i < n; i++) {
        host_device *d = devices[i];
        if (d->info.kind == TSR_DEVICE_CPU) {
            if (!*cpu) *cpu = d;
        } else if (!*gpu) {
            *gpu = d;
        }
    }
}

/* --mlock: lock the host copy of the weights (the mapping or the read
 * image). A refusal is a warning naming the limit, as llama.cpp does. */
static void weights_lock(const gguf_file *model_file) {
    const gguf_file *f = model_file;
    uint64_t size = 0;
    int err = 0;
    for (int32_t i = 0; (f = gguf_split_shard(model_file, i)) != NULL; i++) { /* each file of a split */
        uint64_t n = gguf_file_size(f) - gguf_data_offset(f);
        size += n;
        if (n > 0 && !err && mlock(gguf_data(f), (size_t)n) != 0) err = errno;
    }
    if (!err) return;
    struct rlimit rl;
    char limit[64] = "unknown";
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
        if (rl.rlim_cur == RLIM_INFINITY) snprintf(limit, sizeof limit, "unlimited");
        else snprintf(limit, sizeof limit, "%llu KiB", (unsigned long long)rl.rlim_cur / 1024);
    }
    host_log(TSR_LOG_WARN, "model",
             "--mlock: cannot lock %.1f MiB of weights in RAM: %s (RLIMIT_MEMLOCK is %s; raise it with "
             "'ulimit -l')",
             (double)size / (1024.0 * 1024.0), strerror(err), limit);
}

tessera_model *tessera_model_load(const char *path, const tessera_model_params *params) {
    tessera_model_params p = params ? *params : tessera_model_default_params();
    double t0 = tessera_now_ms();
    if (!path) {
        error_set("model load: no path given");
        return NULL;
    }
    if (p.n_gpu_layers < 0 && p.n_gpu_layers != TESSERA_NGL_AUTO) {
        error_set("model load: n_gpu_layers %d is negative (TESSERA_NGL_AUTO is %d)", p.n_gpu_layers,
                  TESSERA_NGL_AUTO);
        return NULL;
    }
    if (!host_is_initialized() && tessera_init(NULL) != 0) return NULL;
    tessera_model *tm = calloc(1, sizeof *tm);
    if (!tm) {
        error_set("model load: out of memory");
        return NULL;
    }
    pthread_mutex_init(&tm->mu, NULL);
    tm->n_devices = p.devices && p.devices[0]
                        ? host_select_devices(p.devices, tm->devices, TESSERA_MAX_DEVICES)
                        : host_default_devices(tm->devices, TESSERA_MAX_DEVICES);
    if (tm->n_devices < 0) goto fail;
    if (tm->n_devices == 0) {
        error_set("model load: no compute device available");
        goto fail;
    }
    gguf_file *f = p.no_mmap ? gguf_open_read(path, p.progress, p.progress_user) : gguf_open(path);
    if (!f) goto fail;
    tm->vocab = vocab_load(f);
    if (!tm->vocab) {
        gguf_close(f);
        goto fail;
    }
    host_device *gpu, *cpu;
    model_pick_devices(tm->devices, tm->n_devices, &gpu, &cpu);
    model_placement placement;
    if (model_placement_init(&placement, p.tensor_overrides, p.n_cpu_moe, tm->devices, tm->n_devices, gpu) != 0) {
        gguf_close(f);
        goto fail;
    }
    model_load_params lp = {
        .placement = &placement,
        .n_gpu_layers = !gpu ? 0 : p.n_gpu_layers == TESSERA_NGL_AUTO ? INT32_MAX : p.n_gpu_layers,
        .gpu_device = gpu ? gpu->index : -1,
        .gpu = gpu ? gpu->dev : NULL,
        .cpu_device = cpu ? cpu->index : -1,
        .progress = p.progress,
        .progress_user = p.progress_user,
        .prefault = !p.no_mmap, /* read already */
    };
    if (p.n_gpu_layers > 0 && !gpu)
        host_log(TSR_LOG_WARN, "model", "-ngl %d ignored: no GPU device among the chosen devices",
                 p.n_gpu_layers);
    snprintf(tm->weight_devices, sizeof tm->weight_devices, "%s%s%s", lp.n_gpu_layers > 0 ? gpu->name : "",
             lp.n_gpu_layers > 0 && cpu ? "," : "", cpu ? cpu->name : "");
    tm->m = model_load(f, &lp); /* owns f from here */
    model_placement_free(&placement);
    if (!tm->m) goto fail;
    if (tm->m->gpu && lp.n_gpu_layers == 0) /* only weights placed by name there */
        snprintf(tm->weight_devices, sizeof tm->weight_devices, "%s%s%s", gpu->name, cpu ? "," : "",
                 cpu ? cpu->name : "");
    if (p.use_mlock) weights_lock(tm->m->file);

    const model_hparams *hp = &tm->m->hp;
    gguf_str arch;
    if (gguf_get_str(tm->m->file, "general.architecture", &arch) == 0)
        snprintf(tm->arch, sizeof tm->arch, "%.*s", (int)(arch.len < 31 ? arch.len : 31), arch.ptr);
    snprintf(tm->desc, sizeof tm->desc,
             "%s, %d layers, dim %d, %d heads (%d kv), ffn %d, vocab %d, ctx %d, %.2f M params, %.1f MiB",
             tm->arch, hp->n_layer, hp->n_embd, hp->n_head, hp->n_head_kv, hp->n_ff, hp->n_vocab,
             hp->n_ctx_train, (double)tm->m->n_params / 1e6, (double)tm->m->nbytes / (1024.0 * 1024.0));
    tm->load_ms = tessera_now_ms() - t0;
    return tm;
fail:
    tessera_model_free(tm);
    return NULL;
}

void tessera_model_free(tessera_model *tm) {
    if (!tm) return;
    model_loras_free(tm);
    model_free(tm->m);
    vocab_free(tm->vocab);
    for (int32_t i = 0; i < tm->n_meta; i++) {
        free(tm->meta_keys[i]);
        free(tm->meta_vals[i]);
    }
    free(tm->meta_keys);
    free(tm->meta_vals);
    pthread_mutex_destroy(&tm->mu);
    free(tm);
}

const char *tessera_model_desc(const tessera_model *tm) { return tm->desc; }
const char *tessera_model_arch(const tessera_model *tm) { return tm->arch; }
const char *tessera_model_devices(const tessera_model *tm) { return tm->weight_devices; }
int32_t tessera_model_n_vocab(const tessera_model *tm) { return tm->m->hp.n_vocab; }
int32_t tessera_model_n_ctx_train(const tessera_model *tm) { return tm->m->hp.n_ctx_train; }
int32_t tessera_model_n_embd(const tessera_model *tm) { return tm->m->hp.n_embd; }
int32_t tessera_model_n_layer(const tessera_model *tm) { return tm->m->hp.n_layer; }
uint64_t tessera_model_n_params(const tessera_model *tm) { return tm->m->n_params; }
uint64_t tessera_model_size_bytes(const tessera_model *tm) { return tm->m->nbytes; }

/* The cached copy of key's string value, made on first use (mu held). */
static const char *meta_str_locked(tessera_model *tm, const char *key) {
    for (int32_t i = 0; i < tm->n_meta; i++)
        if (!strcmp(tm->meta_keys[i], key)) return tm->meta_vals[i];
    gguf_str s;
    if (gguf_find_key(tm->m->file, key) < 0) return NULL;
    if (gguf_get_str(tm->m->file, key, &s) != 0) return NULL;
    char **keys = realloc(tm->meta_keys, (size_t)(tm->n_meta + 1) * sizeof *keys);
    if (!keys) return NULL;
    tm->meta_keys = keys;
    char **vals = realloc(tm->meta_vals, (size_t)(tm->n_meta + 1) * sizeof *vals);
    if (!vals) return NULL;
    tm->meta_vals = vals;
    char *k = strdup(key), *v = malloc(s.len + 1);
    if (!k || !v) {
        free(k);
        free(v);
        return NULL;
    }
    memcpy(v, s.ptr, s.len);
    v[s.len] = '\0';
    tm->meta_keys[tm->n_meta] = k;
    tm->meta_vals[tm->n_meta] = v;
    tm->n_meta++;
    return v;
}

const char *tessera_model_meta_str(const tessera_model *cm, const char *key) {
    tessera_model *tm = (tessera_model *)cm; /* the cache is not observable state */
    pthread_mutex_lock(&tm->mu);
    const char *v = meta_str_locked(tm, key);
    pthread_mutex_unlock(&tm->mu);
    return v;
}

/* ---------------------------------------------------------------- tokens */

tessera_token tessera_token_bos(const tessera_model *tm) { return vocab_bos(tm->vocab); }
bool tessera_vocab_adds_bos(const tessera_model *tm) { return vocab_add_bos(tm->vocab); }
tessera_token tessera_token_eos(const tessera_model *tm) { return vocab_eos(tm->vocab); }
tessera_token tessera_token_eot(const tessera_model *tm) { return vocab_eot(tm->vocab); }

bool tessera_token_is_eog(const tessera_model *tm, tessera_token t) {
    return vocab_is_eog(tm->vocab, t);
}

int32_t tessera_tokenize(const tessera_model *tm, const char *text, size_t len,
                         tessera_token *tokens, int32_t max_tokens, bool add_special,
                         bool parse_special) {
    if (!text && len) {
        error_set("tokenize: text is NULL");
        return INT32_MIN;
    }
    if (max_tokens < 0) max_tokens = 0;
    int64_t n = vocab_tokenize_buf(tm->vocab, text ? text : "", len, add_special, parse_special,
                                   tokens, max_tokens);
    if (n == INT64_MIN) return INT32_MIN;
    if (n > INT32_MAX || n < -(int64_t)INT32_MAX) {
        error_set("tokenize: text gives more than %d tokens", INT32_MAX);
        return INT32_MIN;
    }
    return (int32_t)n;
}

int32_t tessera_token_to_piece(const tessera_model *tm, tessera_token token, char *buf,
                               int32_t size, bool render_special) {
    int32_t n = vocab_token_to_piece(tm->vocab, token, buf, size, 0, render_special);
    if (n == INT32_MIN) error_set("token_to_piece: token id %d is out of range", token);
    return n;
}

int32_t tessera_detokenize(const tessera_model *tm, const tessera_token *tokens, int32_t n_tokens,
                           char *buf, int32_t size, bool remove_special, bool render_special) {
    if (n_tokens < 0 || (n_tokens > 0 && !tokens)) {
        error_set("detokenize: bad token list");
        return INT32_MIN;
    }
    unsigned flags = (remove_special ? VOCAB_DETOK_REMOVE_SPECIAL : 0) |
                     (render_special ? VOCAB_DETOK_UNPARSE_SPECIAL : 0);
    return vocab_detokenize_buf(tm->vocab, tokens, (size_t)n_tokens, flags, buf, size);
}
