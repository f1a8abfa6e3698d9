/*
 * prompt — the prompt of a request: chat messages through the chat template
 * (with the tools, chat_template_kwargs, date_string), /apply-template,
 * completion prompts (strings, token ids, mixes, lists of prompts) and
 * /infill's fill-in-the-middle layout.
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "api_internal.h"
#include "media_part.h"
#include <tessera/tessera_chat.h>

/* ------------------------------------------------------------ prompts */

/* A prompt with media markers into r (--mmproj): its chunks
 * (tessera_mtmd_tokenize with the media r holds, in order), flattened into
 * r->prompt: text chunks' tokens, and each medium's rows as
 * serve_media_token entries of its content, with its span. */
static int tokenize_media(const serve_api *api, const char *text, bool add_special, serve_request *r,
                          const char *param, serve_error *err) {
    tessera_mtmd_chunks *ch = tessera_mtmd_tokenize(api->mtmd, text, r->media, r->n_media, add_special, true);
    if (!ch) return serve_fail(err, 400, param, NULL, "'%s': %s", param, tessera_last_error());
    r->chunks = ch;
    const int32_t n = tessera_mtmd_chunks_n_tokens(ch), nc = tessera_mtmd_chunks_count(ch);
    if (n == 0) return serve_fail(err, 400, param, NULL, "'%s' gives no tokens", param);
    if (n >= api->slot_ctx) return api_fail_context(err, param, n, api->slot_ctx);
    r->prompt = malloc((size_t)n * sizeof *r->prompt);
    r->spans = calloc((size_t)nc + 1, sizeof *r->spans); /* a span per media chunk (an image's tiles) */
    if (!r->prompt || !r->spans) return serve_fail(err, 500, NULL, NULL, "out of memory");
    int32_t o = 0;
    for (int32_t c = 0; c < nc; c++) {
        const int32_t cn = tessera_mtmd_chunk_n_tokens(ch, c);
        if (tessera_mtmd_chunk_type(ch, c) == TESSERA_CHUNK_TEXT) {
            memcpy(r->prompt + o, tessera_mtmd_chunk_tokens(ch, c, NULL), (size_t)cn * sizeof *r->prompt);
        } else {
            const int32_t m = tessera_mtmd_chunk_medium(ch, c);
            if (m < 0 || m >= r->n_media) return serve_fail(err, 500, param, NULL, "a media chunk of no medium");
            const tessera_token v = serve_media_token(tessera_media_hash(r->media[m]));
            for (int32_t j = 0; j < cn; j++) r->prompt[o + j] = v;
            r->spans[r->n_spans++] = (serve_media_span){o, cn, c};
        }
        o += cn;
    }
    r->n_prompt = n;
    return 0;
}

static int tokenize_text(const serve_api *api, const char *text, size_t len, bool add_special,
                         serve_request *r, const char *param, serve_error *err) {
    if (r->n_media > 0) return tokenize_media(api, text, add_special, r, param, err);
    int32_t n = tessera_tokenize(api->model, text, len, NULL, 0, add_special, true);
    if (n == INT32_MIN)
        return serve_fail(err, 400, param, NULL, "cannot tokenize '%s': %s", param, tessera_last_error());
    if (n < 0) n = -n;
    if (n == 0) return serve_fail(err, 400, param, NULL, "'%s' gives no tokens", param);
    if (n >= api->slot_ctx)
        return api_fail_context(err, param, n, api->slot_ctx);
    r->prompt = malloc((size_t)n * sizeof *r->prompt);
    if (!r->prompt) return serve_fail(err, 500, NULL, NULL, "out of memory");
    r->n_prompt = tessera_tokenize(api->model, text, len, r->prompt, n, add_special, true);
    if (r->n_prompt != n) return serve_fail(err, 500, param, NULL, "tokenization changed between calls");
    return 0;
}

/* Media part j of message i (an image_url or input_audio part) into r's
 * media, its place in the text the media marker. r NULL: no media may go
 * there (an assistant message being continued). 0, or -1 with *err. */
static int message_medium(const serve_api *api, const cJSON *part, int i, int j, serve_request *r,
                          serve_error *err) {
    char own[64];
    snprintf(own, sizeof own, "messages[%d].content[%d]", i, j);
    const char *where = serve_media_part_where(part, own), *param = serve_media_part_param(part);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
    const bool audio = !strcmp(type->valuestring, "input_audio");
    if (!api->mtmd) /* llama-server's words, which clients search for; the flag that helps */
        return serve_fail(err, 400, param, "unsupported_parameter",
                          "%s input is not supported: '%s' is %s part; this server has no multimodal projector "
                          "(start tessera serve with --mmproj FILE)",
                          audio ? "audio" : "image", where, audio ? "an audio" : "an image");
    tessera_media *m = NULL;
    if (serve_media_part_decode(part, where, api->allow_remote_media, &m, err) != 0) return -1;
    int rc = 0;
    if (audio && !tessera_mtmd_supports_audio(api->mtmd))
        rc = serve_fail(err, 400, param, NULL,
                        "%s: the loaded projector (%s) has no audio encoder: this server takes images only",
                        where, tessera_mtmd_projector_type(api->mtmd));
    else if (!audio && !tessera_mtmd_supports_vision(api->mtmd))
        rc = serve_fail(err, 400, param, NULL, "%s: the loaded projector has no vision encoder", where);
    else if (!r)
        rc = serve_fail(err, 400, param, NULL, "%s: an assistant message that is continued cannot hold media",
                        where);
    if (rc == 0 && serve_request_add_media(r, m) != 0) rc = serve_fail(err, 500, NULL, NULL, "out of memory");
    if (rc != 0) tessera_media_free(m);
    return rc;
}

