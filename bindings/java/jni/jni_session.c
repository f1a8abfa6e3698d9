/*
 * jni_session.c — org.tessera.Session: a context, the tokens it holds, and
 * the generation loop. The session keeps its tokens (prompt, then each
 * token sampled); the KV cache holds all of them but the last sampled one,
 * which the next step decodes. generate() decodes its prompt from position
 * 0 (greedy output is then the CLI's, whatever ran before), in n_batch
 * chunks; resume (Session.continueGenerating, also after loadState) first
 * decodes what the cache lacks, one token as the uninterrupted loop would,
 * so greedy output continues as if never stopped. Between chunks and
 * tokens the loop checks the cancel flag that Session.cancel() sets from
 * any thread, and each token's bytes go to Session.Utf8Pieces.onBytes,
 * whose false (the app's callback said stop, or a stop string matched)
 * ends the loop too. The state (saveState/loadState) is the engine's:
 * tokens, KV cells, last logits.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera_mtmd.h>

#include "jni_common.h"

typedef struct jni_session {
    tessera_model *model; /* borrowed: Java closes sessions before their model */
    tessera_context *ctx;
    atomic_int cancel;
    tessera_token *toks; /* prompt and generated tokens */
    int32_t n_toks, cap;
    int32_t n_prompt; /* toks[0..n_prompt) were the prompt (the grammar starts after it) */
    bool fresh;       /* nativeEvalMedia decoded every token: the logits are the last one's */
} jni_session;

/* The order of Session.Options' ints and floats arrays. */
enum { I_MAX_TOKENS, I_TOP_K, I_LAST_N, I_SEED, I_DRY_ALLOWED, I_DRY_LAST_N, I_MIROSTAT, I_COUNT };
enum { F_TEMP, F_TOP_P, F_MIN_P, F_TYPICAL_P, F_REPEAT, F_FREQ, F_PRESENT, F_DRY_MULT, F_DRY_BASE, F_XTC_P,
       F_XTC_T, F_SIGMA, F_DYN_RANGE, F_DYN_EXP, F_TAU, F_ETA, F_COUNT };

static jni_session *session_of(JNIEnv *env, jlong h) {
    return null_handle(env, h, "Session") ? NULL : (jni_session *)(intptr_t)h;
}

static bool reserve(JNIEnv *env, jni_session *s, int32_t n) {
    if (n <= s->cap) return true;
    int32_t cap = s->cap ? s->cap : 256;
    while (cap < n) cap *= 2;
    tessera_token *t = realloc(s->toks, (size_t)cap * sizeof *t);
    if (!t) {
        throw_message(env, "out of memory");
        return false;
    }
    s->toks = t;
    s->cap = cap;
    return true;
}

JNIEXPORT jlong JNICALL Java_org_tessera_Session_nativeNew(JNIEnv *env, jclass cls, jlong model, jint n_ctx,
                                                           jint n_threads) {
    (void)cls;
    if (null_handle(env, model, "Model")) return 0;
    jni_session *s = calloc(1, sizeof *s);
    if (!s) {
        throw_message(env, "out of memory");
        return 0;
    }
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = n_ctx > 0 ? (uint32_t)n_ctx : 0;
    cp.n_threads = n_threads > 0 ? n_threads : 0;
    s->model = (tessera_model *)(intptr_t)model;
    s->ctx = tessera_context_new(s->model, &cp);
    if (!s->ctx) {
        free(s);
        throw_tessera(env, "context");
        return 0;
    }
    return (jlong)(intptr_t)s;
}

JNIEXPORT void JNICALL Java_org_tessera_Session_nativeFree(JNIEnv *env, jclass cls, jlong h) {
    (void)env;
    (void)cls;
    jni_session *s = (jni_session *)(intptr_t)h;
    if (!s) return;
    tessera_context_free(s->ctx);
    free(s->toks);
    free(s);
}

JNIEXPORT void JNICALL Java_org_tessera_Session_nativeCancel(JNIEnv *env, jclass cls, jlong h) {
    (void)cls;
    jni_session *s = session_of(env, h);
    if (s) atomic_store(&s->cancel, 1);
}

