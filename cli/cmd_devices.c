/* tessera devices — list compute devices and every plugin that was rejected. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_opts.h"
#include "commands.h"
#include "host/host.h"
#include "util/error.h"

enum { MAX_DEVICES = 64 };

/* JSON string literal of s (control characters escaped). */
static void json_str(FILE *out, const char *s) {
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static const char *state_name(int32_t state) {
    switch (state) {
    case HOST_PLUGIN_LOADED: return "loaded";
    case HOST_PLUGIN_SUPERSEDED: return "superseded";
    default: return "rejected";
    }
}

static void print_mib(FILE *out, uint64_t bytes) {
    if (bytes == 0)
        fprintf(out, "unknown");
    else
        fprintf(out, "%.0f MiB", (double)bytes / (1024.0 * 1024.0));
}

/* A size in the largest unit that keeps it whole-ish: "4096 bytes", "128 MiB". */
static void print_size(FILE *out, uint64_t bytes) {
    if (bytes < (1u << 20))
        fprintf(out, "%llu bytes", (unsigned long long)bytes);
    else if (bytes < (1ull << 30))
        fprintf(out, "%.0f MiB", (double)bytes / (1024.0 * 1024.0));
    else
        fprintf(out, "%.2f GiB", (double)bytes / (1024.0 * 1024.0 * 1024.0));
}

static void print_text(FILE *out, host_device **devs, int32_t n) {
    fprintf(out, "devices:\n");
    for (int32_t i = 0; i < n; i++) {
        const host_device *d = devs[i];
        fprintf(out, "  %d  %-12s %-11s %s\n", d->index, d->name,
                host_device_kind_name(d->info.kind), d->info.description);
        fprintf(out, "      memory: ");
        print_mib(out, d->info.memory_total);
        fprintf(out, " total, ");
        print_mib(out, d->info.memory_free);
        fprintf(out, " free; host-visible: %s; reads host memory: %s; priority %d\n",
                d->info.host_visible ? "yes" : "no", d->info.reads_host_memory ? "yes" : "no",
                d->info.priority);
        fprintf(out, "      largest allocation: ");
        if (host_device_max_alloc(d))
            print_size(out, host_device_max_alloc(d));
        else
            fprintf(out, "no limit reported");
        fprintf(out, "; tensor alignment: %llu bytes\n", (unsigned long long)host_device_alignment(d));
        if (d->info.features[0]) fprintf(out, "      features: %s\n", d->info.features);
        fprintf(out, "      plugin: %s %s, %s\n", d->plugin->name,
                d->plugin->version ? d->plugin->version : "", d->plugin_path);
    }
    int32_t shown = 0;
    for (int32_t i = 0; i < host_plugin_count(); i++) {
        const host_plugin_record *p = host_plugin_get(i);
        if (p->state == HOST_PLUGIN_LOADED) continue;
        if (!shown++) fprintf(out, "rejected plugins:\n");
        fprintf(out, "  %s: %s: %s\n", p->path, state_name(p->state), p->reason);
    }
}

static void print_json(FILE *out, host_device **devs, int32_t n) {
    fprintf(out, "{\n  \"devices\": [");
    for (int32_t i = 0; i < n; i++) {
        const host_device *d = devs[i];
        fprintf(out, "%s\n    {\"index\": %d, \"name\": ", i ? "," : "", d->index);
        json_str(out, d->name);
        fprintf(out, ", \"kind\": ");
        json_str(out, host_device_kind_name(d->info.kind));
        fprintf(out, ", \"description\": ");
        json_str(out, d->info.description);
        fprintf(out, ", \"features\": ");
        json_str(out, d->info.features);
        fprintf(out,
                ", \"memory_total\": %llu, \"memory_free\": %llu, \"host_visible\": %s, "
                "\"reads_host_memory\": %s, \"priority\": %d, \"max_alloc_size\": %llu, "
                "\"buffer_alignment\": %llu, \"plugin\": ",
                (unsigned long long)d->info.memory_total, (unsigned long long)d->info.memory_free,
                d->info.host_visible ? "true" : "false",
                d->info.reads_host_memory ? "true" : "false", d->info.priority,
                (unsigned long long)host_device_max_alloc(d), (unsigned long long)host_device_alignment(d));
        json_str(out, d->plugin->name);
        fprintf(out, ", \"plugin_version\": ");
        json_str(out, d->plugin->version);
        fprintf(out, ", \"path\": ");
        json_str(out, d->plugin_path);
        fprintf(out, "}");
    }
    fprintf(out, "\n  ],\n  \"plugins\": [");
    for (int32_t i = 0; i < host_plugin_count(); i++) {
        const host_plugin_record *p = host_plugin_get(i);
        fprintf(out, "%s\n    {\"path\": ", i ? "," : "");
        json_str(out, p->path);
        fprintf(out, ", \"name\": ");
        json_str(out, p->name);
        fprintf(out, ", \"version\": ");
        json_str(out, p->version);
        fprintf(out, ", \"state\": ");
        json_str(out, state_name(p->state));
        fprintf(out, ", \"score\": %d, \"devices\": %d, \"reason\": ", p->score, p->n_devices);
        json_str(out, p->reason);
        fprintf(out, "}");
    }
    fprintf(out, "\n  ]\n}\n");
}

typedef struct devices_opts {
    cli_params p;
    int json, verbose;
    const char *device_list;
} devices_opts;

static const cli_option devices_own[] = {
    {NULL, "--json", NULL, "machine-readable output", CLI_SWITCH, CLI_OWN(devices_opts, json), 0, 0, NULL, 0,
     0},
    {"-dev", "--device", "LIST",
     "show only these devices, in this order (e.g. vulkan0,ref); an unknown name is an error listing "
     "the available ones",
     CLI_STR, CLI_OWN(devices_opts, device_list), 0, 0, NULL, CLI_NO_DEFAULT, 0},
    {"-v", "--verbose", NULL, "show what plugins log while loading", CLI_SWITCH,
     CLI_OWN(devices_opts, verbose), 0, 0, NULL, 0, 0},
    CLI_END,
};

static const cli_command devices_cmd = {
    .name = "tessera devices",
    .synopsis = "[--json] [--plugin-dir DIR]... [--device LIST] [-v]",
    .about = "List every compute device (index, name, kind, description, features, memory,\n"
             "largest single allocation and tensor alignment (ABI 1.1; 0 in --json: no\n"
             "limit reported), host visibility, plugin and file) and every backend plugin that was rejected\n"
             "or superseded, with the reason. Plugins are searched in --plugin-dir, then\n"
             "TESSERA_PLUGIN_PATH, the executable's directory and the install libdir.",
    .groups = CLI_G_PLUGINS,
    .own = devices_own,
};

int cmd_devices(int argc, char **argv) {
    devices_opts o;
    memset(&o, 0, sizeof o);
    cli_params_init(&o.p);
    int rc = cli_parse(&devices_cmd, argc, argv, &o.p, &o);
    if (rc != 0) return rc > 0 ? 0 : 2;
    const char *const *dirs = o.p.plugin_dirs;
    int32_t n_dirs = o.p.n_plugin_dirs;
    int verbosity = o.verbose ? TSR_LOG_DEBUG : TSR_LOG_ERROR;
    bool json = o.json;
    const char *device_list = o.device_list;
    host_options opt = {.plugin_dirs = dirs, .n_plugin_dirs = n_dirs, .verbosity = verbosity};
    if (host_init(&opt)) {
        fprintf(stderr, "tessera devices: %s\n", error_get());
        return 1;
    }
    host_device *devs[MAX_DEVICES];
    int32_t n = host_select_devices(device_list, devs, MAX_DEVICES);
    if (n < 0) {
        fprintf(stderr, "tessera devices: %s\n", error_get());
        host_shutdown();
        return 1;
    }
    if (json)
        print_json(stdout, devs, n);
    else
        print_text(stdout, devs, n);
    host_shutdown();
    return 0;
}
