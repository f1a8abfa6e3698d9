/*
 * tessera_jni.c — the JNI glue behind org.tessera (bindings/java/src): the
 * helpers every file shares, Tessera and Model here, Session in
 * jni_session.c, Embedder in jni_embed.c; over the public C API only.
 * Handles are the C pointers as jlong. Text crosses as UTF-8 byte arrays
 * (Java's own "modified UTF-8" of GetStringUTFChars mangles characters
 * outside the BMP and NUL); the Java side decodes token bytes incrementally
 * (Session.Utf8Pieces) and builds and reads the JSON of chat templates and
 * replies (Json.java). Every native checks the objects it is given (a NULL
 * one is a NullPointerException naming the parameter) and the handle (0 is
 * an IllegalStateException), though the Java side checks first. Uses only
 * libc and pthreads through the engine, so it builds for Android's bionic
 * as it is.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jni_common.h"

void throw_class(JNIEnv *env, const char *name, const char *msg) {
    if ((*env)->ExceptionCheck(env)) return; /* the first exception stands */
    jclass cls = (*env)->FindClass(env, name);
    if (cls) (*env)->ThrowNew(env, cls, msg); /* else NoClassDefFoundError is pending */
}

void throw_message(JNIEnv *env, const char *msg) { throw_class(env, "org/tessera/TesseraException", msg); }

void throw_tessera(JNIEnv *env, const char *what) {
    char msg[1024];
    const char *err = tessera_last_error();
    if (!err) err = "failed";
    if (!what || strncmp(err, what, strlen(what)) == 0) /* not "grammar: grammar: ..." */
        snprintf(msg, sizeof msg, "%.1000s", err);
    else
        snprintf(msg, sizeof msg, "%.200s: %.800s", what, err);
    throw_message(env, msg);
}

bool null_arg(JNIEnv *env, jobject obj, const char *name) {
    if (obj) return false;
    char msg[160];
    snprintf(msg, sizeof msg, "%.140s is null", name);
    throw_class(env, "java/lang/NullPointerException", msg);
    return true;
}

bool null_handle(JNIEnv *env, jlong h, const char *what) {
    if (h) return false;
    char msg[160];
    snprintf(msg, sizeof msg, "%.140s is closed", what);
    throw_class(env, "java/lang/IllegalStateException", msg);
    return true;
}

