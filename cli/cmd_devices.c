/* tessera devices — list compute devices and every plugin that was rejected. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>
#include <tessera/tessera_devices.h>

#include "cli_opts.h"
#include "commands.h"

enum { MAX_DEVICES = 64, MAX_PLUGINS = 256 };

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
    case TESSERA_PLUGIN_LOADED: return "loaded";
    case TESSERA_PLUGIN_SUPERSEDED: return "superseded";
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

static void print_text(FILE *out, const tessera_device_details *devs, int32_t n,
                       const tessera_plugin_record *plugins, int32_t n_plugins) {
    fprintf(out, "devices:\n");
    for (int32_t i = 0; i < n; i++) {
        const tessera_device_details *d = &devs[i];
        fprintf(out, "  %d  %-12s %-11s %s\n", d->index, d->name, d->kind, d->description);
        fprintf(out, "      memory: ");
        print_mib(out, d->memory_total);
        fprintf(out, " total, ");
        print_mib(out, d->memory_free);
        fprintf(out, " free; host-visible: %s; reads host memory: %s; priority %d\n",
                d->host_visible ? "yes" : "no", d->reads_host_memory ? "yes" : "no", d->priority);
        fprintf(out, "      largest allocation: ");
        if (d->max_alloc_size)
            print_size(out, d->max_alloc_size);
        else
            fprintf(out, "no limit reported");
        fprintf(out, "; tensor alignment: %llu bytes\n", (unsigned long long)d->buffer_alignment);
        if (d->features[0]) fprintf(out, "      features: %s\n", d->features);
        fprintf(out, "      plugin: %s %s, %s\n", d->plugin_name, d->plugin_version, d->plugin_path);
    }
    int32_t shown = 0;
    for (int32_t i = 0; i < n_plugins; i++) {
        const tessera_plugin_record *p = &plugins[i];
        if (p->state == TESSERA_PLUGIN_LOADED) continue;
        if (!shown++) fprintf(out, "rejected plugins:\n");
        fprintf(out, "  %s: %s: %s\n", p->path, state_name(p->state), p->reason);
    }
}

static void print_json(FILE *out, const tessera_device_details *devs, int32_t n,
                       const tessera_plugin_record *plugins, int32_t n_plugins) {
    fprintf(out, "{\n  \"devices\": [");
    for (int32_t i = 0; i < n; i++) {
        const tessera_device_details *d = &devs[i];
        fprintf(out, "%s\n    {\"index\": %d, \"name\": ", i ? "," : "", d->index);
        json_str(out, d->name);
        fprintf(out, ", \"kind\": ");
        json_str(out, d->kind);
        fprintf(out, ", \"description\": ");
        json_str(out, d->description);
        fprintf(out, ", \"features\": ");
        json_str(out, d->features);
        fprintf(out,
                ", \"memory_total\": %llu, \"memory_free\": %llu, \"host_visible\": %s, "
                "\"reads_host_memory\": %s, \"priority\": %d, \"max_alloc_size\": %llu, "
                "\"buffer_alignment\": %llu, \"plugin\": ",
                (unsigned long long)d->memory_total, (unsigned long long)d->memory_free,
                d->host_visible ? "true" : "false", d->reads_host_memory ? "true" : "false", d->priority,
                (unsigned long long)d->max_alloc_size, (unsigned long long)d->buffer_alignment);
        json_str(out, d->plugin_name);
        fprintf(out, ", \"plugin_version\": ");
        json_str(out, d->plugin_version);
        fprintf(out, ", \"path\": ");
        json_str(out, d->plugin_path);
        fprintf(out, "}");
    }
    fprintf(out, "\n  ],\n  \"plugins\": [");
    for (int32_t i = 0; i < n_plugins; i++) {
        const tessera_plugin_record *p = &plugins[i];
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
    /* quiet: plugin errors only; -v: everything they log */
    tessera_init_params ip = {.plugin_dirs = dirs, .n_plugin_dirs = n_dirs,
                              .verbosity = o.verbose ? 2 : TESSERA_VERBOSITY_ERRORS};
    if (tessera_init(&ip)) {
        fprintf(stderr, "tessera devices: %s\n", tessera_last_error());
        return 1;
    }
    tessera_device_details devs[MAX_DEVICES];
    tessera_plugin_record plugins[MAX_PLUGINS];
    int32_t n = tessera_devices_select(o.device_list, devs, MAX_DEVICES);
    int32_t n_plugins = n < 0 ? 0 : tessera_plugins(plugins, MAX_PLUGINS);
    if (n < 0 || n_plugins < 0) {
        fprintf(stderr, "tessera devices: %s\n", tessera_last_error());
        tessera_shutdown();
        return 1;
    }
    if (n_plugins > MAX_PLUGINS) n_plugins = MAX_PLUGINS;
    if (o.json)
        print_json(stdout, devs, n, plugins, n_plugins);
    else
        print_text(stdout, devs, n, plugins, n_plugins);
    tessera_shutdown();
    return 0;
}
