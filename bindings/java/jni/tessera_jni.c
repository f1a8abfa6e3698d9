/*
 * tessera_jni.c — the JNI glue behind org.tessera (bindings/java/src): Tessera
 * and Model here, Session in jni_session.c; over
 * the public C API only. Handles are the C pointers as jlong. Text crosses
 * as UTF-8 byte arrays (Java's own "modified UTF-8" of GetStringUTFChars
 * mangles characters outside the BMP and NUL); the Java side decodes token
 * bytes incrementally (Session.Utf8Pieces). Uses only libc and pthreads
 * through the engine, so it builds for Android's bionic as it is.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jni_common.h"

void throw_message(JNIEnv *env, const char *msg) {
    jclass cls = (*env)->FindClass(env, "org/tessera/TesseraException");
    if (cls) (*env)->ThrowNew(env, cls, msg); /* else NoClassDefFoundError is pending */
}

void throw_tessera(JNIEnv *env, const char *what) {
    char msg[1024];
    const char *err = tessera_last_error();
    if (!what || strncmp(err, what, strlen(what)) == 0) /* not "grammar: grammar: ..." */
        snprintf(msg, sizeof msg, "%.1000s", err);
    else
        snprintf(msg, sizeof msg, "%.200s: %.800s", what, err);
    throw_message(env, msg);
}

char *bytes_dup(JNIEnv *env, jbyteArray arr, jsize *len_out) {
    jsize len = (*env)->GetArrayLength(env, arr);
    char *s = malloc((size_t)len + 1);
    if (!s) {
        throw_message(env, "out of memory");
        return NULL;
    }
    (*env)->GetByteArrayRegion(env, arr, 0, len, (jbyte *)s);
    s[len] = '\0';
    if (len_out) *len_out = len;
    return s;
}

static jintArray int_array(JNIEnv *env, const tessera_token *toks, int32_t n) {
    jintArray arr = (*env)->NewIntArray(env, n);
    if (arr) (*env)->SetIntArrayRegion(env, arr, 0, n, (const jint *)toks);
    return arr;
}

/* ------------------------------------------------------------ Tessera */

JNIEXPORT void JNICALL Java_org_tessera_Tessera_nativeInit(JNIEnv *env, jclass cls, jobjectArray dirs) {
    (void)cls;
    jsize n = dirs ? (*env)->GetArrayLength(env, dirs) : 0;
    if (n > 16) n = 16;
    const char *paths[16];
    jstring strs[16];
    for (jsize i = 0; i < n; i++) {
        strs[i] = (jstring)(*env)->GetObjectArrayElement(env, dirs, i);
        paths[i] = strs[i] ? (*env)->GetStringUTFChars(env, strs[i], NULL) : "";
    }
    tessera_init_params p = {.plugin_dirs = paths, .n_plugin_dirs = n, .verbosity = 0};
    int rc = tessera_init(&p);
    for (jsize i = 0; i < n; i++)
        if (strs[i]) (*env)->ReleaseStringUTFChars(env, strs[i], paths[i]);
    if (rc != 0) throw_tessera(env, "tessera_init");
}

JNIEXPORT jobjectArray JNICALL Java_org_tessera_Tessera_nativeDevices(JNIEnv *env, jclass cls) {
    (void)cls;
    tessera_device_info devs[32];
    int32_t n = tessera_devices(devs, 32);
    if (n < 0) {
        throw_tessera(env, "devices");
        return NULL;
    }
    if (n > 32) n = 32;
    jobjectArray out = (*env)->NewObjectArray(env, n, (*env)->FindClass(env, "java/lang/String"), NULL);
    for (int32_t i = 0; out && i < n; i++) {
        char line[200];
        snprintf(line, sizeof line, "%.47s %.15s %.127s", devs[i].name, devs[i].kind, devs[i].description);
        jstring s = (*env)->NewStringUTF(env, line);
        (*env)->SetObjectArrayElement(env, out, i, s);
        (*env)->DeleteLocalRef(env, s);
    }
    return out;
}

JNIEXPORT jstring JNICALL Java_org_tessera_Tessera_nativeVersion(JNIEnv *env, jclass cls) {
    (void)cls;
    return (*env)->NewStringUTF(env, tessera_version());
}

/* -------------------------------------------------------------- Model */

JNIEXPORT jlong JNICALL Java_org_tessera_Model_nativeLoad(JNIEnv *env, jclass cls, jstring path, jstring devices,
                                                         jint ngl) {
    (void)cls;
    const char *p = (*env)->GetStringUTFChars(env, path, NULL);
    const char *d = devices ? (*env)->GetStringUTFChars(env, devices, NULL) : NULL;
    tessera_model_params mp = tessera_model_default_params();
    mp.devices = d;
    mp.n_gpu_layers = ngl;
    tessera_model *m = tessera_model_load(p, &mp);
    (*env)->ReleaseStringUTFChars(env, path, p);
    if (d) (*env)->ReleaseStringUTFChars(env, devices, d);
    if (!m) throw_tessera(env, NULL);
    return (jlong)(intptr_t)m;
}

JNIEXPORT void JNICALL Java_org_tessera_Model_nativeFree(JNIEnv *env, jclass cls, jlong h) {
    (void)env;
    (void)cls;
    tessera_model_free((tessera_model *)(intptr_t)h);
}

