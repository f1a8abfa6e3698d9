/*
 * conf_run — the suite's driver: open the backend, walk its devices, run
 * every op family on each, print one line per family and a summary.
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

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
    {"GELU", conf_gen_gelu},         {"SWIGLU", conf_gen_swiglu}, {"SWIGLU_OAI", conf_gen_swiglu_oai},
    {"CPY", conf_gen_cpy},           {"CONCAT", conf_gen_concat},
    {"ARGMAX", conf_gen_argmax},     {"FLASH_ATTN", conf_gen_flash_attn},
    {"MUL_MAT_ID", conf_gen_mul_mat_id}, {"TOP_K", conf_gen_top_k},
    {"SUM_ROWS", conf_gen_sum_rows}, {"DIV", conf_gen_div},
    {"SSM_CONV", conf_gen_ssm_conv}, {"SSM_SCAN", conf_gen_ssm_scan},
    {"DELTA_NET", conf_gen_delta_net}, {"GELU_ERF", conf_gen_gelu_erf},
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

/* FNV-1a of the family name: its cases' seeds derive from it alone. */
static uint64_t family_seed(const char *name) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = name; *p; p++) h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
    return h ^ 0x7465737365726121ull;
}

/* Set up device r->device_index of an open backend: get_info, the ABI 1.1
 * open hook, a queue with its thread count. -1 with a line printed. */
static int device_setup(conf_runner *r, bool print) {
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
    if (print)
        fprintf(out, "device %d: %s (%s)%s%s\n", (int)r->device_index,
                r->info.description ? r->info.description : "?", kind_name(r->info.kind),
                r->info.host_visible ? ", host-visible" : "",
                r->info.reads_host_memory ? ", reads host memory" : "");
    if (print && (r->info.max_alloc_size || r->info.buffer_alignment)) /* ABI 1.1 limits */
        fprintf(out, "device %d: largest allocation %llu bytes, tensor alignment %llu bytes\n", (int)r->device_index,
                (unsigned long long)r->info.max_alloc_size, (unsigned long long)r->info.buffer_alignment);
    if (TSR_HAS_FIELD(tsr_device_api, api->struct_size, open) && api->open) {
        char why[256] = "";
        tsr_status st = api->open(r->dev, why, sizeof why);
        if (st != TSR_OK) {
            fprintf(out, "device %d: open failed (status %d): %s\n", (int)r->device_index, (int)st, why);
            return -1;
        }
        r->opened = true;
    }
    if (api->queue_create(r->dev, &r->queue) != TSR_OK || !r->queue || !r->queue->api ||
        !r->queue->api->compute || !r->queue->api->write || !r->queue->api->read ||
        !r->queue->api->synchronize) {
        fprintf(out, "device %d: queue_create failed or the queue table is incomplete\n",
                (int)r->device_index);
        return -1;
    }
    const tsr_queue_api *q = r->queue->api;
    if (TSR_HAS_FIELD(tsr_queue_api, q->struct_size, set_n_threads) && q->set_n_threads)
        q->set_n_threads(r->queue, r->backend->host.n_threads);
    return 0;
}

static void device_teardown(conf_runner *r) {
    if (r->queue && r->queue->api->destroy) r->queue->api->destroy(r->queue);
    r->queue = NULL;
    const tsr_device_api *api = r->dev->api;
    if (r->opened && TSR_HAS_FIELD(tsr_device_api, api->struct_size, close) && api->close) api->close(r->dev);
    r->opened = false;
}

static void print_family(conf_runner *r, const char *name, const conf_stats *s, int32_t shown) {
    FILE *out = r->out;
    fprintf(out, "  %-10s %4lld cases: %4lld passed, %lld failed, %lld unsupported (falls back)", name,
            (long long)(s->passed + s->failed + s->unsupported), (long long)s->passed, (long long)s->failed,
            (long long)s->unsupported);
    if (s->passed + s->failed > 0 && !r->exact) fprintf(out, "   worst %.3g x tolerance", s->worst);
    fprintf(out, "%s\n", s->failed ? "   FAILED" : "");
    if (shown > 8) fprintf(out, "    (%d more failures not shown; --verbose shows all)\n", (int)(shown - 8));
}

/* One family on the runner's (set up) device. */
static void run_family(conf_runner *r, const conf_family *f) {
    r->family = (conf_stats){0};
    r->family_failures_shown = 0;
    r->family_name = f->name;
    r->family_seed = family_seed(f->name);
    r->case_index = 0;
    r->rerun_shown = false;
    if (r->verbose) fprintf(r->out, "  %s\n", f->name);
    f->generate(r);
}

static void add_stats(conf_stats *total, const conf_stats *s) {
    total->passed += s->passed;
    total->failed += s->failed;
    total->unsupported += s->unsupported;
}

/* In a child: let a crash end the process by its signal (a sanitizer's
 * handler would turn it into "exit 1"), so the parent can name it. */
static void crash_by_signal(void) {
    const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], SIG_DFL);
}