JNIEXPORT void JNICALL Java_org_tessera_Session_nativeSetThreads(JNIEnv *env, jclass cls, jlong h, jint n) {
    (void)cls;
    jni_session *s = session_of(env, h);
    if (s && tessera_context_set_threads(s->ctx, n) != 0) throw_tessera(env, "threads");
}

JNIEXPORT jint JNICALL Java_org_tessera_Session_nativeNCtx(JNIEnv *env, jclass cls, jlong h) {
    (void)cls;
    jni_session *s = session_of(env, h);
    return s ? (jint)tessera_context_n_ctx(s->ctx) : 0;
}

JNIEXPORT jintArray JNICALL Java_org_tessera_Session_nativeTokens(JNIEnv *env, jclass cls, jlong h) {
    (void)cls;
    jni_session *s = session_of(env, h);
    return s ? int_array(env, s->toks, s->n_toks) : NULL;
}

/* The sampler of one generation, the held tokens accepted (the prompt's
 * before the grammar is attached), grammar attached; NULL with an
 * exception. */
static tessera_sampler *make_sampler(JNIEnv *env, jni_session *s, const tessera_sampler_params *sp,
                                     jbyteArray grammar, jbyteArray schema) {
    tessera_sampler *smp = tessera_sampler_new_model(s->model, sp);
    if (!smp) {
        throw_tessera(env, "sampler");
        return NULL;
    }
    /* a medium's rows are negative values, not tokens: the penalties skip them */
    for (int32_t i = 0; i < s->n_prompt; i++)
        if (s->toks[i] >= 0) tessera_sampler_accept(smp, s->toks[i]);
    jbyteArray text = grammar ? grammar : schema;
    if (text) {
        jsize len = 0;
        char *t = bytes_dup(env, text, grammar ? "grammar" : "jsonSchema", &len);
        if (!t) {
            tessera_sampler_free(smp);
            return NULL;
        }
        tessera_grammar *g = grammar ? tessera_grammar_parse(t, (size_t)len, NULL)
                                     : tessera_grammar_from_json_schema(t, (size_t)len);
        free(t);
        if (!g || tessera_sampler_set_grammar(smp, s->model, g) != 0) {
            throw_tessera(env, grammar ? "grammar" : "json schema");
            tessera_grammar_free(g);
            tessera_sampler_free(smp);
            return NULL;
        }
        tessera_grammar_free(g);
    }
    for (int32_t i = s->n_prompt; i < s->n_toks; i++)
        if (s->toks[i] >= 0) tessera_sampler_accept(smp, s->toks[i]);
    return smp;
}

/* Decode toks[from..n_toks) at their positions in n_batch chunks. 1 done,
 * 0 cancelled, -1 failed (exception pending). */
static int decode_range(JNIEnv *env, jni_session *s, int32_t from) {
    int32_t chunk = (int32_t)tessera_context_n_batch(s->ctx);
    if (chunk <= 0) chunk = 512;
    for (int32_t at = from; at < s->n_toks; at += chunk) {
        if (atomic_load(&s->cancel)) return 0;
        int32_t len = s->n_toks - at < chunk ? s->n_toks - at : chunk;
        if (tessera_decode(s->ctx, s->toks + at, len, at, 0) != 0) {
            throw_tessera(env, "decode");
            return -1;
        }
    }
    return 1;
}

/* Make the cache hold every token and the logits of the last: decode what
 * it lacks (the last sampled token, as the uninterrupted loop would), or
 * the last token again when it holds them all (a generation that ended on
 * end-of-generation, or a fresh load). */
static int sync_cache(JNIEnv *env, jni_session *s) {
    if (s->n_toks <= 0) {
        throw_message(env, "nothing to continue: generate first, or load a state");
        return -1;
    }
    int32_t kv = tessera_kv_len(s->ctx);
    if (kv >= s->n_toks) {
        tessera_kv_truncate(s->ctx, s->n_toks - 1);
        kv = tessera_kv_len(s->ctx);
    }
    if (kv > s->n_toks - 1) kv = s->n_toks - 1;
    return decode_range(env, s, kv < 0 ? 0 : kv);
}

