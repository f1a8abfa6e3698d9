/*
 * chat — chat templates: detect the family of a model's Jinja template and
 * render a conversation the way that template does.
 *
 * No Jinja engine: each family's reference template is rendered by a small
 * function (render.c) and detected by markers only that family uses
 * (detect.c). The public calls are declared in tessera.h
 * (tessera_chat_format_detect, tessera_chat_render, ...); this header adds
 * what the CLI and tests use beyond them.
 */
#ifndef TESSERA_CHAT_H
#define TESSERA_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include <tessera/tessera.h>

/* Render into a malloc'd NUL-terminated string (free() it); *len gets its
 * length when len is not NULL. NULL with error_get() set on failure. */
char *chat_render_alloc(const tessera_chat_format *format, const tessera_chat_message *messages,
                        size_t n_messages, bool add_generation_prompt, const char *bos_text,
                        const char *eos_text, size_t *len);

#endif