/* In a child process: open the backend afresh, set up device d, run one
 * family; the counts go to shared memory. Never returns. */
static void family_child(conf_runner *r, const conformance_options *opt, int32_t d, const conf_family *f,
                         conf_shared *sh) {
    crash_by_signal();
    conf_backend backend;
    int code = 3;
    if (conf_backend_open(&backend, opt->target) == 0 && conf_backend_device_count(&backend) > d) {
        r->backend = &backend;
        r->dev = backend.plugin->device_get(d);
        r->shared = sh;
        if (r->dev && device_setup(r, false) == 0) {
            run_family(r, f);
            sh->family = r->family;
            sh->failures_shown = r->family_failures_shown;
            sh->finished = 1;
            code = 0;
        }
        if (r->dev) device_teardown(r);
        conf_backend_close(&backend);
    }
    fflush(r->out);
    fflush(stderr);
    _exit(code);
}

/* Run one family in a child; a crash or hang there becomes one failed case
 * naming the case and the signal. */
static void family_forked(conf_runner *r, const conformance_options *opt, int32_t d, const conf_family *f,
                          conf_shared *sh, conf_stats *total) {
    memset(sh, 0, sizeof *sh);
    sh->case_index = -1;
    fflush(r->out);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(r->out, "  %-10s could not fork: %s   FAILED\n", f->name, strerror(errno));
        total->failed++;
        return;
    }
    if (pid == 0) family_child(r, opt, d, f, sh);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (sh->finished && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        conf_runner shown = *r;
        print_family(&shown, f->name, &sh->family, sh->failures_shown);
        add_stats(total, &sh->family);
        return;
    }
    conf_stats s = sh->family;
    s.failed++;
    char how[96];
    if (WIFSIGNALED(status))
        snprintf(how, sizeof how, "crashed with signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(how, sizeof how, "exited with status %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    if (sh->case_index >= 0) {
        fprintf(r->out, "    FAIL #%d %s: the device %s (seed %016llx)\n", (int)sh->case_index, sh->case_name, how,
                (unsigned long long)sh->case_seed);
        fprintf(r->out, "    re-run one case: tessera plugin check %s --device %d --op %s --case %d --no-fork\n",
                opt->target, (int)d, f->name, (int)sh->case_index);
    } else {
        fprintf(r->out, "    FAIL the family's process %s outside any case (loading the plugin, device "
                        "setup or between cases)\n", how);
    }
    print_family(r, f->name, &s, 0);
    add_stats(total, &s);
}

enum { PROBE_MAX_DEVICES = 64 };

/* What discovery found (filled by the probe child, or in process). */
typedef struct conf_probe {
    int32_t status;          /* 0 ok, else a CONFORMANCE_* code to return */
    int32_t n_dev;
    bool device_ok[PROBE_MAX_DEVICES];
    char error[512];         /* error_get() of a failed open */
    int32_t finished;
} conf_probe;

/* Open the backend, print the plugin and its devices, set each selected
 * device up once (and tear it down). */
static void probe(const conformance_options *opt, FILE *out, conf_probe *pr) {
    conf_backend backend;
    pr->status = CONFORMANCE_PASS;
    if (conf_backend_open(&backend, opt->target)) {
        pr->status = CONFORMANCE_ERROR;
        snprintf(pr->error, sizeof pr->error, "%s", error_get());
        return;
    }
    const tsr_plugin *p = backend.plugin;
    fprintf(out, "plugin %s: '%s' version %s, ABI %u.%u\n", opt->target, p->name ? p->name : "?",
            p->version ? p->version : "?", TSR_ABI_MAJOR_OF(p->abi_version), TSR_ABI_MINOR_OF(p->abi_version));
    pr->n_dev = conf_backend_device_count(&backend);
    if (pr->n_dev == 0) {
        fprintf(out, "skipped: %s\n", backend.reason[0] ? backend.reason : "no devices");
        pr->status = CONFORMANCE_NO_DEVICE;
    } else if (opt->device >= pr->n_dev) {
        snprintf(pr->error, sizeof pr->error, "conformance: --device %d: plugin '%s' has %d device(s) (0..%d)",
                 (int)opt->device, p->name ? p->name : "?", (int)pr->n_dev, (int)(pr->n_dev - 1));
        pr->status = CONFORMANCE_ERROR;
    }
    for (int32_t d = 0; pr->status == CONFORMANCE_PASS && d < pr->n_dev && d < PROBE_MAX_DEVICES; d++) {
        if (opt->device >= 0 && d != opt->device) continue;
        conf_runner r = {.backend = &backend, .dev = p->device_get(d), .device_index = d, .out = out};
        if (!r.dev) {
            fprintf(out, "device %d: device_get returned NULL\n", (int)d);
            continue;
        }
        pr->device_ok[d] = device_setup(&r, true) == 0;
        device_teardown(&r);
    }
    conf_backend_close(&backend);
}

