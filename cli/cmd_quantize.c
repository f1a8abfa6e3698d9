/* tessera quantize — placeholder until its issue lands. */
#include <stdio.h>

#include "commands.h"

int cmd_quantize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "tessera quantize: not available in this build yet\n");
    return 2;
}
