/*
 * tools — tool calling's request side (tools.c): the tools offered, the
 * grammar of a forced call, prefills, earlier calls written into the prompt.
 */
#ifndef TESSERA_SERVE_TOOLS_H
#define TESSERA_SERVE_TOOLS_H

#include <stdbool.h>

#include "format.h"

/* ------------------------------------------------------------ tools */

struct cJSON;

typedef enum serve_tool_choice {
    SERVE_TOOLS_NONE = 0,  /* no tools, or tool_choice "none": not offered, output not parsed */
    SERVE_TOOLS_AUTO,
    SERVE_TOOLS_REQUIRED,
    SERVE_TOOLS_NAMED
} serve_tool_choice;

typedef struct serve_tools {
    int n;
    char **json;   /* each tool as JSON text */
    char **names;  /* each tool's function name */
    serve_tool_choice choice;
    char *named;   /* SERVE_TOOLS_NAMED: the function */
    bool parallel; /* parallel_tool_calls */
} serve_tools;

/* tools, tool_choice and parallel_tool_calls of a request body. */
int serve_tools_parse(const struct cJSON *root, serve_tools *t, serve_error *err);
void serve_tools_free(serve_tools *t);
/* The system-message text offering the tools (malloc'd). */
char *serve_tools_system_text(const serve_tools *t);
/* An assistant message's tool_calls array as the text the model writes. */
char *serve_tools_calls_text(const struct cJSON *calls, serve_error *err);
/* The start of a call that tool_choice required / a named function forces
 * after the generation prompt (malloc'd), or NULL when nothing is forced.
 * This is where the grammar constraint plugs in. */
char *serve_tools_prefill(const serve_tools *t, int format);
/* The GBNF grammar that constrains the reply after that prefill to one call
 * of an offered tool (arguments following its parameters' JSON Schema), or
 * NULL: none (err->status 0) or an error (err filled). */
char *serve_tools_grammar(const serve_tools *t, serve_error *err);

#endif
