/* tessera run — placeholder until its issue lands. */
#include <stdio.h>

#include "commands.h"

int cmd_run(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "tessera run: not available in this build yet\n");
    return 2;
}
