/* GET /props and GET /slots, shaped as llama-server answers them, so tools
 * written for it (its web UI, scripts that read n_ctx) find what they need. */
#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

void serve_json_add_sampling(cJSON *p, const tessera_sampler_params *sp) {
    if (!p) return;
    cJSON_AddNumberToObject(p, "temperature", sp->temp);
    cJSON_AddNumberToObject(p, "dynatemp_range", sp->dynatemp_range);
    cJSON_AddNumberToObject(p, "dynatemp_exponent", sp->dynatemp_exponent);
    cJSON_AddNumberToObject(p, "top_k", sp->top_k);
    cJSON_AddNumberToObject(p, "top_p", sp->top_p);
    cJSON_AddNumberToObject(p, "min_p", sp->min_p);
    cJSON_AddNumberToObject(p, "top_n_sigma", sp->top_n_sigma);
    cJSON_AddNumberToObject(p, "xtc_probability", sp->xtc_probability);
    cJSON_AddNumberToObject(p, "xtc_threshold", sp->xtc_threshold);
    cJSON_AddNumberToObject(p, "typical_p", sp->typical_p);
    cJSON_AddNumberToObject(p, "repeat_last_n", sp->penalty_last_n);
    cJSON_AddNumberToObject(p, "repeat_penalty", sp->penalty_repeat);
    cJSON_AddNumberToObject(p, "presence_penalty", sp->penalty_present);
    cJSON_AddNumberToObject(p, "frequency_penalty", sp->penalty_freq);
    cJSON_AddNumberToObject(p, "dry_multiplier", sp->dry_multiplier);
    cJSON_AddNumberToObject(p, "dry_base", sp->dry_base);
    cJSON_AddNumberToObject(p, "dry_allowed_length", sp->dry_allowed_length);
    cJSON_AddNumberToObject(p, "dry_penalty_last_n", sp->dry_penalty_last_n);
    cJSON *br = cJSON_AddArrayToObject(p, "dry_sequence_breakers");
    int32_t n_br = sp->n_dry_sequence_breakers;
    const char *const *brs = sp->dry_sequence_breakers ? sp->dry_sequence_breakers
                                                      : tessera_sampler_default_breakers(&n_br);
    for (int32_t i = 0; br && i < n_br; i++) cJSON_AddItemToArray(br, cJSON_CreateString(brs[i]));
    cJSON_AddNumberToObject(p, "mirostat", sp->mirostat);
    cJSON_AddNumberToObject(p, "mirostat_tau", sp->mirostat_tau);
    cJSON_AddNumberToObject(p, "mirostat_eta", sp->mirostat_eta);
    /* The order as llama.cpp's names, one array entry each. */
    char order[256];
    cJSON *samplers = cJSON_AddArrayToObject(p, "samplers");
    if (samplers && tessera_sampler_order(sp->samplers, false, order, sizeof order) > 0)
        for (char *tok = strtok(order, ";"); tok; tok = strtok(NULL, ";"))
            cJSON_AddItemToArray(samplers, cJSON_CreateString(tok));
}

/* The sampling defaults a request gets (--temp, --seed, ... or the library's). */
static void add_params(const serve_api *api, cJSON *p) {
    if (!p) return;
    tessera_sampler_params sp = api->sampling ? *api->sampling : tessera_sampler_default_params();
    cJSON_AddNumberToObject(p, "seed", sp.seed == TESSERA_SEED_RANDOM ? -1.0 : (double)sp.seed);
    serve_json_add_sampling(p, &sp);
    cJSON_AddNumberToObject(p, "n_predict", api->default_max_tokens > 0 ? api->default_max_tokens : -1);
    cJSON_AddBoolToObject(p, "cache_prompt", 1);
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
        /* --mmproj: what its encoders take (no audio projector is supported yet) */
        cJSON_AddBoolToObject(mod, "vision", api->mtmd && tessera_mtmd_supports_vision(api->mtmd));
        cJSON_AddBoolToObject(mod, "audio", api->mtmd && tessera_mtmd_supports_audio(api->mtmd));
        cJSON_AddBoolToObject(mod, "video", 0); /* llama-server's third modality: no video input here */
    }
    /* the marker multimodal_data items go to (llama-server's is random per
     * server; ours is llama.cpp's fixed default) */
    cJSON_AddStringToObject(root, "media_marker", TESSERA_MEDIA_MARKER);
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
