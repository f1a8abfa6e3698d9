/*
 * tessera.h — Tessera's public C API.
 *
 * Every call that can fail returns a status (0 on success, negative on
 * failure) or NULL, and tessera_last_error() then says what went wrong in
 * one line naming the file, key, tensor, flag or device at fault.
 */
#ifndef TESSERA_TESSERA_H
#define TESSERA_TESSERA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The last error of the calling thread, "" if none. */
const char *tessera_last_error(void);

/* The library version, e.g. "0.1.0". */
const char *tessera_version(void);

#ifdef __cplusplus
}
#endif

#endif
