/*
 * host_probe — a plugin's devices, asked in a child process. See host_probe.h.
 */
#include "host/host_probe.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void quiet_log(int level, const char *who, const char *message) {
    (void)level;
    (void)who;
    (void)message;
}

/* All n bytes of buf through fd (written when writing, else read); -1 when
 * the pipe ends or fails first. */
static int transfer_all(int fd, char *p, size_t n, bool writing) {
    while (n > 0) {
        ssize_t r = writing ? write(fd, p, n) : read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static int write_all(int fd, const void *buf, size_t n) { return transfer_all(fd, (char *)(uintptr_t)buf, n, true); }
static int read_all(int fd, void *buf, size_t n) { return transfer_all(fd, buf, n, false); }

/* The child: start the plugin, describe its devices, exit without
 * returning into the caller (no atexit handlers, no sanitizer reports). */
static void child_probe(const tsr_plugin *p, const tsr_host *services, int fd) {
    /* what the driver stack prints (Mesa's "not a conformant
     * implementation") is said again if the plugin is started here */
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        close(null);
    }
    tsr_host quiet = *services;
    quiet.log = quiet_log;
    char why[256] = "";
    int32_t n = -1;
    if (p->init(&quiet, why, sizeof why) == TSR_OK) n = p->device_count();
    if (write_all(fd, &n, sizeof n)) _exit(1);
    for (int32_t i = 0; i < n; i++) {
        host_probe_device pd;
        memset(&pd, 0, sizeof pd);
        pd.info.struct_size = sizeof pd.info;
        tsr_device *dev = p->device_get(i);
        if (!dev || !dev->api || !dev->api->get_info || dev->api->get_info(dev, &pd.info) != TSR_OK) _exit(1);
        strncpy(pd.description, pd.info.description ? pd.info.description : "", sizeof pd.description - 1);
        strncpy(pd.features, pd.info.features ? pd.info.features : "", sizeof pd.features - 1);
        pd.info.description = pd.info.features = NULL;
        if (write_all(fd, &pd, sizeof pd)) _exit(1);
    }
    _exit(0);
}

int32_t host_probe_plugin(const tsr_plugin *p, const tsr_host *services, host_probe_device **out) {
    *out = NULL;
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        child_probe(p, services, fds[1]);
    }
    close(fds[1]);
    int32_t n = -1;
    host_probe_device *devs = NULL;
    if (read_all(fds[0], &n, sizeof n) == 0 && n > 0 && n <= 64) {
        devs = calloc((size_t)n, sizeof *devs);
        if (!devs || read_all(fds[0], devs, (size_t)n * sizeof *devs) != 0) n = -1;
    } else {
        n = -1;
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (n < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        free(devs);
        return -1;
    }
    for (int32_t i = 0; i < n; i++) {
        devs[i].description[sizeof devs[i].description - 1] = '\0';
        devs[i].features[sizeof devs[i].features - 1] = '\0';
        devs[i].info.description = devs[i].description;
        devs[i].info.features = devs[i].features;
    }
    *out = devs;
    return n;
}
