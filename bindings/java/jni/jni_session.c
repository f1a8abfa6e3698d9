/*
 * jni_session.c — org.tessera.Session: a context and the generation loop.
 * Each generate() decodes its prompt from position 0 (greedy output is then
 * the CLI's, whatever ran before), in n_batch chunks; between chunks and
 * tokens it checks the cancel flag that Session.cancel() sets from any
 * thread, and each token's bytes go to Session.Utf8Pieces.onBytes, whose
 * false (the app's callback said stop) ends the loop too.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jni_common.h"

typedef struct jni_session {
    tessera_model *model; /* borrowed: Java closes sessions before their model */
    tessera_context *ctx;
    atomic_int cancel;
} jni_session;

JNIEXPORT jlong JNICALL Java_org_tessera_Session_nativeNew(JNIEnv *env, jclass cls, jlong model, jint n_ctx) {
    (void)cls;
    jni_session *s = calloc(1, sizeof *s);
    if (!s) {
        throw_message(env, "out of memory");
        return 0;
    }
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = n_ctx > 0 ? (uint32_t)n_ctx : 0;
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
    tessera_context_free(s->ctx);
    free(s);
}

JNIEXPORT void JNICALL Java_org_tessera_Session_nativeCancel(JNIEnv *env, jclass cls, jlong h) {
    (void)env;
    (void)cls;
    atomic_store(&((jni_session *)(intptr_t)h)->cancel, 1);
}

/* The sampler of one generation, prompt accepted, grammar attached; NULL
 * with an exception. */
static tessera_sampler *make_sampler(JNIEnv *env, jni_session *s, const tessera_sampler_params *sp,
                                     jstring grammar, jstring schema, const tessera_token *prompt, jsize n) {
    tessera_sampler *smp = tessera_sampler_new(tessera_model_n_vocab(s->model), sp);
    if (!smp) {
        throw_tessera(env, "sampler");
        return NULL;
    }
    for (jsize i = 0; i < n; i++) tessera_sampler_accept(smp, prompt[i]);
    jstring text = grammar ? grammar : schema;
    if (!text) return smp;
    const char *t = (*env)->GetStringUTFChars(env, text, NULL);
    tessera_grammar *g = grammar ? tessera_grammar_parse(t, strlen(t), NULL)
                                 : tessera_grammar_from_json_schema(t, strlen(t));
    (*env)->ReleaseStringUTFChars(env, text, t);
    if (!g || tessera_sampler_set_grammar(smp, s->model, g) != 0) {
        throw_tessera(env, grammar ? "grammar" : "json schema");
        tessera_grammar_free(g);
        tessera_sampler_free(smp);
        return NULL;
    }
    tessera_grammar_free(g);
    return smp;
}

/* Decode the prompt from position 0 in n_batch chunks. 1 done, 0 cancelled,
 * -1 failed (exception pending). */
static int decode_prompt(JNIEnv *env, jni_session *s, const tessera_token *prompt, jsize n) {
    int32_t chunk = (int32_t)tessera_context_n_batch(s->ctx);
    if (chunk <= 0) chunk = 512;
    for (int32_t at = 0; at < n; at += chunk) {
        if (atomic_load(&s->cancel)) return 0;
        int32_t len = n - at < chunk ? n - at : chunk;
        if (tessera_decode(s->ctx, prompt + at, len, at, 0) != 0) {
            throw_tessera(env, "decode");
            return -1;
        }
    }
    return 1;
}

/* Give one token's bytes to sink.onBytes; false when it asks to stop or threw. */
static bool deliver(JNIEnv *env, jobject sink, jmethodID on_bytes, const tessera_model *m, tessera_token t) {
    char buf[256];
    int32_t len = tessera_token_to_piece(m, t, buf, sizeof buf, false);
    if (len <= 0) return true;
    jbyteArray arr = (*env)->NewByteArray(env, len);
    if (!arr) return false;
    (*env)->SetByteArrayRegion(env, arr, 0, len, (const jbyte *)buf);
    jboolean go_on = (*env)->CallBooleanMethod(env, sink, on_bytes, arr);
    (*env)->DeleteLocalRef(env, arr);
    return go_on && !(*env)->ExceptionCheck(env);
}

JNIEXPORT void JNICALL Java_org_tessera_Session_nativeGenerate(
    JNIEnv *env, jclass cls, jlong h, jintArray prompt_arr, jint max_tokens, jfloat temp, jint top_k, jfloat top_p,
    jfloat min_p, jfloat repeat_penalty, jint repeat_last_n, jint seed, jstring grammar, jstring schema, jobject sink) {
    (void)cls;
    jni_session *s = (jni_session *)(intptr_t)h;
    jmethodID on_bytes = (*env)->GetMethodID(env, (*env)->GetObjectClass(env, sink), "onBytes", "([B)Z");
    if (!on_bytes) return;
    jsize n = (*env)->GetArrayLength(env, prompt_arr);
    if (n <= 0 || (uint32_t)n >= tessera_context_n_ctx(s->ctx)) {
        throw_message(env, n <= 0 ? "the prompt gives no tokens" : "the prompt does not fit the context (nCtx)");
        return;
    }
    tessera_token *prompt = malloc((size_t)n * sizeof *prompt);
    if (!prompt) {
        throw_message(env, "out of memory");
        return;
    }
    (*env)->GetIntArrayRegion(env, prompt_arr, 0, n, (jint *)prompt);
    atomic_store(&s->cancel, 0);
    tessera_sampler_params sp = tessera_sampler_default_params();
    sp.temp = temp;
    sp.top_k = top_k;
    sp.top_p = top_p;
    sp.min_p = min_p;
    sp.penalty_repeat = repeat_penalty;
    sp.penalty_last_n = repeat_last_n;
    sp.seed = (uint32_t)seed;
    tessera_sampler *smp = make_sampler(env, s, &sp, grammar, schema, prompt, n);
    int state = smp ? decode_prompt(env, s, prompt, n) : -1;
    int32_t pos = n;
    for (jint i = 0; state == 1 && i < max_tokens && !atomic_load(&s->cancel); i++) {
        tessera_token t = tessera_sampler_sample(smp, tessera_logits(s->ctx, -1));
        if (t < 0) {
            throw_tessera(env, "sample");
            break;
        }
        tessera_sampler_accept(smp, t);
        if (tessera_token_is_eog(s->model, t) || !deliver(env, sink, on_bytes, s->model, t)) break;
        if ((uint32_t)pos + 1 >= tessera_context_n_ctx(s->ctx)) break; /* context full */
        if (i + 1 < max_tokens && tessera_decode(s->ctx, &t, 1, pos++, 0) != 0) {
            throw_tessera(env, "decode");
            break;
        }
    }
    tessera_sampler_free(smp);
    free(prompt);
}
