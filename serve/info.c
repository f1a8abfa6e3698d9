/* GET /props and GET /slots, shaped as llama-server answers them, so tools
 * written for it (its web UI, scripts that read n_ctx) find what they need. */
#include <cJSON.h>
#include <stdlib.h>

#include "format.h"

/* The sampling defaults a request gets (--temp, --seed, ... or the library's). */
static void add_params(const serve_api *api, cJSON *p) {
    if (!p) return;
    tessera_sampler_params sp = api->sampling ? *api->sampling : tessera_sampler_default_params();
    cJSON_AddNumberToObject(p, "seed", sp.seed == TESSERA_SEED_RANDOM ? -1.0 : (double)sp.seed);
    cJSON_AddNumberToObject(p, "temperature", sp.temp);
    cJSON_AddNumberToObject(p, "top_k", sp.top_k);
    cJSON_AddNumberToObject(p, "top_p", sp.top_p);
    cJSON_AddNumberToObject(p, "min_p", sp.min_p);
    cJSON_AddNumberToObject(p, "typical_p", sp.typical_p);
    cJSON_AddNumberToObject(p, "repeat_penalty", sp.penalty_repeat);
    cJSON_AddNumberToObject(p, "repeat_last_n", sp.penalty_last_n);
    cJSON_AddNumberToObject(p, "presence_penalty", sp.penalty_present);
    cJSON_AddNumberToObject(p, "frequency_penalty", sp.penalty_freq);
    cJSON_AddNumberToObject(p, "n_predict", api->default_max_tokens > 0 ? api->default_max_tokens : -1);
    cJSON_AddBoolToObject(p, "cache_prompt", 1);
    cJSON *samplers = cJSON_AddArrayToObject(p, "samplers");
    static const char *const order[] = {"penalties", "top_k", "typ_p", "top_p", "min_p", "temperature"};
    for (size_t i = 0; samplers && i < sizeof order / sizeof *order; i++)
        cJSON_AddItemToArray(samplers, cJSON_CreateString(order[i]));
}

char *serve_api_props(const serve_api *api, serve_engine *e) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    cJSON *gen = cJSON_AddObjectToObject(root, "default_generation_settings");
    if (gen) {
        cJSON_AddNumberToObject(gen, "n_ctx", api->slot_ctx);
        cJSON_AddStringToObject(gen, "model", api->model_id);
        add_params(api, cJSON_AddObjectToObject(gen, "params"));
    }
    cJSON_AddNumberToObject(root, "total_slots", serve_engine_n_slots(e));
    cJSON_AddStringToObject(root, "model_alias", api->model_id);
    cJSON_AddStringToObject(root, "model_path", api->model_path ? api->model_path : "");
    cJSON_AddNumberToObject(root, "n_ctx", api->slot_ctx);
    cJSON_AddStringToObject(root, "chat_template", tessera_chat_template_source(api->tmpl));
    cJSON_AddStringToObject(root, "bos_token", tessera_chat_template_bos_token(api->tmpl));
    cJSON_AddStringToObject(root, "eos_token", tessera_chat_template_eos_token(api->tmpl));
    cJSON *mod = cJSON_AddObjectToObject(root, "modalities");
    if (mod) {
        cJSON_AddBoolToObject(mod, "vision", 0);
        cJSON_AddBoolToObject(mod, "audio", 0);
    }
    cJSON_AddStringToObject(root, "build_info", tessera_version());
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

char *serve_api_slots(const serve_api *api, serve_engine *e) {
    serve_slot_info info[TESSERA_MAX_SEQ];
    int32_t n = serve_engine_slot_info(e, info, TESSERA_MAX_SEQ);
    cJSON *root = cJSON_CreateArray();
    if (!root) return NULL;
    for (int32_t i = 0; i < n; i++) {
        cJSON *s = cJSON_CreateObject();
        if (!s) break;
        cJSON_AddItemToArray(root, s);
        cJSON_AddNumberToObject(s, "id", i);
        cJSON_AddNumberToObject(s, "n_ctx", api->slot_ctx);
        cJSON_AddBoolToObject(s, "is_processing", info[i].busy);
        cJSON_AddNumberToObject(s, "n_past", info[i].n_past);
        cJSON_AddBoolToObject(s, "cache_prompt", info[i].cache_prompt);
        /* llama-server's shape: one entry per sequence of the slot; an idle
         * slot has no budget (n_remain -1) and nothing decoded */
        cJSON *next = cJSON_CreateObject();
        if (next) {
            cJSON_AddItemToArray(cJSON_AddArrayToObject(s, "next_token"), next);
            cJSON_AddBoolToObject(next, "has_next_token", info[i].busy);
            cJSON_AddNumberToObject(next, "n_remain", info[i].busy ? info[i].n_remain : -1);
            cJSON_AddNumberToObject(next, "n_prompt_tokens", info[i].n_prompt);
            cJSON_AddNumberToObject(next, "n_decoded", info[i].n_gen);
        }
    }
    char *str = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return str;
}
