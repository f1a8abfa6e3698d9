/*
 * plugin_log.h — the log callback of a test's own tsr_host (tests that
 * dlopen a plugin and talk to it through the ABI alone).
 *
 * plugin_log() keeps every line in plugin_log_all ("[level] plugin: msg\n",
 * in order, cut off when the buffer is full) and the last message alone in
 * plugin_log_last; warnings and errors are printed as they come unless
 * plugin_log_quiet is set. plugin_log_clear() forgets both, so a check can
 * look for what one call logged.
 *
 * PLUGIN_TEST_HOST_FIELDS fills such a tsr_host (this log, an abort flag,
 * a thread count): `static const tsr_host host = {PLUGIN_TEST_HOST_FIELDS(&flag, 1)};`
 * with any other field after it.
 *
 * Header-only (static), for one test file each; needs <tessera/plugin.h>.
 */
#ifndef TESSERA_TESTS_PLUGIN_LOG_H
#define TESSERA_TESTS_PLUGIN_LOG_H

#include <stdbool.h>
#include <stdio.h>

#include <tessera/plugin.h>

static char plugin_log_all[1 << 16];
static size_t plugin_log_len;
static char plugin_log_last[1024];
static bool plugin_log_quiet;

static void plugin_log(int level, const char *plugin, const char *msg) {
    const char *who = plugin ? plugin : "?", *text = msg ? msg : "";
    size_t room = sizeof plugin_log_all - plugin_log_len;
    int n = snprintf(plugin_log_all + plugin_log_len, room, "[%d] %s: %s\n", level, who, text);
    if (n > 0) plugin_log_len += (size_t)n < room ? (size_t)n : room - 1;
    snprintf(plugin_log_last, sizeof plugin_log_last, "%s", text);
    if (!plugin_log_quiet && level <= TSR_LOG_WARN) printf("  [%s] %s\n", who, text);
}

#define PLUGIN_TEST_HOST_FIELDS(abort_flag_ptr, threads)                                                 \
    .struct_size = sizeof(tsr_host), .abi_version = TSR_ABI_VERSION, .log = plugin_log,                   \
    .abort_flag = (abort_flag_ptr), .n_threads = (threads)

static inline void plugin_log_clear(void) {
    plugin_log_len = 0;
    plugin_log_all[0] = '\0';
    plugin_log_last[0] = '\0';
}

#endif
