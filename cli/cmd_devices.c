/* tessera devices — placeholder until its issue lands. */
#include <stdio.h>

#include "commands.h"

int cmd_devices(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "tessera devices: not available in this build yet\n");
    return 2;
}