/* Give one token's bytes to sink.onBytes; false when it asks to stop or threw. */
static bool deliver(JNIEnv *env, jobject sink, jmethodID on_bytes, const tessera_model *m, tessera_token t) {
    char buf[256];
    int32_t len = tessera_token_to_piece(m, t, buf, sizeof buf, false);
    if (len <= 0) return true;
    jbyteArray arr = byte_array(env, buf, (size_t)len);
    if (!arr) return false;
    jboolean go_on = (*env)->CallBooleanMethod(env, sink, on_bytes, arr);
    (*env)->DeleteLocalRef(env, arr);
    return !(*env)->ExceptionCheck(env) && go_on;
}

/* prompt: the tokens to start from at position 0; resume (prompt ignored,
 * may be NULL): go on from the held tokens. ints/floats: Session.Options
 * (the I_ and F_ orders above); grammar/schema: UTF-8 or NULL. */
JNIEXPORT void JNICALL Java_org_tessera_Session_nativeGenerate(JNIEnv *env, jclass cls, jlong h,
                                                               jintArray prompt_arr, jboolean resume,
                                                               jintArray ints_arr, jfloatArray floats_arr,
                                                               jbyteArray grammar, jbyteArray schema,
                                                               jbyteArray samplers, jbyteArray breakers, jobject sink) {
    (void)cls;
    jni_session *s = session_of(env, h);
    if (!s || (!resume && null_arg(env, prompt_arr, "prompt")) || null_arg(env, ints_arr, "ints") ||
        null_arg(env, floats_arr, "floats") || null_arg(env, sink, "sink"))
        return;
    if ((*env)->GetArrayLength(env, ints_arr) < I_COUNT || (*env)->GetArrayLength(env, floats_arr) < F_COUNT) {
        throw_class(env, "java/lang/IllegalArgumentException", "ints or floats too short");
        return;
    }
    jint ints[I_COUNT];
    jfloat floats[F_COUNT];
    (*env)->GetIntArrayRegion(env, ints_arr, 0, I_COUNT, ints);
    (*env)->GetFloatArrayRegion(env, floats_arr, 0, F_COUNT, floats);
    jclass sink_cls = (*env)->GetObjectClass(env, sink);
    jmethodID on_bytes = sink_cls ? (*env)->GetMethodID(env, sink_cls, "onBytes", "([B)Z") : NULL;
    if (!on_bytes) return;
    uint32_t n_ctx = tessera_context_n_ctx(s->ctx);
    bool fresh = s->fresh;
    s->fresh = false;
    if (!fresh) atomic_store(&s->cancel, 0); /* after nativeEvalMedia: a cancel() since counts */
    int state;
    if (!resume) {
        jsize n = (*env)->GetArrayLength(env, prompt_arr);
        if (n <= 0 || (uint32_t)n >= n_ctx) {
            throw_message(env, n <= 0 ? "the prompt gives no tokens" : "the prompt does not fit the context (nCtx)");
            return;
        }
        if (!reserve(env, s, n)) return;
        (*env)->GetIntArrayRegion(env, prompt_arr, 0, n, (jint *)s->toks);
        s->n_toks = s->n_prompt = n;
        state = decode_range(env, s, 0);
        if (state < 0) s->n_toks = s->n_prompt = 0; /* the cache no longer holds them */
    } else {
        if ((uint32_t)s->n_toks >= n_ctx) {
            throw_message(env, "the context (nCtx) is full");
            return;
        }
        state = fresh ? (atomic_load(&s->cancel) ? 0 : 1) : sync_cache(env, s);
    }
    if (state != 1) return;
    tessera_sampler_params sp = tessera_sampler_default_params();
    sp.temp = floats[F_TEMP];
    sp.top_k = ints[I_TOP_K];
    sp.top_p = floats[F_TOP_P];
    sp.min_p = floats[F_MIN_P];
    sp.typical_p = floats[F_TYPICAL_P];
    sp.penalty_repeat = floats[F_REPEAT];
    sp.penalty_freq = floats[F_FREQ];
    sp.penalty_present = floats[F_PRESENT];
    sp.penalty_last_n = ints[I_LAST_N];
    sp.seed = (uint32_t)ints[I_SEED];
    sp.dry_allowed_length = ints[I_DRY_ALLOWED];
    sp.dry_penalty_last_n = ints[I_DRY_LAST_N] < 0 ? (int32_t)n_ctx : ints[I_DRY_LAST_N];
    sp.mirostat = ints[I_MIROSTAT];
    sp.dry_multiplier = floats[F_DRY_MULT];
    sp.dry_base = floats[F_DRY_BASE];
    sp.xtc_probability = floats[F_XTC_P];
    sp.xtc_threshold = floats[F_XTC_T];
    sp.top_n_sigma = floats[F_SIGMA];
    sp.dynatemp_range = floats[F_DYN_RANGE];
    sp.dynatemp_exponent = floats[F_DYN_EXP];
    sp.mirostat_tau = floats[F_TAU];
    sp.mirostat_eta = floats[F_ETA];
    /* samplers: names joined by ';' (NULL: the default order); breakers:
     * each followed by a NUL (NULL: llama.cpp's). */
    char *order = samplers ? bytes_dup(env, samplers, "samplers", NULL) : NULL;
    jsize br_len = 0;
    char *br = breakers ? bytes_dup(env, breakers, "breakers", &br_len) : NULL;
    const char *br_list[64];
    int32_t n_br = 0;
    if ((samplers && !order) || (breakers && !br)) {
        free(order);
        free(br);
        return;
    }
    for (jsize i = 0; br && i < br_len && n_br < 64; i += (jsize)strlen(br + i) + 1) br_list[n_br++] = br + i;
    sp.samplers = order;
    if (br) {
        sp.dry_sequence_breakers = br_list;
        sp.n_dry_sequence_breakers = n_br;
    }
    tessera_sampler *smp = make_sampler(env, s, &sp, grammar, schema);
    free(order);
    free(br);
    if (!smp) return;
    jint max_tokens = ints[I_MAX_TOKENS];
    for (jint i = 0; i < max_tokens && !atomic_load(&s->cancel); i++) {
        const float *logits = tessera_logits(s->ctx, -1);
        tessera_token t = logits ? tessera_sampler_sample(smp, logits) : -1;
        if (t < 0) {
            throw_tessera(env, "sample");
            break;
        }
        tessera_sampler_accept(smp, t);
        if (tessera_token_is_eog(s->model, t) || !reserve(env, s, s->n_toks + 1)) break;
        s->toks[s->n_toks++] = t;
        if (!deliver(env, sink, on_bytes, s->model, t)) break;
        if ((uint32_t)s->n_toks >= n_ctx) break; /* context full */
        if (i + 1 < max_tokens && tessera_decode(s->ctx, &t, 1, s->n_toks - 1, 0) != 0) {
            throw_tessera(env, "decode");
            break;
        }
    }
    tessera_sampler_free(smp);
}

