/* tessera perplexity — placeholder until its issue lands. */
#include <stdio.h>

#include "commands.h"

int cmd_perplexity(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "tessera perplexity: not available in this build yet\n");
    return 2;
}
