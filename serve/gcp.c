/*
 * gcp — Google Cloud Vertex AI's prediction protocol, which llama-server
 * speaks when the container runs with AIP_MODE=PREDICTION:
 *
 *   POST AIP_PREDICT_ROUTE (default /predict)
 *   {"instances": [INSTANCE...], "parameters": {...}} -> {"predictions": [RESULT...]}
 *
 * Each instance is an OpenAI request whose "@requestFormat" names the
 * endpoint it is for: "chatCompletions" (/v1/chat/completions) or
 * "completions" (/v1/completions); without it, an instance with "messages"
 * is a chat request and one with "prompt" a completion. Each prediction is
 * that endpoint's whole response. The instances run side by side in the
 * slots (one request each), through the same parser and response writers
 * as the endpoints themselves; a failing instance fails the call with its
 * error. Streaming is not part of the protocol: "stream" true is a 400.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "gcp.h"

/* The kind instance i asks for, or -1 with *err filled. */
static int instance_kind(const cJSON *inst, int i, serve_error *err) {
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(inst, "@requestFormat");
    if (cJSON_IsString(fmt) && !strcmp(fmt->valuestring, "chatCompletions")) return SERVE_CHAT;
    if (cJSON_IsString(fmt) && !strcmp(fmt->valuestring, "completions")) return SERVE_COMPLETION;
    char param[48];
    snprintf(param, sizeof param, "instances[%d].@requestFormat", i);
    if (fmt && !cJSON_IsNull(fmt))
        return serve_fail(err, 400, param, NULL, "'%s' must be \"chatCompletions\" or \"completions\"", param);
    if (cJSON_GetObjectItemCaseSensitive(inst, "messages")) return SERVE_CHAT;
    if (cJSON_GetObjectItemCaseSensitive(inst, "prompt")) return SERVE_COMPLETION;
    return serve_fail(err, 400, param, NULL,
                      "instance %d has no '@requestFormat' and neither 'messages' nor 'prompt'", i);
}

/* Instance i (its "@requestFormat" removed) parsed as its endpoint's request. */
static int parse_instance(const serve_api *api, cJSON *inst, int i, serve_call *call, serve_request **out,
                          serve_error *err) {
    char param[48];
    if (!cJSON_IsObject(inst)) {
        snprintf(param, sizeof param, "instances[%d]", i);
        return serve_fail(err, 400, param, NULL, "'%s' must be an object (an OpenAI request)", param);
    }
    int kind = instance_kind(inst, i, err);
    if (kind < 0) return -1;
    cJSON_DeleteItemFromObjectCaseSensitive(inst, "@requestFormat");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(inst, "stream"))) {
        snprintf(param, sizeof param, "instances[%d].stream", i);
        return serve_fail(err, 400, param, "unsupported_parameter", "'%s': predictions are not streamed", param);
    }
    char *text = cJSON_PrintUnformatted(inst);
    if (!text) return serve_fail(err, 500, NULL, NULL, "out of memory");
    size_t len = strlen(text);
    int rc = -1;
    if (kind == SERVE_COMPLETION && serve_api_count_prompts(SERVE_COMPLETION, text, len) > 1) {
        snprintf(param, sizeof param, "instances[%d].prompt", i);
        serve_fail(err, 400, param, NULL, "'%s' must be one prompt: give each its own instance", param);
    } else {
        rc = serve_api_parse(api, (serve_kind)kind, text, len, call, out, err);
    }
    free(text);
    return rc;
}

int serve_gcp_parse(const serve_api *api, const char *body, size_t len, serve_call *calls, serve_request **reqs,
                    int max, int *n, serve_error *err) {
    *n = 0;
    cJSON *root = cJSON_ParseWithLength(body, len);
    const cJSON *list = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "instances") : NULL;
    int count = cJSON_GetArraySize(list), rc = -1;
    if (!cJSON_IsObject(root))
        serve_fail(err, 400, NULL, NULL, "the request body must be a JSON object {\"instances\": [...]}");
    else if (!cJSON_IsArray(list) || count == 0)
        serve_fail(err, 400, "instances", NULL, "'instances' must be a non-empty array of requests");
    else if (count > max)
        serve_fail(err, 400, "instances", NULL, "'instances' holds %d requests, at most %d", count, max);
    else
        rc = 0;
    for (int i = 0; rc == 0 && i < count; i++) {
        rc = parse_instance(api, cJSON_GetArrayItem(list, i), i, &calls[i], &reqs[i], err);
        if (rc == 0) ++*n;
    }
    if (rc != 0) {
        for (int i = 0; i < *n; i++) serve_request_free(reqs[i]);
        *n = 0;
    }
    cJSON_Delete(root);
    return rc;
}

char *serve_gcp_response(const serve_api *api, const serve_call *calls, serve_request *const *reqs, int n) {
    cJSON *root = cJSON_CreateObject();
    cJSON *list = root ? cJSON_AddArrayToObject(root, "predictions") : NULL;
    for (int i = 0; list && i < n; i++) {
        char *one = serve_api_response(api, &calls[i], reqs[i]);
        cJSON *pred = one ? cJSON_Parse(one) : NULL;
        free(one);
        if (!pred) {
            cJSON_Delete(root);
            return NULL; /* out of memory: the caller answers 500 */
        }
        cJSON_AddItemToArray(list, pred);
    }
    char *out = list ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return out;
}