/* ------------------------------------------------------------- state */

JNIEXPORT jbyteArray JNICALL Java_org_tessera_Session_nativeSaveState(JNIEnv *env, jclass cls, jlong h) {
    (void)cls;
    jni_session *s = session_of(env, h);
    if (!s) return NULL;
    size_t len = 0;
    void *data = tessera_state_save(s->ctx, -1, s->toks, s->n_toks, NULL, &len);
    if (!data) {
        throw_tessera(env, "save state");
        return NULL;
    }
    jbyteArray out = byte_array(env, data, len);
    free(data);
    return out;
}

JNIEXPORT void JNICALL Java_org_tessera_Session_nativeSaveStateFile(JNIEnv *env, jclass cls, jlong h,
                                                                    jbyteArray path) {
    (void)cls;
    jni_session *s = session_of(env, h);
    char *p = s ? bytes_dup(env, path, "path", NULL) : NULL;
    if (!p) return;
    if (tessera_state_save_file(s->ctx, -1, p, s->toks, s->n_toks, NULL) != 0) throw_tessera(env, "save state");
    free(p);
}

/* data (bytes) or path (a file, UTF-8): one of them. The held tokens become
 * the saved ones; the prompt/generated boundary is not saved (a grammar
 * of a continuation starts at the loaded tokens' end). */
