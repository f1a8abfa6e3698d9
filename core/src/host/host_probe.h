/*
 * host_probe — learn a plugin's devices without starting it in this process.
 *
 * Starting a GPU plugin loads its driver stack: Mesa's lavapipe and PoCL
 * each bring LLVM, about 75 MiB of resident memory, into a process that
 * then never uses them (a software GPU ranks below the CPU backend and is
 * used only when named with --device). So discovery runs the plugin's init,
 * device_count, device_get and get_info in a forked child, which sends the
 * device descriptions back through a pipe and exits; the host then starts
 * in-process only the plugins whose devices it may use, and the others on
 * first use of one of their devices (host_device_open).
 */
#ifndef TESSERA_HOST_PROBE_H
#define TESSERA_HOST_PROBE_H

#include <stdint.h>

#include <tessera/plugin.h>

typedef struct host_probe_device {
    tsr_device_info info; /* description and features point below once copied back */
    char description[128];
    char features[192];
} host_probe_device;

/* Probe plugin p (already accepted: ABI and table checked) in a child with
 * services whose log is silent. Returns its device count (>= 1) with
 * *out malloc'd (free it), or -1 when the probe did not work out (init
 * failed, no devices, a crash, no fork): the caller starts the plugin
 * in-process, which reports why exactly as before. */
int32_t host_probe_plugin(const tsr_plugin *p, const tsr_host *services, host_probe_device **out);

#endif