/* Message content: a string, null, or an array of {"type": "text", "text"}
 * parts (and, with --mmproj, media parts: message_medium, whose markers join
 * their neighbours without sep), joined with sep: a newline as llama-server
 * joins them in a message
 * (measured: its prompt for ["What is", "the best book"] has the two tokens
 * of "\n" and the unspaced "the" more than "What is the best book"); an
 * assistant prefill's parts with a blank line, as llama-server's (its
 * test_chat_template_assistant_prefill). */
static int message_text(const serve_api *api, const cJSON *content, const char *sep, int mi, serve_request *r,
                        char **out, serve_error *err) {
    if (api_is_null(content)) {
        *out = strdup("");
    } else if (cJSON_IsString(content)) {
        *out = strdup(content->valuestring);
    } else if (cJSON_IsArray(content)) {
        size_t len = 0;
        const cJSON *part;
        int k = 0;
        cJSON_ArrayForEach(part, content) {
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
            const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
            if (serve_media_part_is(part)) { /* checked: a hostile file is a 400 naming it */
                if (message_medium(api, part, mi, k++, r, err) != 0) return -1;
                len += strlen(TESSERA_MEDIA_MARKER);
                continue;
            }
            k++;
            if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text))
                return serve_fail(err, 400, "messages", NULL,
                            "message content parts must be {\"type\": \"text\", \"text\": ...}");
            len += strlen(text->valuestring) + strlen(sep);
        }
        *out = malloc(len + 1);
        if (*out) {
            size_t o = 0;
            bool prev_text = false;
            cJSON_ArrayForEach(part, content) {
                /* a medium's marker joins its neighbours without a separator,
                 * as llama-server writes it ("A<marker>B\nC" for parts A,
                 * image, B, C: measured with its /apply-template) */
                const bool media = serve_media_part_is(part);
                const char *t = media ? TESSERA_MEDIA_MARKER
                                      : cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
                const bool join = prev_text && !media && o > 0;
                prev_text = !media;
                if (join) {
                    memcpy(*out + o, sep, strlen(sep));
                    o += strlen(sep);
                }
                memcpy(*out + o, t, strlen(t));
                o += strlen(t);
            }
            (*out)[o] = '\0';
        }
    } else {
        return serve_fail(err, 400, "messages", NULL,
                    "message 'content' must be a string or an array of text parts");
    }
    return *out ? 0 : serve_fail(err, 500, NULL, NULL, "out of memory");
}

/* Append s to a malloc'd string (NULL stays NULL: out of memory). */
static char *append(char *acc, const char *s) {
    if (!acc) return NULL;
    size_t a = strlen(acc), n = strlen(s);
    char *out = realloc(acc, a + n + 1);
    if (!out) {
        free(acc);
        return NULL;
    }
    memcpy(out + a, s, n + 1);
    return out;
}

/* The reply rules of a chat request: reasoning markers when the model's
 * template uses them, tool-call parsing when tools are offered. */
static void reply_rules(const serve_api *api, const cJSON *root, const serve_tools *tools, const char *prompt_text,
                        bool native_tools, serve_reply_rules *rules) {
    const char *tmpl = tessera_chat_template_source(api->tmpl);
    /* reasoning_format "none" (the request's, else --reasoning-format) leaves it in content */
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(root, "reasoning_format");
    const char *format = cJSON_IsString(rf) ? rf->valuestring : api->reasoning_format;
    if (format && !strcmp(format, "none")) tmpl = NULL;
    if (tmpl && strstr(tmpl, "<think>")) {
        rules->think_open = "<think>";
        rules->think_close = "</think>";
    } else if (tmpl && strstr(tmpl, "[THINK]")) {
        rules->think_open = "[THINK]";
        rules->think_close = "[/THINK]";
    }
    if (rules->think_open) { /* a generation prompt that opens the reasoning */
        size_t n = strlen(prompt_text), k = strlen(rules->think_open);
        while (n > 0 && strchr(" \n", prompt_text[n - 1])) n--;
        rules->starts_in_think = n >= k && !memcmp(prompt_text + n - k, rules->think_open, k);
    }
    rules->tools = tools->choice != SERVE_TOOLS_NONE;
    /* A template that renders the tools itself asks for its own call
     * syntax; else the tools were offered Hermes style. */
    rules->tool_format = native_tools ? tessera_tool_format_detect(tessera_chat_template_source(api->tmpl))
                                      : TESSERA_TOOLS_HERMES;
}

/* vars' "functions": the request's tools' "function" objects as JSON text
 * ("[]" without tools). 0, or -1 when out of memory. */
static int add_functions_text(cJSON *vars, const cJSON *root) {
    cJSON *list = cJSON_CreateArray();
    const cJSON *tool;
    cJSON_ArrayForEach(tool, cJSON_GetObjectItemCaseSensitive(root, "tools")) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
        if (cJSON_IsObject(fn) && list) cJSON_AddItemToArray(list, cJSON_Duplicate(fn, 1));
    }
    char *text = list ? cJSON_PrintUnformatted(list) : NULL;
    cJSON_Delete(list);
    bool ok = text && cJSON_AddStringToObject(vars, "functions", text);
    free(text);
    return ok ? 0 : -1;
}