static void load_state(JNIEnv *env, jni_session *s, jbyteArray data, jbyteArray path) {
    uint32_t n_ctx = tessera_context_n_ctx(s->ctx);
    tessera_token *toks = malloc(((size_t)n_ctx + 1) * sizeof *toks);
    if (!toks) {
        throw_message(env, "out of memory");
        return;
    }
    int32_t n = 0;
    int rc;
    if (path) {
        char *p = bytes_dup(env, path, "path", NULL);
        if (!p) {
            free(toks);
            return;
        }
        rc = tessera_state_load_file(s->ctx, -1, p, toks, (int32_t)n_ctx + 1, &n, NULL);
        free(p);
    } else {
        jsize len = (*env)->GetArrayLength(env, data);
        jbyte *bytes = malloc((size_t)len + 1);
        if (!bytes) {
            free(toks);
            throw_message(env, "out of memory");
            return;
        }
        (*env)->GetByteArrayRegion(env, data, 0, len, bytes);
        rc = tessera_state_load(s->ctx, -1, bytes, (size_t)len, NULL, toks, (int32_t)n_ctx + 1, &n, NULL);
        free(bytes);
    }
    if (rc != 0) {
        free(toks);
        throw_tessera(env, "load state");
        return;
    }
    free(s->toks);
    s->toks = toks;
    s->fresh = false;
    s->cap = (int32_t)n_ctx + 1;
    s->n_toks = s->n_prompt = n;
}

JNIEXPORT void JNICALL Java_org_tessera_Session_nativeLoadState(JNIEnv *env, jclass cls, jlong h, jbyteArray data) {
    (void)cls;
    jni_session *s = session_of(env, h);
    if (s && !null_arg(env, data, "state")) load_state(env, s, data, NULL);
}

JNIEXPORT void JNICALL Java_org_tessera_Session_nativeLoadStateFile(JNIEnv *env, jclass cls, jlong h,
                                                                    jbyteArray path) {
    (void)cls;
    jni_session *s = session_of(env, h);
    if (s && !null_arg(env, path, "path")) load_state(env, s, NULL, path);
}

/* ------------------------------------------------------------- media */

/* A medium's rows as the session's tokens: a negative value from its content
 * hash (never a vocabulary id, as the Python binding's), so a state or
 * tokens() shows where an image was. */
static tessera_token media_token(const tessera_media *m) {
    unsigned long long h = strtoull(tessera_media_hash(m), NULL, 16);
    return (tessera_token)(-2 - (int32_t)(h & 0x3fffffffu));
}

/* Decode prompt (UTF-8, with one <__media__> marker per image) from an empty
 * cache through the projector proj: images[i] the bytes of image i, or when
 * that is null paths[i] its file (UTF-8). The session's tokens become the
 * text tokens and each medium's rows (media_token), the logits the last
 * one's; nativeGenerate with resume then samples from them. The caller holds
 * the projector's lock (its cache and encode buffer are not shared). */
