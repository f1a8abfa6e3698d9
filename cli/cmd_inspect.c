/* tessera inspect — placeholder until its issue lands. */
#include <stdio.h>

#include "commands.h"

int cmd_inspect(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "tessera inspect: not available in this build yet\n");
    return 2;
}
