/*
 * host_guard — name the plugin when it kills the process.
 *
 * A plugin that crashes (SIGSEGV, SIGBUS, SIGILL, SIGFPE) or aborts inside
 * a call from the host would end the program with a bare "Segmentation
 * fault". The host marks each call into a plugin (which plugin, which
 * device, which entry point, which node); a handler prints
 *
 *     tessera: plugin 'acme' (/path/libtessera-backend-acme.so) crashed with
 *     signal 11 (SIGSEGV) in supports_op on acme0 (node 'blk.0.attn_q')
 *
 * and lets the signal take its course (the previous handler, or the
 * default action: the exit status and core dump are unchanged). The process
 * is not saved — a plugin that corrupted memory cannot be trusted — but the
 * user learns whom to blame. `tessera plugin check` goes further and runs
 * discovery and each op family in child processes.
 *
 * The handlers are process-wide, so they are opt-in (tessera_set_crash_guard:
 * the tessera CLI turns them on; a library embedded in a JVM must not take
 * SIGSEGV from it). Marking is done either way and costs a few pointer
 * stores (no formatting): the strings must outlive the call. Nested calls
 * are not tracked (the innermost wins).
 */
#ifndef TESSERA_HOST_GUARD_H
#define TESSERA_HOST_GUARD_H

#include <stdbool.h>

/* Install the handlers (enable), or put back the ones found when they were
 * installed, where ours are still in place. 0, or -1 with an error. */
int host_guard_enable(bool enable);

/* Before a call into a plugin: plugin name and file, what is called, and
 * optionally the device and node names (NULL if none). */
void host_guard_enter(const char *plugin, const char *path, const char *call, const char *device,
                      const char *node);
/* After it returned. */
void host_guard_leave(void);

#endif
