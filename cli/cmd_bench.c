/* tessera bench — placeholder until its issue lands. */
#include <stdio.h>

#include "commands.h"

int cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "tessera bench: not available in this build yet\n");
    return 2;
}
