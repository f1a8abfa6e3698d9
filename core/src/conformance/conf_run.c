/*
 * conf_run — the suite's driver: open the backend, walk its devices, run
 * every op family on each, print one line per family and a summary.
 */
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "conformance/conf_internal.h"
#include "conformance/conformance.h"
#include "util/error.h"

typedef struct conf_family {
    const char *name;
    void (*generate)(conf_runner *r);
} conf_family;

static const conf_family families[] = {
    {"GET_ROWS", conf_gen_get_rows}, {"ADD", conf_gen_add},
    {"MUL", conf_gen_mul},           {"SCALE", conf_gen_scale},
    {"MUL_MAT", conf_gen_mul_mat},   {"RMS_NORM", conf_gen_rms_norm},
    {"NORM", conf_gen_norm},         {"ROPE", conf_gen_rope},
    {"SOFT_MAX", conf_gen_soft_max}, {"SILU", conf_gen_silu},
    {"GELU", conf_gen_gelu},         {"SWIGLU", conf_gen_swiglu},
    {"CPY", conf_gen_cpy},           {"CONCAT", conf_gen_concat},
    {"ARGMAX", conf_gen_argmax},     {"FLASH_ATTN", conf_gen_flash_attn},
    {"GRAPH", conf_gen_graph},       {"MALFORMED", conf_gen_malformed},
};
enum { N_FAMILIES = sizeof families / sizeof families[0] };

const char *const *conformance_families(void) {
    static const char *names[N_FAMILIES + 1];
    for (int i = 0; i < N_FAMILIES; i++) names[i] = families[i].name;
    names[N_FAMILIES] = NULL;
    return names;
}

static const char *kind_name(int32_t kind) {
    switch (kind) {
    case TSR_DEVICE_CPU: return "CPU";
    case TSR_DEVICE_GPU: return "GPU";
    case TSR_DEVICE_ACCEL: return "accelerator";
    default: return "unknown kind";
    }
}

/* Run the selected families on one device; adds to *total. -1 if the
 * device cannot even be set up (counted as a failure). */
static int run_device(conf_runner *r, const conformance_options *opt, conf_stats *total) {
    FILE *out = r->out;
    const tsr_device_api *api = r->dev->api;
    if (!api || !api->get_info || !api->supports_op || !api->buffer_alloc || !api->buffer_free ||
        !api->queue_create) {
        fprintf(out, "device %d: incomplete device table\n", (int)r->device_index);
        return -1;
    }
    r->info = (tsr_device_info){.struct_size = sizeof(tsr_device_info)};
    if (api->get_info(r->dev, &r->info) != TSR_OK) {
        fprintf(out, "device %d: get_info failed\n", (int)r->device_index);
        return -1;
    }
    if (r->info.struct_size < sizeof(tsr_device_info)) {
        /* an older, shorter struct: the fields it lacks read as zero */
        r->info.host_visible = r->info.struct_size > offsetof(tsr_device_info, host_visible)
                                   ? r->info.host_visible : 0;
        r->info.reads_host_memory = r->info.struct_size > offsetof(tsr_device_info, reads_host_memory)
                                        ? r->info.reads_host_memory : 0;
    }
    fprintf(out, "device %d: %s (%s)%s%s\n", (int)r->device_index,
            r->info.description ? r->info.description : "?", kind_name(r->info.kind),
            r->info.host_visible ? ", host-visible" : "",
            r->info.reads_host_memory ? ", reads host memory" : "");
    if (api->queue_create(r->dev, &r->queue) != TSR_OK || !r->queue || !r->queue->api ||
        !r->queue->api->compute || !r->queue->api->write || !r->queue->api->read ||
        !r->queue->api->synchronize) {
        fprintf(out, "device %d: queue_create failed or the queue table is incomplete\n",
                (int)r->device_index);
        return -1;
    }
    for (int f = 0; f < N_FAMILIES; f++) {
        if (opt->op && strcasecmp(opt->op, families[f].name)) continue;
        r->family = (conf_stats){0};
        r->family_failures_shown = 0;
        if (r->verbose) fprintf(out, "  %s\n", families[f].name);
        families[f].generate(r);
        const conf_stats *s = &r->family;
        fprintf(out, "  %-10s %4lld cases: %4lld passed, %lld failed, %lld unsupported (falls back)",
                families[f].name, (long long)(s->passed + s->failed + s->unsupported),
                (long long)s->passed, (long long)s->failed, (long long)s->unsupported);
        if (s->passed + s->failed > 0 && !r->exact)
            fprintf(out, "   worst %.3g x tolerance", s->worst);
        fprintf(out, "%s\n", s->failed ? "   FAILED" : "");
        if (r->family_failures_shown > 8)
            fprintf(out, "    (%d more failures not shown; --verbose shows all)\n",
                    (int)(r->family_failures_shown - 8));
        total->passed += s->passed;
        total->failed += s->failed;
        total->unsupported += s->unsupported;
    }
    if (r->queue->api->destroy) r->queue->api->destroy(r->queue);
    r->queue = NULL;
    return 0;
}

