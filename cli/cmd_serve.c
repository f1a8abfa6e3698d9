/* tessera serve — placeholder until its issue lands. */
#include <stdio.h>

#include "commands.h"

int cmd_serve(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "tessera serve: not available in this build yet\n");
    return 2;
}
