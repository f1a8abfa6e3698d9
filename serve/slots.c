/* slots — llama-server's POST /slots/{id}?action=save|restore|erase with
 * {"filename": NAME}: NAME is a plain file name inside --slot-save-path
 * (no path separators, no ".."), the state file of tessera_state_*. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "format.h"

static char *fail(int *status, int code, const char *msg, const char *type) {
    *status = code;
    return serve_api_error_json(msg, type, NULL, NULL);
}

/* A name that stays inside the directory: 1..255 bytes, no '/', no '\\',
 * no "..", no control characters. */
static const char *filename_problem(const char *name) {
    size_t n = strlen(name);
    if (n == 0) return "is empty";
    if (n > 255) return "is longer than 255 bytes";
    if (strchr(name, '/') || strchr(name, '\\')) return "holds a path separator";
    if (strstr(name, "..")) return "holds \"..\"";
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f) return "holds a control character";
    return NULL;
}

char *serve_slots_post(serve_engine *e, const char *dir, const char *id, const char *action, const char *body,
                       size_t len, int *status) {
    char msg[700];
    char *end = NULL;
    errno = 0;
    long slot = id && *id ? strtol(id, &end, 10) : -1;
    if (!id || !*id || *end || errno || slot < 0 || slot >= serve_engine_n_slots(e)) {
        snprintf(msg, sizeof msg, "no slot '%.40s' (slots 0..%d, --parallel)", id ? id : "",
                 serve_engine_n_slots(e) - 1);
        return fail(status, 400, msg, "invalid_request_error");
    }
    serve_slot_action a = {.slot = (int32_t)slot};
    if (!action) return fail(status, 400, "missing ?action=save|restore|erase", "invalid_request_error");
    if (!strcmp(action, "save")) a.op = SERVE_SLOT_SAVE;
    else if (!strcmp(action, "restore")) a.op = SERVE_SLOT_RESTORE;
    else if (!strcmp(action, "erase")) a.op = SERVE_SLOT_ERASE;
    else {
        snprintf(msg, sizeof msg, "unknown action '%.40s' (save, restore or erase)", action);
        return fail(status, 400, msg, "invalid_request_error");
    }
    char *path = NULL;
    const char *filename = NULL;
    cJSON *req = NULL;
    if (a.op != SERVE_SLOT_ERASE) {
        if (!dir)
            return fail(status, 501, "slot save and restore are off: start the server with --slot-save-path DIR",
                        "not_supported_error");
        req = cJSON_ParseWithLength(body ? body : "", len);
        const cJSON *fn = req ? cJSON_GetObjectItemCaseSensitive(req, "filename") : NULL;
        if (!cJSON_IsString(fn)) {
            cJSON_Delete(req);
            return fail(status, 400, "the body must be a JSON object with a string \"filename\"",
                        "invalid_request_error");
        }
        filename = fn->valuestring;
        const char *why = filename_problem(filename);
        if (why) {
            snprintf(msg, sizeof msg, "filename '%.100s' %s: give a plain file name inside --slot-save-path",
                     filename, why);
            cJSON_Delete(req);
            return fail(status, 400, msg, "invalid_request_error");
        }
        size_t plen = strlen(dir) + strlen(filename) + 2;
        path = malloc(plen);
        if (!path) {
            cJSON_Delete(req);
            return fail(status, 500, "out of memory", "server_error");
        }
        snprintf(path, plen, "%s/%s", dir, filename);
        struct stat st;
        if (a.op == SERVE_SLOT_RESTORE && stat(path, &st) != 0) {
            snprintf(msg, sizeof msg, "no saved slot '%.100s' in --slot-save-path", filename);
            free(path);
            cJSON_Delete(req);
            return fail(status, 404, msg, "not_found_error");
        }
        a.path = path;
    }
    char *out = NULL;
    if (serve_engine_slot_action(e, &a) != 0) {
        out = fail(status, a.status, a.error, a.status >= 500 ? "server_error" : "invalid_request_error");
    } else {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id_slot", (double)a.slot);
        if (filename) cJSON_AddStringToObject(o, "filename", filename);
        struct stat st;
        long long bytes = path && stat(path, &st) == 0 ? (long long)st.st_size : 0;
        cJSON *t = cJSON_CreateObject();
        if (a.op == SERVE_SLOT_SAVE) {
            cJSON_AddNumberToObject(o, "n_saved", a.n_tokens);
            cJSON_AddNumberToObject(o, "n_written", (double)bytes);
            cJSON_AddNumberToObject(t, "save_ms", a.ms);
        } else if (a.op == SERVE_SLOT_RESTORE) {
            cJSON_AddNumberToObject(o, "n_restored", a.n_tokens);
            cJSON_AddNumberToObject(o, "n_read", (double)bytes);
            cJSON_AddNumberToObject(t, "restore_ms", a.ms);
        } else {
            cJSON_AddNumberToObject(o, "n_erased", a.n_tokens);
        }
        if (a.op != SERVE_SLOT_ERASE) cJSON_AddItemToObject(o, "timings", t);
        else cJSON_Delete(t);
        out = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        *status = 200;
        if (!out) out = fail(status, 500, "out of memory", "server_error");
    }
    free(path);
    cJSON_Delete(req);
    return out;
}