/* The template variables a request adds beside messages and tools:
 * add_generation_prompt (the request's, default true), date_string (today,
 * as "28 Nov 2026") and datetime (as "Nov 28 2026"; date-aware templates
 * print one of them), enable_thinking (true unless --reasoning off, as
 * llama-server: templates that test "not enable_thinking" would otherwise
 * close the reasoning block before the model starts it), and each key of
 * chat_template_kwargs (enable_thinking...), which may override them.
 * Templates that write "+ functions" (Firefunction v2) get the offered
 * tools' function objects as JSON text in functions, as llama-server
 * gives them. prefill: the final assistant message is continued (final_assistant), so
 * the generation prompt is rendered whatever the request says.
 * 0, or -1 with *err filled. */
static int add_template_extras(const serve_api *api, cJSON *vars, const cJSON *root, bool prefill,
                               serve_error *err) {
    const cJSON *agp = cJSON_GetObjectItemCaseSensitive(root, "add_generation_prompt");
    if (!api_is_null(agp) && !cJSON_IsBool(agp))
        return serve_fail(err, 400, "add_generation_prompt", NULL, "'add_generation_prompt' must be true or false");
    char date[32], datetime[32];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(date, sizeof date, "%d %b %Y", &tm);
    strftime(datetime, sizeof datetime, "%b %d %Y", &tm);
    if (!cJSON_AddBoolToObject(vars, "add_generation_prompt", prefill || api_is_null(agp) || cJSON_IsTrue(agp)) ||
        !cJSON_AddStringToObject(vars, "date_string", date) || !cJSON_AddStringToObject(vars, "datetime", datetime) ||
        !cJSON_AddBoolToObject(vars, "enable_thinking", api->enable_thinking != 0))
        return serve_fail(err, 500, NULL, NULL, "out of memory");
    if (strstr(tessera_chat_template_source(api->tmpl), "+ functions") && add_functions_text(vars, root) != 0)
        return serve_fail(err, 500, NULL, NULL, "out of memory");
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(root, "chat_template_kwargs");
    if (api_is_null(kw)) return 0;
    if (!cJSON_IsObject(kw))
        return serve_fail(err, 400, "chat_template_kwargs", NULL, "'chat_template_kwargs' must be an object");
    const cJSON *v;
    cJSON_ArrayForEach(v, kw) {
        if (!strcmp(v->string, "messages") || !strcmp(v->string, "tools"))
            return serve_fail(err, 400, "chat_template_kwargs", NULL,
                              "'chat_template_kwargs' may not set '%s' (the request's own field)", v->string);
        cJSON *copy = cJSON_Duplicate(v, 1);
        if (!copy) return serve_fail(err, 500, NULL, NULL, "out of memory");
        cJSON_DeleteItemFromObjectCaseSensitive(vars, v->string);
        cJSON_AddItemToObject(vars, v->string, copy);
    }
    return 0;
}

/* Render the template with messages m[0..k) as plain role/content and the
 * request's extras (add_template_extras). */
static char *render_plain(const serve_api *api, const cJSON *root, const tessera_chat_message *m, int k,
                          bool prefill, size_t *len, serve_error *err) {
    cJSON *vars = cJSON_CreateObject();
    cJSON *list = vars ? cJSON_AddArrayToObject(vars, "messages") : NULL;
    char *json = NULL, *text = NULL;
    bool ok = list != NULL;
    for (int i = 0; ok && i < k; i++) {
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddStringToObject(o, "role", m[i].role) && cJSON_AddStringToObject(o, "content", m[i].content);
        if (o) cJSON_AddItemToArray(list, o);
    }
    if (!ok) {
        serve_fail(err, 500, NULL, NULL, "out of memory");
    } else if (add_template_extras(api, vars, root, prefill, err) == 0) {
        json = cJSON_PrintUnformatted(vars);
        text = json ? tessera_chat_template_apply(api->tmpl, json, len) : NULL;
        if (!json) serve_fail(err, 500, NULL, NULL, "out of memory");
        else if (!text)
            serve_fail(err, 400, "messages", NULL, "the chat template refuses the conversation: %s",
                       tessera_last_error());
    }
    free(json);
    cJSON_Delete(vars);
    return text;
}

/* The request's messages through the chat template as the template's own
 * variables: each message object as given (tool_calls, tool_call_id, name,
 * reasoning_content reach the template), its role checked ("developer" read
 * as "system") and its content reduced to text; the request's tools;
 * add_generation_prompt on. prefill: the last message is left out (and
 * continued by the caller). Returns the malloc'd prompt text, or NULL with
 * *err filled. */