JNIEXPORT void JNICALL Java_org_tessera_Session_nativeEvalMedia(JNIEnv *env, jclass cls, jlong h, jlong proj,
                                                                jbyteArray prompt, jboolean add_special,
                                                                jobjectArray images, jobjectArray paths) {
    (void)cls;
    /* the objects first: a null one is a NullPointerException whatever the handles */
    if (null_arg(env, prompt, "prompt") || null_arg(env, images, "images") || null_arg(env, paths, "paths")) return;
    jni_session *s = session_of(env, h);
    if (!s || null_handle(env, proj, "projector")) return;
    tessera_mtmd *mm = (tessera_mtmd *)(intptr_t)proj;
    s->fresh = false;
    atomic_store(&s->cancel, 0);
    jsize n_media = (*env)->GetArrayLength(env, images);
    if ((*env)->GetArrayLength(env, paths) != n_media) {
        throw_class(env, "java/lang/IllegalArgumentException", "images and paths differ in length");
        return;
    }
    char *text = bytes_dup(env, prompt, "prompt", NULL);
    tessera_media **media = text ? calloc((size_t)n_media + 1, sizeof *media) : NULL;
    tessera_mtmd_chunks *ch = NULL;
    jsize got = 0;
    if (text && !media) throw_message(env, "out of memory");
    for (; media && got < n_media; got++) {
        jbyteArray b = (jbyteArray)(*env)->GetObjectArrayElement(env, images, got);
        if (b) {
            jsize len = 0;
            char *data = bytes_dup(env, b, "images[i]", &len);
            char label[32];
            snprintf(label, sizeof label, "image %d", (int)got);
            media[got] = data ? tessera_media_from_buffer(data, (size_t)len, label) : NULL;
            free(data);
        } else {
            jbyteArray pb = (jbyteArray)(*env)->GetObjectArrayElement(env, paths, got);
            char *p = bytes_dup(env, pb, "paths[i]", NULL);
            media[got] = p ? tessera_media_from_file(p) : NULL;
            free(p);
            if (pb) (*env)->DeleteLocalRef(env, pb);
        }
        if (b) (*env)->DeleteLocalRef(env, b);
        if (!media[got]) {
            if (!(*env)->ExceptionCheck(env)) throw_tessera(env, NULL);
            break;
        }
    }
    if (media && got == n_media) {
        ch = tessera_mtmd_tokenize(mm, text, media, n_media, add_special, true);
        if (!ch) throw_tessera(env, "prompt");
    }
    if (ch) {
        int32_t n = tessera_mtmd_chunks_n_tokens(ch);
        int32_t n_past = 0;
        if (n <= 0 || (uint32_t)n >= tessera_context_n_ctx(s->ctx)) {
            throw_message(env, n <= 0 ? "the prompt gives no tokens" : "the prompt does not fit the context (nCtx)");
        } else if (reserve(env, s, n)) {
            int32_t at = 0;
            for (int32_t c = 0; c < tessera_mtmd_chunks_count(ch); c++) {
                int32_t k = tessera_mtmd_chunk_n_tokens(ch, c), m = tessera_mtmd_chunk_medium(ch, c);
                const tessera_token *t = tessera_mtmd_chunk_tokens(ch, c, NULL);
                tessera_token v = t || m < 0 || m >= n_media ? 0 : media_token(media[m]);
                for (int32_t i = 0; i < k && at < n; i++) s->toks[at++] = t ? t[i] : v;
            }
            s->n_toks = s->n_prompt = 0;
            tessera_kv_truncate(s->ctx, 0);
            if (tessera_mtmd_eval_chunks(mm, s->ctx, ch, 0, &n_past) != 0 || n_past != n) {
                tessera_kv_truncate(s->ctx, 0);
                throw_tessera(env, "decode");
            } else {
                s->n_toks = s->n_prompt = n;
                s->fresh = true;
            }
        }
    }
    tessera_mtmd_chunks_free(ch);
    for (jsize i = 0; media && i < n_media; i++) tessera_media_free(media[i]);
    free(media);
    free(text);
}

/* ---------------------------------------------------------------- LoRA */

/* The adapters (Model.nativeLoraLoad handles of this session's model) and
 * their scales the next decodes use; none when empty. The cache's tokens
 * were computed with the set before: it is emptied, and a continuation
 * decodes the held tokens again. */
JNIEXPORT void JNICALL Java_org_tessera_Session_nativeSetLoras(JNIEnv *env, jclass cls, jlong h, jlongArray loras,
                                                               jfloatArray scales) {
    (void)cls;
    if (null_arg(env, loras, "loras") || null_arg(env, scales, "scales")) return;
    jni_session *s = session_of(env, h);
    if (!s) return;
    jsize n = (*env)->GetArrayLength(env, loras);
    if ((*env)->GetArrayLength(env, scales) != n) {
        throw_class(env, "java/lang/IllegalArgumentException", "loras and scales differ in length");
        return;
    }
    jlong *hs = malloc(((size_t)n + 1) * sizeof *hs);
    tessera_lora **ls = malloc(((size_t)n + 1) * sizeof *ls);
    float *sc = malloc(((size_t)n + 1) * sizeof *sc);
    if (!hs || !ls || !sc) {
        throw_message(env, "out of memory");
    } else {
        (*env)->GetLongArrayRegion(env, loras, 0, n, hs);
        (*env)->GetFloatArrayRegion(env, scales, 0, n, sc);
        bool ok = true;
        for (jsize i = 0; i < n && ok; i++) {
            ls[i] = (tessera_lora *)(intptr_t)hs[i];
            ok = !null_handle(env, hs[i], "LoraAdapter");
        }
        if (ok && tessera_context_set_loras(s->ctx, ls, sc, n) != 0) {
            throw_tessera(env, "lora");
        } else if (ok) {
            tessera_kv_truncate(s->ctx, 0);
            s->fresh = false;
        }
    }
    free(hs);
    free(ls);
    free(sc);
}