int conformance_run(const conformance_options *opt) {
    FILE *out = opt->out ? opt->out : stdout;
    if (!opt->target || !opt->target[0]) {
        error_set("conformance: no plugin given");
        return CONFORMANCE_ERROR;
    }
    if (opt->op) {
        bool known = false;
        for (int f = 0; f < N_FAMILIES; f++) known |= !strcasecmp(opt->op, families[f].name);
        if (!known) {
            error_set("conformance: unknown op family '%s' (see --help for the list)", opt->op);
            return CONFORMANCE_ERROR;
        }
    }
    conf_backend backend;
    if (conf_backend_open(&backend, opt->target)) return CONFORMANCE_ERROR;
    const tsr_plugin *p = backend.plugin;
    fprintf(out, "plugin %s: '%s' version %s, ABI %u.%u\n", opt->target, p->name ? p->name : "?",
            p->version ? p->version : "?", TSR_ABI_MAJOR_OF(p->abi_version),
            TSR_ABI_MINOR_OF(p->abi_version));

    int32_t n_dev = conf_backend_device_count(&backend);
    if (n_dev == 0) {
        fprintf(out, "skipped: %s\n", backend.reason[0] ? backend.reason : "no devices");
        conf_backend_close(&backend);
        return CONFORMANCE_NO_DEVICE;
    }
    if (opt->device >= n_dev) {
        error_set("conformance: --device %d: plugin '%s' has %d device(s) (0..%d)", (int)opt->device,
                  p->name ? p->name : "?", (int)n_dev, (int)(n_dev - 1));
        conf_backend_close(&backend);
        return CONFORMANCE_ERROR;
    }

    conf_stats total = {0};
    int setup_failures = 0;
    for (int32_t d = 0; d < n_dev; d++) {
        if (opt->device >= 0 && d != opt->device) continue;
        conf_runner r = {
            .backend = &backend,
            .dev = p->device_get(d),
            .device_index = d,
            .exact = !strcmp(opt->target, "ref"),
            .verbose = opt->verbose,
            .out = out,
            .seed = 0x7465737365726121ull, /* the same data on every run and device */
        };
        if (!r.dev) {
            fprintf(out, "device %d: device_get returned NULL\n", (int)d);
            setup_failures++;
            continue;
        }
        if (run_device(&r, opt, &total)) setup_failures++;
    }
    conf_backend_close(&backend);

    int64_t n = total.passed + total.failed + total.unsupported;
    fprintf(out, "summary: %lld cases: %lld passed, %lld failed, %lld unsupported (falls back)%s%s\n",
            (long long)n, (long long)total.passed, (long long)total.failed,
            (long long)total.unsupported,
            opt->target && !strcmp(opt->target, "ref") ? "; ref vs ref: bit-exact" : "",
            setup_failures ? "; some devices could not be set up" : "");
    return total.failed || setup_failures ? CONFORMANCE_FAIL : CONFORMANCE_PASS;
}