char *bytes_dup(JNIEnv *env, jbyteArray arr, const char *name, jsize *len_out) {
    if (null_arg(env, arr, name)) return NULL;
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

jintArray int_array(JNIEnv *env, const tessera_token *toks, int32_t n) {
    jintArray arr = (*env)->NewIntArray(env, n);
    if (arr && n > 0) (*env)->SetIntArrayRegion(env, arr, 0, n, (const jint *)toks);
    return arr;
}

jbyteArray byte_array(JNIEnv *env, const void *data, size_t len) {
    if (len > INT32_MAX) {
        throw_message(env, "more than 2 GiB of bytes");
        return NULL;
    }
    jbyteArray arr = (*env)->NewByteArray(env, (jsize)len);
    if (arr && len) (*env)->SetByteArrayRegion(env, arr, 0, (jsize)len, (const jbyte *)data);
    return arr;
}

jintArray tokenize_text(JNIEnv *env, const tessera_model *m, const char *text, size_t len, bool add_special,
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

/* ------------------------------------------------------------ Tessera */

static JavaVM *java_vm;

/* AttachCurrentThread's env argument: JNIEnv ** in Android's jni.h, void **
 * in the JDK's. */
#ifdef __ANDROID__
typedef JNIEnv **attach_env;
#else
typedef void **attach_env;
#endif

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved) {
    (void)reserved;
    java_vm = vm;
    return JNI_VERSION_1_6; /* ART accepts 1.2, 1.4 and 1.6 only; nothing newer is used */
}

/* The app's Tessera.Logger (a global reference) and its method; the lock
 * guards the reference against setLogger on another thread. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static jobject log_target;
static jmethodID log_method;

/* The engine's log callback, on any thread (plugins' workers included):
 * attach it to the JVM for the call when it is not a Java thread. Nothing
 * is called while an exception is pending on the thread, and what the
 * logger throws is dropped. */
static void log_to_java(int32_t level, const char *text, void *user) {
    (void)user;
    JNIEnv *env = NULL;
    bool attached = false;
    if (!java_vm) return;
    jint rc = (*java_vm)->GetEnv(java_vm, (void **)&env, JNI_VERSION_1_6);
    if (rc == JNI_EDETACHED) {
        if ((*java_vm)->AttachCurrentThreadAsDaemon(java_vm, (attach_env)&env, NULL) != JNI_OK) return;
        attached = true;
    } else if (rc != JNI_OK) {
        return;
    }
    if (!(*env)->ExceptionCheck(env)) {
        pthread_mutex_lock(&log_lock);
        jobject target = log_target ? (*env)->NewLocalRef(env, log_target) : NULL;
        jmethodID method = log_method;
        pthread_mutex_unlock(&log_lock);
        if (target) {
            size_t len = strlen(text);
            if (len && text[len - 1] == '\n') len--;
            jbyteArray line = byte_array(env, text, len);
            if (line) (*env)->CallVoidMethod(env, target, method, (jint)level, line);
            (*env)->ExceptionClear(env);
            if (line) (*env)->DeleteLocalRef(env, line);
            (*env)->DeleteLocalRef(env, target);
        }
    }
    if (attached) (*java_vm)->DetachCurrentThread(java_vm);
}

/* sink: an object with void onLine(int, byte[]) (Tessera.LogSink), or NULL
 * for no log. */
JNIEXPORT void JNICALL Java_org_tessera_Tessera_nativeSetLogger(JNIEnv *env, jclass cls, jobject sink) {
    (void)cls;
    jobject ref = NULL;
    jmethodID method = NULL;
    if (sink) {
        jclass sink_cls = (*env)->GetObjectClass(env, sink);
        method = sink_cls ? (*env)->GetMethodID(env, sink_cls, "onLine", "(I[B)V") : NULL;
        if (!method) return;
        ref = (*env)->NewGlobalRef(env, sink);
        if (!ref) return;
    }
    pthread_mutex_lock(&log_lock);
    jobject old = log_target;
    log_target = ref;
    log_method = method;
    pthread_mutex_unlock(&log_lock);
    tessera_log_set(ref ? log_to_java : NULL, NULL);
    if (old) (*env)->DeleteGlobalRef(env, old);
}

/* dirs: plugin folders as UTF-8 byte arrays; NULL means none. */
JNIEXPORT void JNICALL Java_org_tessera_Tessera_nativeInit(JNIEnv *env, jclass cls, jobjectArray dirs) {
    (void)cls;
    jsize n = dirs ? (*env)->GetArrayLength(env, dirs) : 0;
    if (n > 16) n = 16;
    const char *paths[16];
    jsize got = 0;
    for (; got < n; got++) {
        jbyteArray d = (jbyteArray)(*env)->GetObjectArrayElement(env, dirs, got);
        paths[got] = bytes_dup(env, d, "pluginDirs[i]", NULL);
        (*env)->DeleteLocalRef(env, d);
        if (!paths[got]) break;
    }
    if (got == n) {
        tessera_init_params p = {.plugin_dirs = paths, .n_plugin_dirs = n, .verbosity = 0};
        if (tessera_init(&p) != 0) throw_tessera(env, "tessera_init");
    }
    for (jsize i = 0; i < got; i++) free((char *)paths[i]);
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
    jclass string_cls = (*env)->FindClass(env, "java/lang/String");
    if (!string_cls) return NULL;
    jobjectArray out = (*env)->NewObjectArray(env, n, string_cls, NULL);
    for (int32_t i = 0; out && i < n; i++) {
        char line[200];
        snprintf(line, sizeof line, "%.47s %.15s %.127s", devs[i].name, devs[i].kind, devs[i].description);
        jstring s = (*env)->NewStringUTF(env, line);
        if (!s) return NULL;
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

/* overrides: "PATTERN=DEVICE" rules as UTF-8 byte arrays (may be NULL or
 * empty); n_cpu_moe as tessera_model_params takes it. */
JNIEXPORT jlong JNICALL Java_org_tessera_Model_nativeLoad(JNIEnv *env, jclass cls, jbyteArray path,
                                                         jbyteArray devices, jint ngl, jobjectArray overrides,
                                                         jint n_cpu_moe) {
    (void)cls;
    jsize n_ot = overrides ? (*env)->GetArrayLength(env, overrides) : 0;
    char **ot = calloc((size_t)n_ot + 1, sizeof *ot);
    char *p = NULL, *d = NULL;
    tessera_model *m = NULL;
    if (!ot) {
        (*env)->ThrowNew(env, (*env)->FindClass(env, "java/lang/OutOfMemoryError"), "overrides");
        return 0;
    }
    for (jsize i = 0; i < n_ot; i++) {
        jbyteArray r = (jbyteArray)(*env)->GetObjectArrayElement(env, overrides, i);
        ot[i] = bytes_dup(env, r, "overrides[i]", NULL);
        (*env)->DeleteLocalRef(env, r);
        if (!ot[i]) goto done;
    }
    if (!(p = bytes_dup(env, path, "path", NULL))) goto done;
    if (devices && !(d = bytes_dup(env, devices, "devices", NULL))) goto done;
    tessera_model_params mp = tessera_model_default_params();
    mp.devices = d;
    mp.n_gpu_layers = ngl;
    mp.tensor_overrides = n_ot ? (const char *const *)ot : NULL;
    mp.n_cpu_moe = n_cpu_moe;
    m = tessera_model_load(p, &mp);
    if (!m) throw_tessera(env, NULL);
done:
    for (jsize i = 0; i < n_ot; i++) free(ot[i]);
    free(ot);
    free(p);
    free(d);
    return (jlong)(intptr_t)m;
}

JNIEXPORT void JNICALL Java_org_tessera_Model_nativeFree(JNIEnv *env, jclass cls, jlong h) {
    (void)env;
    (void)cls;
    if (h) tessera_model_free((tessera_model *)(intptr_t)h);
}

JNIEXPORT jstring JNICALL Java_org_tessera_Model_nativeString(JNIEnv *env, jclass cls, jlong h, jint what) {
    (void)cls;
    if (null_handle(env, h, "Model")) return NULL;
    const tessera_model *m = (const tessera_model *)(intptr_t)h;
    const char *s = what == 0 ? tessera_model_arch(m) : what == 1 ? tessera_model_desc(m) : tessera_model_devices(m);
    return (*env)->NewStringUTF(env, s ? s : "");
}

JNIEXPORT jint JNICALL Java_org_tessera_Model_nativeInt(JNIEnv *env, jclass cls, jlong h, jint what) {
    (void)cls;
    if (null_handle(env, h, "Model")) return 0;
    const tessera_model *m = (const tessera_model *)(intptr_t)h;
    switch (what) {
    case 0: return tessera_model_n_vocab(m);
    case 1: return tessera_model_n_ctx_train(m);
    case 2: return tessera_model_n_layer(m);
    default: return tessera_model_n_embd(m);
    }
}

JNIEXPORT jintArray JNICALL Java_org_tessera_Model_nativeTokenize(JNIEnv *env, jclass cls, jlong h, jbyteArray text,
                                                                  jboolean add_special, jboolean parse_special) {
    (void)cls;
    if (null_handle(env, h, "Model")) return NULL;
    jsize len = 0;
    char *s = bytes_dup(env, text, "text", &len);
    if (!s) return NULL;
    jintArray out = tokenize_text(env, (const tessera_model *)(intptr_t)h, s, (size_t)len, add_special, parse_special);
    free(s);
    return out;
}

JNIEXPORT jbyteArray JNICALL Java_org_tessera_Model_nativeDetokenize(JNIEnv *env, jclass cls, jlong h,
                                                                     jintArray tokens) {
    (void)cls;
    if (null_handle(env, h, "Model") || null_arg(env, tokens, "tokens")) return NULL;
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
        if (got < 0) throw_tessera(env, "detokenize");
        else out = byte_array(env, buf, (size_t)got);
        free(buf);
    }
    free(toks);
    return out;
}

/* vars: the template's variables as JSON (UTF-8): messages, tools,
 * add_generation_prompt (Model.chatTokens builds it). The rendered
 * prompt's tokens. */
JNIEXPORT jintArray JNICALL Java_org_tessera_Model_nativeChatTokens(JNIEnv *env, jclass cls, jlong h,
                                                                    jbyteArray vars) {
    (void)cls;
    if (null_handle(env, h, "Model")) return NULL;
    const tessera_model *m = (const tessera_model *)(intptr_t)h;
    char *json = bytes_dup(env, vars, "vars", NULL);
    if (!json) return NULL;
    jintArray out = NULL;
    tessera_chat_template *tmpl = tessera_chat_template_from_model(m, NULL);
    if (!tmpl) {
        throw_tessera(env, "chat template");
        free(json);
        return NULL;
    }
    size_t len = 0;
    char *text = tessera_chat_template_apply(tmpl, json, &len);
    if (text)
        out = tokenize_text(env, m, text, len, !tessera_chat_template_text_has_bos(tmpl, text, len), true);
    else
        throw_tessera(env, "chat template");
    free(text);
    free(json);
    tessera_chat_template_free(tmpl);
    return out;
}

/* A reply split into content, reasoning and tool calls (the JSON of
 * tessera_chat_parse_reply, UTF-8); toolNames: the tools offered, UTF-8. */
JNIEXPORT jbyteArray JNICALL Java_org_tessera_Model_nativeParseReply(JNIEnv *env, jclass cls, jlong h,
                                                                     jbyteArray text, jobjectArray tool_names) {
    (void)cls;
    if (null_handle(env, h, "Model") || null_arg(env, tool_names, "toolNames")) return NULL;
    jsize len = 0;
    char *t = bytes_dup(env, text, "text", &len);
    if (!t) return NULL;
    jsize n = (*env)->GetArrayLength(env, tool_names);
    char **names = calloc((size_t)n + 1, sizeof *names);
    jbyteArray out = NULL;
    tessera_chat_template *tmpl = NULL;
    jsize got = 0;
    if (!names) {
        throw_message(env, "out of memory");
        goto done;
    }
    for (; got < n; got++) {
        jbyteArray b = (jbyteArray)(*env)->GetObjectArrayElement(env, tool_names, got);
        names[got] = bytes_dup(env, b, "toolNames[i]", NULL);
        (*env)->DeleteLocalRef(env, b);
        if (!names[got]) goto done;
    }
    tmpl = tessera_chat_template_from_model((const tessera_model *)(intptr_t)h, NULL);
    if (!tmpl) {
        throw_tessera(env, "chat template");
        goto done;
    }
    char *json = tessera_chat_parse_reply(tmpl, t, (size_t)len, (const char *const *)names, (size_t)n);
    if (!json) throw_message(env, "out of memory");
    else out = byte_array(env, json, strlen(json));
    free(json);
done:
    for (jsize i = 0; names && i < got; i++) free(names[i]);
    free(names);
    free(t);
    tessera_chat_template_free(tmpl);
    return out;
}