static char *render_messages(const serve_api *api, const cJSON *root, bool prefill, serve_request *r, size_t *len,
                             serve_error *err) {
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (api_is_null(msgs)) return serve_fail(err, 400, "messages", NULL, "'messages' is required"), NULL;
    if (!cJSON_IsArray(msgs)) return serve_fail(err, 400, "messages", NULL, "'messages' must be an array"), NULL;
    if (cJSON_GetArraySize(msgs) == 0) return serve_fail(err, 400, "messages", NULL, "'messages' is empty"), NULL;
    cJSON *vars = cJSON_CreateObject();
    cJSON *list = vars ? cJSON_AddArrayToObject(vars, "messages") : NULL;
    char *json = NULL, *text = NULL;
    if (!list) goto oom;
    int i = 0;
    const cJSON *msg;
    int n_render = cJSON_GetArraySize(msgs) - (prefill ? 1 : 0);
    cJSON_ArrayForEach(msg, msgs) {
        if (i == n_render) break;
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
        if (!cJSON_IsObject(msg) || !cJSON_IsString(role)) {
            serve_fail(err, 400, "messages", NULL, "message %d must be an object with a string 'role'", i);
            goto done;
        }
        const char *rs = role->valuestring;
        if (!strcmp(rs, "developer")) rs = "system";
        if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant") && strcmp(rs, "tool")) {
            serve_fail(err, 400, "messages", NULL,
                       "message %d has role '%.32s' (system, developer, user, assistant or tool)", i, rs);
            goto done;
        }
        char *content = NULL;
        if (message_text(api, cJSON_GetObjectItemCaseSensitive(msg, "content"), "\n", i, r, &content, err) != 0)
            goto done;
        cJSON *copy = cJSON_Duplicate(msg, 1);
        cJSON *rv = cJSON_CreateString(rs), *cv = cJSON_CreateString(content);
        free(content);
        if (!copy || !rv || !cv) {
            cJSON_Delete(copy);
            cJSON_Delete(rv);
            cJSON_Delete(cv);
            goto oom;
        }
        cJSON_DeleteItemFromObjectCaseSensitive(copy, "role");
        cJSON_DeleteItemFromObjectCaseSensitive(copy, "content");
        cJSON_AddItemToObject(copy, "role", rv);
        cJSON_AddItemToObject(copy, "content", cv);
        cJSON_AddItemToArray(list, copy);
        i++;
    }
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    if (!api_is_null(tools)) {
        cJSON *t = cJSON_Duplicate(tools, 1);
        if (!t) goto oom;
        cJSON_AddItemToObject(vars, "tools", t);
    }
    if (add_template_extras(api, vars, root, prefill, err) != 0) goto done;
    json = cJSON_PrintUnformatted(vars);
    if (!json) goto oom;
    text = tessera_chat_template_apply(api->tmpl, json, len);
    if (!text)
        serve_fail(err, 400, "messages", NULL, "the chat template refuses the conversation: %s", tessera_last_error());
    goto done;
oom:
    serve_fail(err, 500, NULL, NULL, "out of memory");
done:
    free(json);
    cJSON_Delete(vars);
    return text;
}

/* llama-server's assistant prefill (vLLM's and transformers'
 * continue_final_message): a conversation that ends with an assistant
 * message without tool calls is continued, unless add_generation_prompt or
 * continue_final_message is false: the messages before it are rendered
 * with the generation prompt, its text follows, and the reply is what the
 * model writes after it. continue_final_message true with
 * add_generation_prompt true, or without a final assistant message, and two
 * assistant messages at the end are 400s. Returns 1 with *out (malloc'd)
 * for a prefill, 0 for none, -1 with *err filled. */
static int final_assistant(const serve_api *api, const cJSON *root, char **out, serve_error *err) {
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    const cJSON *cfm = cJSON_GetObjectItemCaseSensitive(root, "continue_final_message");
    const cJSON *agp = cJSON_GetObjectItemCaseSensitive(root, "add_generation_prompt");
    *out = NULL;
    if (!api_is_null(cfm) && !cJSON_IsBool(cfm))
        return serve_fail(err, 400, "continue_final_message", NULL, "'continue_final_message' must be true or false");
    if (cJSON_IsTrue(cfm) && cJSON_IsTrue(agp))
        return serve_fail(err, 400, "continue_final_message", NULL,
                          "'continue_final_message' and 'add_generation_prompt' cannot both be true");
    int n = cJSON_IsArray(msgs) ? cJSON_GetArraySize(msgs) : 0;
    const cJSON *last = n > 0 ? cJSON_GetArrayItem(msgs, n - 1) : NULL;
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(last, "role");
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(last, "tool_calls");
    bool assistant = cJSON_IsString(role) && !strcmp(role->valuestring, "assistant") &&
                     (api_is_null(calls) || (cJSON_IsArray(calls) && cJSON_GetArraySize(calls) == 0));
    if (!assistant && cJSON_IsTrue(cfm))
        return serve_fail(err, 400, "continue_final_message", NULL,
                          "'continue_final_message' needs a conversation that ends with an assistant message");
    if (!assistant || cJSON_IsFalse(cfm) || (!cJSON_IsTrue(cfm) && cJSON_IsFalse(agp))) return 0;
    const cJSON *prev_role = n > 1 ? cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(msgs, n - 2), "role") : NULL;
    if (cJSON_IsString(prev_role) && !strcmp(prev_role->valuestring, "assistant"))
        return serve_fail(err, 400, "messages", NULL,
                          "the conversation ends with two assistant messages; only the last one can be continued");
    if (message_text(api, cJSON_GetObjectItemCaseSensitive(last, "content"), "\n\n", n - 1, NULL, out, err) != 0)
        return -1;
    return 1;
}

