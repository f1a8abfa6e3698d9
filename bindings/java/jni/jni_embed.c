/*
 * jni_embed.c — org.tessera.Embedder: an embedding context
 * (tessera_context_params.embeddings) and tessera_embed, one text at a
 * time (the engine empties the cache before and after each).
 */
#include <stdint.h>
#include <stdlib.h>

#include "jni_common.h"

JNIEXPORT jlong JNICALL Java_org_tessera_Embedder_nativeNew(JNIEnv *env, jclass cls, jlong model, jint n_ctx,
                                                            jint pooling, jint n_threads) {
    (void)cls;
    if (null_handle(env, model, "Model")) return 0;
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = n_ctx > 0 ? (uint32_t)n_ctx : 0;
    cp.n_threads = n_threads > 0 ? n_threads : 0;
    cp.embeddings = true;
    cp.pooling = pooling;
    tessera_context *ctx = tessera_context_new((tessera_model *)(intptr_t)model, &cp);
    if (!ctx) throw_tessera(env, "embedding context");
    return (jlong)(intptr_t)ctx;
}

JNIEXPORT void JNICALL Java_org_tessera_Embedder_nativeFree(JNIEnv *env, jclass cls, jlong h) {
    (void)env;
    (void)cls;
    if (h) tessera_context_free((tessera_context *)(intptr_t)h);
}

/* what: 0 the vector's floats, 1 the pooling, 2 n_ctx. */
JNIEXPORT jint JNICALL Java_org_tessera_Embedder_nativeInt(JNIEnv *env, jclass cls, jlong h, jint what) {
    (void)cls;
    if (null_handle(env, h, "Embedder")) return 0;
    const tessera_context *ctx = (const tessera_context *)(intptr_t)h;
    return what == 0 ? tessera_embed_dim(ctx) : what == 1 ? tessera_context_pooling(ctx)
                                                          : (jint)tessera_context_n_ctx(ctx);
}

/* The vector of tokens (with pooling none: one row per token, row-major),
 * normalised by norm (TESSERA_EMBD_NORM_*). */
JNIEXPORT jfloatArray JNICALL Java_org_tessera_Embedder_nativeEmbed(JNIEnv *env, jclass cls, jlong h,
                                                                    jintArray tokens, jint norm) {
    (void)cls;
    if (null_handle(env, h, "Embedder") || null_arg(env, tokens, "tokens")) return NULL;
    tessera_context *ctx = (tessera_context *)(intptr_t)h;
    jsize n = (*env)->GetArrayLength(env, tokens);
    if (n <= 0) {
        throw_message(env, "embed: no tokens");
        return NULL;
    }
    int64_t dim = tessera_embed_dim(ctx);
    int64_t max = tessera_context_pooling(ctx) == TESSERA_POOLING_NONE ? dim * n : dim;
    tessera_token *toks = malloc((size_t)n * sizeof *toks);
    float *out = dim > 0 && max <= INT32_MAX ? malloc((size_t)max * sizeof *out) : NULL;
    jfloatArray arr = NULL;
    if (!toks || !out) {
        throw_message(env, dim > 0 ? "out of memory" : "embed: not an embedding context");
        goto done;
    }
    (*env)->GetIntArrayRegion(env, tokens, 0, n, (jint *)toks);
    int64_t got = tessera_embed(ctx, toks, n, norm, out, max);
    if (got < 0) {
        throw_tessera(env, "embed");
        goto done;
    }
    arr = (*env)->NewFloatArray(env, (jsize)got);
    if (arr) (*env)->SetFloatArrayRegion(env, arr, 0, (jsize)got, out);
done:
    free(toks);
    free(out);
    return arr;
}