/* Discovery in a child: a plugin that crashes in tsr_plugin_entry, init,
 * device_count or device setup is named, not a bare signal; and the parent
 * never initializes the plugin, so every family's child starts clean (a
 * driver's threads do not survive fork). -1 with an error. */
static int probe_forked(const conformance_options *opt, FILE *out, conf_probe *pr) {
    memset(pr, 0, sizeof *pr);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return error_set("conformance: fork failed: %s", strerror(errno));
    if (pid == 0) {
        crash_by_signal();
        probe(opt, out, pr);
        pr->finished = 1;
        fflush(NULL);
        _exit(0);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (WIFSIGNALED(status))
        return error_set("plugin %s crashed with signal %d (%s) while loading or discovering devices "
                         "(tsr_plugin_entry, init, device_count or device setup)",
                         opt->target, WTERMSIG(status), strsignal(WTERMSIG(status)));
    if (!pr->finished)
        return error_set("plugin %s ended the process (status %d) while loading or discovering devices "
                         "(tsr_plugin_entry, init, device_count or device setup)",
                         opt->target, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}

/* The options' target, op family and case; an error names the one at fault. */
static int options_check(const conformance_options *opt) {
    if (!opt->target || !opt->target[0]) return error_set("conformance: no plugin given");
    if (opt->op) {
        bool known = false;
        for (int f = 0; f < N_FAMILIES; f++) known |= !strcasecmp(opt->op, families[f].name);
        if (!known) return error_set("conformance: unknown op family '%s' (see --help for the list)", opt->op);
    }
    if (opt->one_case && !opt->op)
        return error_set("conformance: --case needs --op (case numbers count within one family)");
    return 0;
}

/* Every chosen family on device d (set up already when in process). */
static void run_device(conf_runner *r, const conformance_options *opt, int32_t d, conf_shared *shared,
                       conf_stats *total) {
    for (int f = 0; f < N_FAMILIES; f++) {
        if (opt->op && strcasecmp(opt->op, families[f].name)) continue;
        if (!r->backend) {
            family_forked(r, opt, d, &families[f], shared, total);
        } else {
            run_family(r, &families[f]);
            print_family(r, families[f].name, &r->family, r->family_failures_shown);
            add_stats(total, &r->family);
        }
    }
}

int conformance_run(const conformance_options *opt) {
    FILE *out = opt->out ? opt->out : stdout;
    if (options_check(opt) != 0) return CONFORMANCE_ERROR;
    /* shared with the child processes: the probe's findings, a family's counts */
    struct shared_pages {
        conf_probe probe;
        conf_shared family;
    } *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        error_set("conformance: shared memory: %s", strerror(errno));
        return CONFORMANCE_ERROR;
    }
    int rc = CONFORMANCE_PASS;
    conf_backend backend; /* in process (--no-fork) only */
    bool backend_open = false;
    if (!opt->no_fork) {
        if (probe_forked(opt, out, &sh->probe)) {
            rc = CONFORMANCE_FAIL;
            goto done;
        }
    } else {
        probe(opt, out, &sh->probe);
    }
    if (sh->probe.status != CONFORMANCE_PASS) {
        if (sh->probe.status == CONFORMANCE_ERROR) error_set("%s", sh->probe.error);
        rc = sh->probe.status;
        goto done;
    }
    if (opt->no_fork) {
        if (conf_backend_open(&backend, opt->target)) {
            rc = CONFORMANCE_ERROR;
            goto done;
        }
        backend_open = true;
    }

    conf_stats total = {0};
    int setup_failures = 0;
    for (int32_t d = 0; d < sh->probe.n_dev; d++) {
        if (opt->device >= 0 && d != opt->device) continue;
        if (d >= PROBE_MAX_DEVICES || !sh->probe.device_ok[d]) {
            setup_failures++;
            continue;
        }
        conf_runner r = {
            .backend = backend_open ? &backend : NULL,
            .dev = backend_open ? backend.plugin->device_get(d) : NULL,
            .device_index = d,
            .exact = !strcmp(opt->target, "ref"),
            .verbose = opt->verbose,
            .out = out,
            .target = opt->target,
            .only_case = opt->one_case ? opt->case_index : -1,
        };
        if (backend_open && (!r.dev || device_setup(&r, false))) {
            setup_failures++;
            continue;
        }
        run_device(&r, opt, d, &sh->family, &total);
        if (backend_open) device_teardown(&r);
    }

    int64_t n = total.passed + total.failed + total.unsupported;
    fprintf(out, "summary: %lld cases: %lld passed, %lld failed, %lld unsupported (falls back)%s%s\n",
            (long long)n, (long long)total.passed, (long long)total.failed,
            (long long)total.unsupported,
            opt->target && !strcmp(opt->target, "ref") ? "; ref vs ref: bit-exact" : "",
            setup_failures ? "; some devices could not be set up" : "");
    rc = total.failed || setup_failures ? CONFORMANCE_FAIL : CONFORMANCE_PASS;
done:
    if (backend_open) conf_backend_close(&backend);
    munmap(sh, sizeof *sh);
    return rc;
}