char *serve_api_apply_template(const serve_api *api, const char *body, size_t len, serve_error *err) {
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        serve_fail(err, 400, NULL, NULL, "the request body must be a JSON object with 'messages'");
        return NULL;
    }
    size_t n = 0;
    char *prefill = NULL, *text = NULL;
    serve_request *media = serve_request_new(1); /* the media are checked, then dropped: the text has markers */
    int pf = media ? final_assistant(api, root, &prefill, err) : serve_fail(err, 500, NULL, NULL, "out of memory");
    if (pf >= 0) text = render_messages(api, root, pf == 1, media, &n, err);
    serve_request_free(media);
    if (text && prefill) {
        text = append(text, prefill);
        n = text ? strlen(text) : 0;
        if (!text) serve_fail(err, 500, NULL, NULL, "out of memory");
    }
    free(prefill);
    cJSON_Delete(root);
    if (!text) return NULL;
    cJSON *out = cJSON_CreateObject();
    char *json = out && api_add_text(out, "prompt", text, n) ? cJSON_PrintUnformatted(out) : NULL;
    cJSON_Delete(out);
    free(text);
    if (!json) serve_fail(err, 500, NULL, NULL, "out of memory");
    return json;
}

/* The conversation as plain role/content messages for a template that
 * does not write tools itself: tool calls as the text the model writes,
 * tool results as a user turn of <tool_response> blocks (consecutive ones
 * merged). m and texts have room for every message plus one; *k counts
 * those written. 0, or -1 with *err filled. */
static int plain_messages(const serve_api *api, const cJSON *msgs, serve_request *r, tessera_chat_message *m,
                          char **texts, int *k, serve_error *err) {
    int i = 0;
    const cJSON *msg;
    cJSON_ArrayForEach(msg, msgs) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
        if (!cJSON_IsObject(msg) || !cJSON_IsString(role))
            return serve_fail(err, 400, "messages", NULL, "message %d must be an object with a string 'role'", i);
        const char *rs = role->valuestring;
        if (!strcmp(rs, "developer")) rs = "system";
        bool tool = !strcmp(rs, "tool");
        if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant") && !tool)
            return serve_fail(err, 400, "messages", NULL,
                              "message %d has role '%.32s' (system, developer, user, assistant or tool)", i, rs);
        char *content = NULL;
        if (message_text(api, cJSON_GetObjectItemCaseSensitive(msg, "content"), "\n", i, r, &content, err) != 0)
            return -1;
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
        if (!api_is_null(calls) && (strcmp(rs, "assistant") || !cJSON_IsArray(calls))) {
            free(content);
            return serve_fail(err, 400, "messages", NULL,
                              "message %d: 'tool_calls' must be an array on an assistant message", i);
        }
        if (!api_is_null(calls) && cJSON_GetArraySize(calls) > 0) {
            char *ct = serve_tools_calls_text(calls, err);
            if (!ct) {
                free(content);
                return -1;
            }
            if (content[0]) content = append(content, "\n");
            content = append(content, ct);
            free(ct);
        }
        i++;
        if (tool) { /* tool results: a user turn of <tool_response> blocks, consecutive ones merged */
            char *t = append(strdup("<tool_response>\n"), content);
            free(content);
            content = append(t, "\n</tool_response>");
            if (content && *k > 0 && !strcmp(m[*k - 1].role, "tool")) {
                texts[*k - 1] = append(append(texts[*k - 1], "\n"), content);
                free(content);
                if (!texts[*k - 1]) return serve_fail(err, 500, NULL, NULL, "out of memory");
                m[*k - 1].content = texts[*k - 1];
                continue;
            }
        }
        if (!content) return serve_fail(err, 500, NULL, NULL, "out of memory");
        texts[*k] = content;
        m[*k].role = tool ? "tool" : rs;
        m[*k].content = content;
        (*k)++;
    }
    for (int j = 0; j < *k; j++)
        if (!strcmp(m[j].role, "tool")) m[j].role = "user";
    return 0;
}

/* The offered tools into the system message (a new one first if none). */
static int tools_into_system(const serve_tools *tools, tessera_chat_message *m, char **texts, int *k,
                             serve_error *err) {
    char *sys = serve_tools_system_text(tools);
    if (*k > 0 && !strcmp(m[0].role, "system")) {
        texts[0] = append(append(texts[0], "\n\n"), sys ? sys : "");
        m[0].content = texts[0];
        free(sys);
    } else {
        memmove(m + 1, m, (size_t)*k * sizeof *m);
        memmove(texts + 1, texts, (size_t)*k * sizeof *texts);
        m[0] = (tessera_chat_message){.role = "system", .content = sys};
        texts[0] = sys;
        (*k)++;
    }
    return texts[0] ? 0 : serve_fail(err, 500, NULL, NULL, "out of memory");
}

/* The rendered conversation (owned: *text may be replaced) into r's
 * prompt: reply rules, the prefill and grammar tool_choice forces, the
 * tool names the reply parser needs. */
