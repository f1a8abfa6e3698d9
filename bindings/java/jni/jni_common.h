/* What the JNI glue's two files share. */
#ifndef TESSERA_JNI_COMMON_H
#define TESSERA_JNI_COMMON_H

#include <jni.h>

#include <tessera/tessera.h>

/* Throw org.tessera.TesseraException with msg. */
void throw_message(JNIEnv *env, const char *msg);
/* Throw org.tessera.TesseraException "what: <tessera_last_error()>". */
void throw_tessera(JNIEnv *env, const char *what);
/* A Java byte[] (UTF-8) as a NUL-terminated malloc'd string, its length in
 * *len_out when not NULL; NULL with an exception pending. */
char *bytes_dup(JNIEnv *env, jbyteArray arr, jsize *len_out);

#endif
