/* What the JNI glue's files share. */
#ifndef TESSERA_JNI_COMMON_H
#define TESSERA_JNI_COMMON_H

#include <jni.h>
#include <stdbool.h>
#include <stddef.h>

#include <tessera/tessera.h>

/* Throw an instance of class cls (a JNI class name) with msg. */
void throw_class(JNIEnv *env, const char *cls, const char *msg);
/* Throw org.tessera.TesseraException with msg. */
void throw_message(JNIEnv *env, const char *msg);
/* Throw org.tessera.TesseraException "what: <tessera_last_error()>". */
void throw_tessera(JNIEnv *env, const char *what);
/* True, with NullPointerException "<name> is null" pending, when obj is
 * NULL. Every native checks each object it takes before it touches it: the
 * Java side checks first, but a native is never the one to crash. */
bool null_arg(JNIEnv *env, jobject obj, const char *name);
/* True, with IllegalStateException "<what> is closed" pending, when the
 * handle is 0. */
bool null_handle(JNIEnv *env, jlong h, const char *what);
/* A Java byte[] (UTF-8) as a NUL-terminated malloc'd string, its length in
 * *len_out when not NULL; NULL with an exception pending (name: the
 * parameter named when arr is NULL). */
char *bytes_dup(JNIEnv *env, jbyteArray arr, const char *name, jsize *len_out);
/* A jintArray of toks[0..n); NULL with an exception pending. */
jintArray int_array(JNIEnv *env, const tessera_token *toks, int32_t n);
/* A jbyteArray of data[0..len); NULL with an exception pending. */
jbyteArray byte_array(JNIEnv *env, const void *data, size_t len);
/* The tokens of text[0..len); NULL with an exception pending. */
jintArray tokenize_text(JNIEnv *env, const tessera_model *m, const char *text, size_t len, bool add_special,
                        bool parse_special);

#endif