static int finish_chat_prompt(const serve_api *api, const cJSON *root, serve_request *r, serve_tools *tools,
                              bool native_tools, char **text, size_t len, tessera_grammar **grammar,
                              serve_error *err) {
    reply_rules(api, root, tools, *text, native_tools, &r->rules);
    char *prefill = serve_tools_prefill(tools, r->rules.tool_format);
    if (prefill) { /* the reply starts with it: prompt and generated text both get it */
        /* a forced call is prefilled and constrained Hermes style whatever
         * the template's own syntax (serve_tools_prefill), so its reply is
         * read as Hermes too */
        r->rules.tool_format = TESSERA_TOOLS_HERMES;
        *text = append(*text, prefill);
        for (int32_t c = 0; c < r->n_choices; c++)
            if (serve_text_append(&r->choices[c], prefill, strlen(prefill)) != 0) {
                free(*text);
                *text = NULL;
            }
        free(prefill);
        if (!*text) return serve_fail(err, 500, NULL, NULL, "out of memory");
        len = strlen(*text);
    }
    char *gbnf = serve_tools_grammar(tools, err);
    if (!gbnf && err->status) return -1;
    if (gbnf) {
        *grammar = tessera_grammar_parse(gbnf, strlen(gbnf), NULL);
        free(gbnf);
        if (!*grammar)
            return serve_fail(err, 500, "tool_choice", NULL, "the tool-call grammar does not parse: %s",
                              tessera_last_error());
    }
    if (r->rules.tools) {
        r->rules.tool_names = tools->names;
        r->rules.n_tool_names = tools->n;
        tools->names = NULL;
        for (int j = 0; j < tools->n; j++) free(tools->json[j]);
        tools->n = 0;
    }
    return tokenize_text(api, *text, len, !tessera_chat_template_text_has_bos(api->tmpl, *text, len), r,
                         "messages", err);
}

/* The conversation into r's prompt; *grammar: the constraint tool_choice
 * asks for (NULL: none). A template that writes the tools itself gets them
 * (and the messages as given); else they are offered Hermes style in the
 * system message, calls and results as text, through the same template. */
int api_parse_messages(const serve_api *api, const cJSON *root, serve_request *r, tessera_grammar **grammar,
                       serve_error *err) {
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (api_is_null(msgs)) return serve_fail(err, 400, "messages", NULL, "'messages' is required");
    if (!cJSON_IsArray(msgs)) return serve_fail(err, 400, "messages", NULL, "'messages' must be an array");
    int n = cJSON_GetArraySize(msgs);
    if (n == 0) return serve_fail(err, 400, "messages", NULL, "'messages' is empty");
    serve_tools tools;
    if (serve_tools_parse(root, &tools, err) != 0) {
        serve_tools_free(&tools);
        return -1;
    }
    tessera_chat_message *m = calloc((size_t)n + 1, sizeof *m); /* + a system message for the tools */
    char **texts = calloc((size_t)n + 1, sizeof *texts);
    char *text = NULL;
    int rc = -1, k = 0;
    size_t len = 0;
    bool native_tools =
        tools.choice != SERVE_TOOLS_NONE && strstr(tessera_chat_template_source(api->tmpl), "tools");
    char *prefill = NULL;
    int pf = final_assistant(api, root, &prefill, err);
    if (pf < 0) {
    } else if (!m || !texts) {
        serve_fail(err, 500, NULL, NULL, "out of memory");
    } else if (native_tools) {
        text = render_messages(api, root, pf == 1, r, &len, err);
    } else if (plain_messages(api, msgs, r, m, texts, &k, err) == 0) {
        if (pf == 1) { /* the final assistant message is continued, not rendered */
            free(texts[--k]);
            texts[k] = NULL;
        }
        if (tools.choice == SERVE_TOOLS_NONE || tools_into_system(&tools, m, texts, &k, err) == 0)
            text = render_plain(api, root, m, k, pf == 1, &len, err);
    }
    if (text && prefill) {
        text = append(text, prefill);
        len = text ? strlen(text) : 0;
        if (!text) serve_fail(err, 500, NULL, NULL, "out of memory");
    }
    if (text) rc = finish_chat_prompt(api, root, r, &tools, native_tools, &text, len, grammar, err);
    free(prefill);
    free(text);
    if (texts)
        for (int j = 0; j < n + 1; j++) free(texts[j]);
    free(texts);
    free(m);
    serve_tools_free(&tools);
    return rc;
}

/* A prompt field holds one prompt (a string, token ids, a flat mix of
 * both, or llama-server's {"prompt_string": ...}) or a list of them (OpenAI's
 * batch: strings or token-id arrays). Returns the k-th and sets *count. */
static const cJSON *prompt_at(const cJSON *p, int k, int *count) {
    *count = 1;
    if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) == 0) return p;
    const cJSON *e;
    cJSON_ArrayForEach(e, p)
        if (cJSON_IsNumber(e)) return p; /* token ids (maybe mixed with text): one prompt */
    *count = cJSON_GetArraySize(p);
    return cJSON_GetArrayItem(p, k < *count ? k : 0);
}

int serve_api_count_prompts(serve_kind kind, const char *body, size_t len) {
    if (kind == SERVE_CHAT || kind == SERVE_INFILL) return 1;
    cJSON *root = cJSON_ParseWithLength(body, len);
    int count = 1;
    const cJSON *p = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "prompt") : NULL;
    if (p) prompt_at(p, 0, &count);
    cJSON_Delete(root);
    return count;
}

/* Append tokens to r->prompt (capacity *cap), refusing more than a slot holds. */
static int prompt_push(const serve_api *api, serve_request *r, int32_t *cap, const tessera_token *t, int32_t n,
                       const char *param, serve_error *err) {
    if ((int64_t)r->n_prompt + n >= api->slot_ctx)
        return api_fail_context(err, param, (long long)r->n_prompt + n, api->slot_ctx);
    if (r->n_prompt + n > *cap) {
        int32_t c = *cap ? *cap : 64;
        while (c < r->n_prompt + n) c *= 2;
        tessera_token *grown = realloc(r->prompt, (size_t)c * sizeof *grown);
        if (!grown) return serve_fail(err, 500, NULL, NULL, "out of memory");
        r->prompt = grown;
        *cap = c;
    }
    memcpy(r->prompt + r->n_prompt, t, (size_t)n * sizeof *t);
    r->n_prompt += n;
    return 0;
}

