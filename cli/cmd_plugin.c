/* tessera plugin — placeholder until its issue lands. */
#include <stdio.h>

#include "commands.h"

int cmd_plugin(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "tessera plugin: not available in this build yet\n");
    return 2;
}