JNIEXPORT jstring JNICALL Java_org_tessera_Model_nativeString(JNIEnv *env, jclass cls, jlong h, jint what) {
    (void)cls;
    const tessera_model *m = (const tessera_model *)(intptr_t)h;
    const char *s = what == 0 ? tessera_model_arch(m) : what == 1 ? tessera_model_desc(m) : tessera_model_devices(m);
    return (*env)->NewStringUTF(env, s ? s : "");
}

JNIEXPORT jint JNICALL Java_org_tessera_Model_nativeInt(JNIEnv *env, jclass cls, jlong h, jint what) {
    (void)env;
    (void)cls;
    const tessera_model *m = (const tessera_model *)(intptr_t)h;
    return what == 0 ? tessera_model_n_vocab(m) : what == 1 ? tessera_model_n_ctx_train(m) : tessera_model_n_layer(m);
}

static jintArray tokenize(JNIEnv *env, const tessera_model *m, const char *text, size_t len, bool add_special,
                          bool parse_special) {
    int32_t n = tessera_tokenize(m, text, len, NULL, 0, add_special, parse_special);
    if (n == INT32_MIN) {
        throw_tessera(env, "tokenize");
        return NULL;
    }
    if (n < 0) n = -n;
    tessera_token *toks = malloc(((size_t)n + 1) * sizeof *toks);
    if (!toks) {
        throw_message(env, "out of memory");
        return NULL;
    }
    n = tessera_tokenize(m, text, len, toks, n, add_special, parse_special);
    jintArray out = n >= 0 ? int_array(env, toks, n) : NULL;
    if (n < 0) throw_tessera(env, "tokenize");
    free(toks);
    return out;
}

JNIEXPORT jintArray JNICALL Java_org_tessera_Model_nativeTokenize(JNIEnv *env, jclass cls, jlong h, jbyteArray text,
                                                                  jboolean add_special, jboolean parse_special) {
    (void)cls;
    jsize len = 0;
    char *s = bytes_dup(env, text, &len);
    if (!s) return NULL;
    jintArray out = tokenize(env, (const tessera_model *)(intptr_t)h, s, (size_t)len, add_special, parse_special);
    free(s);
    return out;
}

JNIEXPORT jbyteArray JNICALL Java_org_tessera_Model_nativeDetokenize(JNIEnv *env, jclass cls, jlong h,
                                                                     jintArray tokens) {
    (void)cls;
    const tessera_model *m = (const tessera_model *)(intptr_t)h;
    jsize n = (*env)->GetArrayLength(env, tokens);
    tessera_token *toks = malloc(((size_t)n + 1) * sizeof *toks);
    if (!toks) {
        throw_message(env, "out of memory");
        return NULL;
    }
    (*env)->GetIntArrayRegion(env, tokens, 0, n, (jint *)toks);
    int32_t need = tessera_detokenize(m, toks, n, NULL, 0, false, false);
    jbyteArray out = NULL;
    if (need == INT32_MIN) {
        throw_tessera(env, "detokenize");
    } else {
        int32_t size = (need < 0 ? -need : need) + 1;
        char *buf = malloc((size_t)size);
        int32_t got = buf ? tessera_detokenize(m, toks, n, buf, size, false, false) : INT32_MIN;
        if (got < 0) {
            throw_tessera(env, "detokenize");
        } else {
            out = (*env)->NewByteArray(env, got);
            if (out) (*env)->SetByteArrayRegion(env, out, 0, got, (const jbyte *)buf);
        }
        free(buf);
    }
    free(toks);
    return out;
}

/* roles/contents: arrays of UTF-8 byte arrays. The rendered prompt's tokens. */
JNIEXPORT jintArray JNICALL Java_org_tessera_Model_nativeChatTokens(JNIEnv *env, jclass cls, jlong h,
                                                                    jobjectArray roles, jobjectArray contents) {
    (void)cls;
    const tessera_model *m = (const tessera_model *)(intptr_t)h;
    jsize n = (*env)->GetArrayLength(env, roles);
    tessera_chat_message *msgs = calloc((size_t)n + 1, sizeof *msgs);
    jintArray out = NULL;
    char *text = NULL;
    tessera_chat_template *tmpl = msgs ? tessera_chat_template_from_model(m, NULL) : NULL;
    if (!tmpl) {
        if (msgs) throw_tessera(env, "chat template");
        else throw_message(env, "out of memory");
        goto done;
    }
    for (jsize i = 0; i < n; i++) {
        jbyteArray r = (*env)->GetObjectArrayElement(env, roles, i);
        jbyteArray c = (*env)->GetObjectArrayElement(env, contents, i);
        msgs[i].role = bytes_dup(env, r, NULL);
        msgs[i].content = msgs[i].role ? bytes_dup(env, c, NULL) : NULL;
        (*env)->DeleteLocalRef(env, r);
        (*env)->DeleteLocalRef(env, c);
        if (!msgs[i].content) goto done;
    }
    size_t len = 0;
    text = tessera_chat_template_render(tmpl, msgs, (size_t)n, true, &len);
    if (!text) {
        throw_tessera(env, "chat template");
        goto done;
    }
    out = tokenize(env, m, text, len, !tessera_chat_template_text_has_bos(tmpl, text, len), true);
done:
    for (jsize i = 0; msgs && i < n; i++) {
        free((char *)msgs[i].role);
        free((char *)msgs[i].content);
    }
    free(msgs);
    free(text);
    tessera_chat_template_free(tmpl);
    return out;
}