/* Tokenize text (special tokens written as text are parsed) onto r->prompt. */
static int prompt_push_text(const serve_api *api, serve_request *r, int32_t *cap, const char *text, bool add_special,
                            const char *param, serve_error *err) {
    size_t len = strlen(text);
    int32_t n = tessera_tokenize(api->model, text, len, NULL, 0, add_special, true);
    if (n == INT32_MIN)
        return serve_fail(err, 400, param, NULL, "cannot tokenize '%s': %s", param, tessera_last_error());
    if (n < 0) n = -n;
    if (n == 0) return 0;
    if (n >= api->slot_ctx)
        return api_fail_context(err, param, n, api->slot_ctx);
    tessera_token *t = malloc((size_t)n * sizeof *t);
    if (!t) return serve_fail(err, 500, NULL, NULL, "out of memory");
    int rc = tessera_tokenize(api->model, text, len, t, n, add_special, true) == n
                 ? prompt_push(api, r, cap, t, n, param, err)
                 : serve_fail(err, 500, param, NULL, "tokenization changed between calls");
    free(t);
    return rc;
}

/* llama-server's {"prompt_string": TEXT, "multimodal_data": [BASE64...]}:
 * each item a medium, matched in order to the <__media__> markers of TEXT
 * (a count that differs is a 400), with the model's BOS first. 0, 1 when
 * there are none (the prompt is text), or -1 with *err filled. */
static int prompt_media(const serve_api *api, const char *text, const cJSON *md, serve_request *r,
                        serve_error *err) {
    if (!cJSON_IsArray(md))
        return serve_fail(err, 400, "prompt", NULL, "'prompt.multimodal_data' must be an array of base64 strings");
    const int n = cJSON_GetArraySize(md);
    if (n > 0 && !api->mtmd)
        return serve_fail(err, 400, "prompt", "unsupported_parameter",
                          "'prompt.multimodal_data': this server takes text only: images need a multimodal "
                          "projector (start tessera serve with --mmproj FILE)");
    int markers = 0;
    const size_t ml = strlen(TESSERA_MEDIA_MARKER);
    for (const char *q = strstr(text, TESSERA_MEDIA_MARKER); q; q = strstr(q + ml, TESSERA_MEDIA_MARKER)) markers++;
    if (markers != n)
        return serve_fail(err, 400, "prompt", NULL,
                          "'prompt.prompt_string' has %d media markers (%s) but 'prompt.multimodal_data' has %d "
                          "items", markers, TESSERA_MEDIA_MARKER, n);
    if (n == 0) return 1; /* text only */
    int k = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, md) {
        char where[48];
        snprintf(where, sizeof where, "prompt.multimodal_data[%d]", k++);
        if (!cJSON_IsString(item))
            return serve_fail(err, 400, "prompt", NULL, "'%s' must be a base64 string", where);
        tessera_media *m = NULL;
        if (serve_media_from_base64(item->valuestring, where, &m, err) != 0) {
            /* the error names the item; its param is the prompt */
            return -1;
        }
        if (tessera_media_get_kind(m) == TESSERA_MEDIA_AUDIO && !tessera_mtmd_supports_audio(api->mtmd)) {
            tessera_media_free(m);
            return serve_fail(err, 400, "prompt", NULL,
                              "'%s': the loaded projector (%s) has no audio encoder: this server takes images only",
                              where, tessera_mtmd_projector_type(api->mtmd));
        }
        if (serve_request_add_media(r, m) != 0) {
            tessera_media_free(m);
            return serve_fail(err, 500, NULL, NULL, "out of memory");
        }
    }
    return tokenize_media(api, text, true, r, "prompt", err);
}

/* One prompt (see prompt_at) into r->prompt. Text gets the model's BOS when
 * it starts the prompt, as llama-server does. */
static int prompt_tokens(const serve_api *api, const cJSON *p, serve_request *r, serve_error *err) {
    int32_t cap = 0, n_vocab = tessera_model_n_vocab(api->model);
    if (cJSON_IsObject(p)) {
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(p, "multimodal_data");
        p = cJSON_GetObjectItemCaseSensitive(p, "prompt_string");
        if (!cJSON_IsString(p))
            return serve_fail(err, 400, "prompt", NULL, "a prompt object needs a 'prompt_string'");
        const int rc = api_is_null(md) ? 1 : prompt_media(api, p->valuestring, md, r, err);
        if (rc <= 0) return rc;
    }
    if (cJSON_IsString(p)) {
        if (prompt_push_text(api, r, &cap, p->valuestring, true, "prompt", err) != 0) return -1;
    } else if (cJSON_IsArray(p)) {
        const cJSON *t;
        cJSON_ArrayForEach(t, p) {
            if (cJSON_IsString(t)) {
                if (prompt_push_text(api, r, &cap, t->valuestring, r->n_prompt == 0, "prompt", err) != 0) return -1;
                continue;
            }
            if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble) || t->valuedouble < 0 ||
                t->valuedouble >= n_vocab)
                return serve_fail(err, 400, "prompt", NULL,
                                  "'prompt' items must be strings or token ids in 0..%d", n_vocab - 1);
            tessera_token id = (tessera_token)t->valuedouble;
            if (prompt_push(api, r, &cap, &id, 1, "prompt", err) != 0) return -1;
        }
    } else {
        return serve_fail(err, 400, "prompt", NULL,
                          "'prompt' must be a string, token ids, or a list of strings or token-id arrays");
    }
    if (r->n_prompt == 0) return serve_fail(err, 400, "prompt", NULL, "'prompt' is empty");
    return 0;
}

