/* llama-server's LoRA endpoints and field (format.h): GET /lora-adapters
 * lists the adapters loaded with --lora/--lora-scaled ([{id, path, scale}]),
 * POST /lora-adapters takes [{id, scale}] and sets the scales of requests
 * without a `lora` field (an adapter not listed gets 0), and a request's
 * `lora` ([{id, scale}], the same rule) sets its own. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "api_internal.h"
#include "format.h"

int serve_lora_parse(const cJSON *v, const char *field, int32_t n_loras, float *out, serve_error *err) {
    if (!cJSON_IsArray(v))
        return serve_fail(err, 400, field, NULL, "'%s' must be an array of {\"id\": N, \"scale\": S}", field);
    for (int32_t i = 0; i < n_loras; i++) out[i] = 0.0f;
    const cJSON *item;
    int k = 0;
    cJSON_ArrayForEach(item, v) {
        const cJSON *id = cJSON_IsObject(item) ? cJSON_GetObjectItemCaseSensitive(item, "id") : NULL;
        const cJSON *sc = cJSON_IsObject(item) ? cJSON_GetObjectItemCaseSensitive(item, "scale") : NULL;
        if (!cJSON_IsNumber(id) || !cJSON_IsNumber(sc))
            return serve_fail(err, 400, field, NULL, "'%s'[%d] must be {\"id\": N, \"scale\": S} with numbers", field,
                              k);
        if (id->valuedouble != floor(id->valuedouble) || id->valuedouble < 0 || id->valuedouble >= n_loras)
            return serve_fail(err, 400, field, NULL, "'%s'[%d]: no adapter with id %g (%d loaded with --lora)", field,
                              k, id->valuedouble, n_loras);
        if (!isfinite(sc->valuedouble) || fabs(sc->valuedouble) > 1e6)
            return serve_fail(err, 400, field, NULL, "'%s'[%d]: scale %g is not a finite number", field, k,
                              sc->valuedouble);
        out[(int32_t)id->valuedouble] = (float)sc->valuedouble;
        k++;
    }
    return 0;
}

char *serve_lora_list(serve_engine *e) {
    const int32_t n = serve_engine_lora_count(e);
    float scales[SERVE_MAX_LORA];
    serve_engine_lora_get(e, scales);
    cJSON *arr = cJSON_CreateArray();
    for (int32_t i = 0; arr && i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o) break;
        cJSON_AddNumberToObject(o, "id", i);
        cJSON_AddStringToObject(o, "path", serve_engine_lora_path(e, i));
        cJSON_AddNumberToObject(o, "scale", scales[i]);
        cJSON_AddItemToArray(arr, o);
    }
    char *out = arr ? cJSON_PrintUnformatted(arr) : NULL;
    cJSON_Delete(arr);
    return out;
}

char *serve_lora_post(serve_engine *e, const char *body, size_t len, int *status) {
    serve_error err = {0, NULL};
    float scales[SERVE_MAX_LORA];
    cJSON *root = cJSON_ParseWithLength(body ? body : "", len);
    /* llama-server takes the array itself; an object with "lora" too */
    const cJSON *v = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "lora") : root;
    if (!root) {
        serve_fail(&err, 400, NULL, NULL, "the body is not JSON: expected [{\"id\": N, \"scale\": S}, ...]");
    } else if (serve_lora_parse(v, "lora", serve_engine_lora_count(e), scales, &err) == 0) {
        serve_engine_lora_set(e, scales);
        cJSON_Delete(root);
        *status = 200;
        return strdup("{\"success\":true}");
    }
    cJSON_Delete(root);
    *status = err.status;
    return err.body;
}
