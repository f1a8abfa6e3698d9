/*
 * host_elf — is a file a shared object this process can load? Reads the
 * ELF header before dlopen so that a plugin built for another machine is
 * reported as "built for aarch64, this host is x86-64" instead of the
 * loader's "No such file or directory" or "wrong ELF class".
 */
#ifndef TESSERA_HOST_ELF_H
#define TESSERA_HOST_ELF_H

#include <stddef.h>

/* 0 if path looks loadable here (or cannot be read: dlopen will say why),
 * else -1 with one line in why[why_size]. */
int host_elf_check(const char *path, char *why, size_t why_size);

/* "x86-64", "aarch64", ... for an ELF e_machine number; "machine N" else. */
const char *host_elf_machine_name(unsigned machine, char *buf, size_t size);

#endif