int api_parse_prompt(const serve_api *api, const cJSON *root, int index, serve_request *r, serve_error *err) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    if (api_is_null(p)) return serve_fail(err, 400, "prompt", NULL, "'prompt' is required");
    int count;
    return prompt_tokens(api, prompt_at(p, index, &count), r, err);
}

/* The id of the first of names[] that is one special token of the
 * vocabulary, or -1. */
static tessera_token special_token(const serve_api *api, const char *const *names) {
    for (; *names; names++) {
        tessera_token t[2];
        if (tessera_tokenize(api->model, *names, strlen(*names), t, 2, false, true) == 1) {
            char piece[64];
            int32_t n = tessera_token_to_piece(api->model, t[0], piece, sizeof piece - 1, true);
            if (n == (int32_t)strlen(*names) && !memcmp(piece, *names, (size_t)n)) return t[0];
        }
    }
    return -1;
}

/* A string field of /infill ("" when absent). */
static int infill_text(const cJSON *root, const char *key, const char **out, serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    *out = "";
    if (api_is_null(v)) return 0;
    if (!cJSON_IsString(v)) return serve_fail(err, 400, key, NULL, "'%s' must be a string", key);
    *out = v->valuestring;
    return 0;
}

/* /infill: fill-in-the-middle with the vocabulary's FIM tokens, as
 * [BOS] {FILE_SEP filename \n text}... FIM_PRE prefix prompt FIM_SUF suffix FIM_MID
 * (input_extra chunks are checked but left out without a file-separator
 * token, as llama-server does). A model without FIM tokens is a 400. */
int api_parse_infill(const serve_api *api, const cJSON *root, serve_request *r, serve_error *err) {
    static const char *const pre_n[] = {"<|fim_prefix|>", "<fim_prefix>", "<fim-prefix>", "<PRE>", "▁<PRE>", NULL};
    static const char *const suf_n[] = {"<|fim_suffix|>", "<fim_suffix>", "<fim-suffix>", "<SUF>", "▁<SUF>", NULL};
    static const char *const mid_n[] = {"<|fim_middle|>", "<fim_middle>", "<fim-middle>", "<MID>", "▁<MID>", NULL};
    static const char *const sep_n[] = {"<|file_sep|>", "<file_sep>", NULL};
    tessera_token pre = special_token(api, pre_n), suf = special_token(api, suf_n), mid = special_token(api, mid_n);
    tessera_token sep = special_token(api, sep_n), bos = tessera_token_bos(api->model);
    if (pre < 0 || suf < 0 || mid < 0)
        return serve_fail(err, 400, "input_prefix", "unsupported_parameter",
                          "this model's vocabulary has no fill-in-the-middle tokens (<fim_prefix>...)");
    const char *prefix, *suffix, *prompt;
    if (infill_text(root, "input_prefix", &prefix, err) || infill_text(root, "input_suffix", &suffix, err) ||
        infill_text(root, "prompt", &prompt, err))
        return -1;
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(root, "input_extra");
    if (!api_is_null(extra) && !cJSON_IsArray(extra))
        return serve_fail(err, 400, "input_extra", NULL, "'input_extra' must be an array of {filename, text}");
    int32_t cap = 0;
    if (bos >= 0 && prompt_push(api, r, &cap, &bos, 1, "input_prefix", err) != 0) return -1;
    const cJSON *chunk;
    cJSON_ArrayForEach(chunk, extra) {
        const char *name, *text;
        if (!cJSON_IsObject(chunk) || infill_text(chunk, "filename", &name, err) ||
            infill_text(chunk, "text", &text, err) || !cJSON_HasObjectItem(chunk, "text"))
            return err->status ? -1
                               : serve_fail(err, 400, "input_extra", NULL, "'input_extra' items must be {filename, text}");
        /* without a file-separator token llama-server leaves the chunks out
         * (measured: the same prompt with and without them) */
        if (sep >= 0 && (prompt_push(api, r, &cap, &sep, 1, "input_extra", err) ||
                         prompt_push_text(api, r, &cap, name, false, "input_extra", err) ||
                         prompt_push_text(api, r, &cap, "\n", false, "input_extra", err) ||
                         prompt_push_text(api, r, &cap, text, false, "input_extra", err)))
            return -1;
    }
    /* the prompt continues the prefix, as llama-server lays it out (its
     * prompt on the same stories260K FIM file: prefix tokens, prompt tokens,
     * FIM_SUF), and generation starts after FIM_MID */
    if (prompt_push(api, r, &cap, &pre, 1, "input_prefix", err) ||
        prompt_push_text(api, r, &cap, prefix, false, "input_prefix", err) ||
        prompt_push_text(api, r, &cap, prompt, false, "prompt", err) ||
        prompt_push(api, r, &cap, &suf, 1, "input_suffix", err) ||
        prompt_push_text(api, r, &cap, suffix, false, "input_suffix", err) ||
        prompt_push(api, r, &cap, &mid, 1, "prompt", err))
        return -1;
    return 0;
}

