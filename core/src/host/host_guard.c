/*
 * host_guard — see host_guard.h. The handler uses write(2) only, and is
 * installed only when the application asked (host_guard_enable).
 */
#include "host/host_guard.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"

static const int guarded[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
enum { N_GUARDED = sizeof guarded / sizeof guarded[0] };

/* The call in progress (the registry's: one process, one plugin call
 * marked at a time; a crash on a plugin's worker thread still sees it). */
static struct {
    const char *volatile plugin, *volatile path, *volatile call, *volatile device, *volatile node;
    volatile sig_atomic_t active;
} current;
static struct sigaction previous[N_GUARDED];
static bool installed; /* by host_guard_enable(true), never by a plugin call */

static void put(const char *s) {
    if (!s) return;
    ssize_t ignored = write(STDERR_FILENO, s, strlen(s));
    (void)ignored;
}

static const char *signal_name(int sig) {
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGABRT: return "SIGABRT";
    default: return "a signal";
    }
}

static void on_crash(int sig) {
    int k = 0;
    while (k < N_GUARDED && guarded[k] != sig) k++;
    if (current.active) {
        char num[12];
        int n = sig, i = (int)sizeof num - 1;
        num[i] = '\0';
        do num[--i] = (char)('0' + n % 10), n /= 10; while (n && i > 0);
        put("\ntessera: plugin '");
        put(current.plugin);
        put("' (");
        put(current.path);
        put(") crashed with signal ");
        put(num + i);
        put(" (");
        put(signal_name(sig));
        put(") in ");
        put(current.call);
        if (current.device) {
            put(" on ");
            put(current.device);
        }
        if (current.node) {
            put(" (node '");
            put(current.node);
            put("')");
        }
        put("\n");
        current.active = 0;
    }
    /* Hand the signal on: the previous handler (a sanitizer's) or the
     * default action, now, or when the faulting instruction runs again or abort()
     * raises it once more; raise() covers a plugin that raised it itself. */
    if (k < N_GUARDED) sigaction(sig, &previous[k], NULL);
    raise(sig);
}

int host_guard_enable(bool enable) {
    if (enable == installed) return 0;
    if (enable) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_crash;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_NODEFER;
        for (int k = 0; k < N_GUARDED; k++) {
            if (sigaction(guarded[k], &sa, &previous[k]) != 0) {
                int failed = guarded[k], err = errno;
                while (k-- > 0) sigaction(guarded[k], &previous[k], NULL);
                return error_set("crash guard: cannot install a handler for %s: %s", signal_name(failed),
                                 strerror(err));
            }
        }
        installed = true;
        return 0;
    }
    /* Put back what was there, signal by signal, unless someone replaced
     * our handler since (theirs stays). */
    for (int k = 0; k < N_GUARDED; k++) {
        struct sigaction now;
        if (sigaction(guarded[k], NULL, &now) == 0 && !(now.sa_flags & SA_SIGINFO) && now.sa_handler == on_crash)
            sigaction(guarded[k], &previous[k], NULL);
    }
    installed = false;
    return 0;
}

void host_guard_enter(const char *plugin, const char *path, const char *call, const char *device,
                      const char *node) {
    current.plugin = plugin;
    current.path = path;
    current.call = call;
    current.device = device;
    current.node = node;
    current.active = 1;
}

void host_guard_leave(void) { current.active = 0; }
