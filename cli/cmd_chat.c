/* tessera chat — placeholder until its issue lands. */
#include <stdio.h>

#include "commands.h"

int cmd_chat(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "tessera chat: not available in this build yet\n");
    return 2;
}
