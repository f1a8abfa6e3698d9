/*
 * jni_mtmd.c — what a Model loads beside its weights: its multimodal
 * projector (an mmproj file, tessera_mtmd.h) with the chat template's
 * prompt text, which a prompt with images needs as text (the projector
 * splits it at its <__media__> markers; Session.nativeEvalMedia in
 * jni_session.c decodes it), and LoRA adapters (Session.nativeSetLoras
 * there uses them). Both are freed with the model.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera_mtmd.h>

#include "jni_common.h"

/* The projector at path for the model; 0 with a TesseraException naming the
 * file and what is wrong. */
JNIEXPORT jlong JNICALL Java_org_tessera_Model_nativeLoadProjector(JNIEnv *env, jclass cls, jlong h,
                                                                  jbyteArray path, jboolean no_offload) {
    (void)cls;
    if (null_handle(env, h, "Model")) return 0;
    char *p = bytes_dup(env, path, "mmproj", NULL);
    if (!p) return 0;
    tessera_mtmd_params mp = tessera_mtmd_default_params();
    mp.no_offload = no_offload;
    tessera_mtmd *mm = tessera_mtmd_load((const tessera_model *)(intptr_t)h, p, &mp);
    free(p);
    if (!mm) throw_tessera(env, "mmproj");
    return (jlong)(intptr_t)mm;
}

JNIEXPORT void JNICALL Java_org_tessera_Model_nativeFreeProjector(JNIEnv *env, jclass cls, jlong h) {
    (void)env;
    (void)cls;
    if (h) tessera_mtmd_free((tessera_mtmd *)(intptr_t)h);
}

/* "mlp", ... (the projector's type). */
JNIEXPORT jstring JNICALL Java_org_tessera_Model_nativeProjectorType(JNIEnv *env, jclass cls, jlong h) {
    (void)cls;
    if (null_handle(env, h, "projector")) return NULL;
    const tessera_mtmd *mm = (const tessera_mtmd *)(intptr_t)h;
    const char *t = tessera_mtmd_projector_type(mm);
    return (*env)->NewStringUTF(env, t ? t : "");
}

JNIEXPORT jboolean JNICALL Java_org_tessera_Model_nativeProjectorVision(JNIEnv *env, jclass cls, jlong h) {
    (void)cls;
    if (null_handle(env, h, "projector")) return JNI_FALSE;
    return tessera_mtmd_supports_vision((const tessera_mtmd *)(intptr_t)h) ? JNI_TRUE : JNI_FALSE;
}

/* vars: the template's variables as JSON (UTF-8), as nativeChatTokens takes
 * them. The rendered prompt's UTF-8 bytes after one byte: 1 when the text
 * begins with BOS (then none is to be added), else 0. */
JNIEXPORT jbyteArray JNICALL Java_org_tessera_Model_nativeChatPrompt(JNIEnv *env, jclass cls, jlong h,
                                                                     jbyteArray vars) {
    (void)cls;
    if (null_handle(env, h, "Model")) return NULL;
    char *json = bytes_dup(env, vars, "vars", NULL);
    if (!json) return NULL;
    jbyteArray out = NULL;
    tessera_chat_template *tmpl = tessera_chat_template_from_model((const tessera_model *)(intptr_t)h, NULL);
    size_t len = 0;
    char *text = tmpl ? tessera_chat_template_apply(tmpl, json, &len) : NULL;
    char *buf = text ? malloc(len + 1) : NULL;
    if (!text) {
        throw_tessera(env, "chat template");
    } else if (!buf) {
        throw_message(env, "out of memory");
    } else {
        buf[0] = tessera_chat_template_text_has_bos(tmpl, text, len) ? 1 : 0;
        memcpy(buf + 1, text, len);
        out = byte_array(env, buf, len + 1);
    }
    free(buf);
    free(text);
    free(json);
    tessera_chat_template_free(tmpl);
    return out;
}

/* ---------------------------------------------------------------- LoRA */

/* The adapter at path for the model (freed with it); 0 with a
 * TesseraException naming the file and the key or tensor at fault. */
JNIEXPORT jlong JNICALL Java_org_tessera_Model_nativeLoraLoad(JNIEnv *env, jclass cls, jlong h, jbyteArray path) {
    (void)cls;
    if (null_handle(env, h, "Model")) return 0;
    char *p = bytes_dup(env, path, "path", NULL);
    if (!p) return 0;
    tessera_lora *l = tessera_lora_load((tessera_model *)(intptr_t)h, p);
    free(p);
    if (!l) throw_tessera(env, "lora");
    return (jlong)(intptr_t)l;
}

/* adapter.lora.alpha (0: none in the file). */
JNIEXPORT jfloat JNICALL Java_org_tessera_Model_nativeLoraAlpha(JNIEnv *env, jclass cls, jlong h) {
    (void)cls;
    if (null_handle(env, h, "LoraAdapter")) return 0;
    return tessera_lora_alpha((const tessera_lora *)(intptr_t)h);
}

/* The weights it adapts. */
JNIEXPORT jint JNICALL Java_org_tessera_Model_nativeLoraNWeights(JNIEnv *env, jclass cls, jlong h) {
    (void)cls;
    if (null_handle(env, h, "LoraAdapter")) return 0;
    return tessera_lora_n_weights((const tessera_lora *)(intptr_t)h);
}
