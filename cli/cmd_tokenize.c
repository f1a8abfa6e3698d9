/* tessera tokenize — placeholder until its issue lands. */
#include <stdio.h>

#include "commands.h"

int cmd_tokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "tessera tokenize: not available in this build yet\n");
    return 2;
}
