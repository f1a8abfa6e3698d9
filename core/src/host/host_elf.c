/*
 * host_elf — the ELF header of a plugin file, read as untrusted bytes.
 */
#include "host/host_elf.h"

#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

const char *host_elf_machine_name(unsigned machine, char *buf, size_t size) {
    switch (machine) {
    case EM_X86_64: return "x86-64";
    case EM_386: return "i386";
    case EM_AARCH64: return "aarch64";
    case EM_ARM: return "arm (32-bit)";
    case EM_RISCV: return "riscv";
    case EM_PPC64: return "ppc64";
    case EM_S390: return "s390x";
    case EM_LOONGARCH: return "loongarch";
    default: snprintf(buf, size, "machine %u", machine); return buf;
    }
}

/* The machine this code runs on, as the compiler knows it. */
static unsigned own_machine(void) {
#if defined(__x86_64__)
    return EM_X86_64;
#elif defined(__aarch64__)
    return EM_AARCH64;
#elif defined(__i386__)
    return EM_386;
#elif defined(__arm__)
    return EM_ARM;
#elif defined(__riscv)
    return EM_RISCV;
#elif defined(__powerpc64__)
    return EM_PPC64;
#elif defined(__s390x__)
    return EM_S390;
#else
    return EM_NONE; /* unknown: leave the verdict to dlopen */
#endif
}

int host_elf_check(const char *path, char *why, size_t why_size) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0; /* dlopen reports it */
    unsigned char h[EI_NIDENT + 4];
    size_t n = fread(h, 1, sizeof h, f);
    fclose(f);
    if (n < EI_NIDENT || memcmp(h, ELFMAG, SELFMAG) != 0) {
        snprintf(why, why_size, "not an ELF shared object (no ELF header)");
        return -1;
    }
    if (n < sizeof h) {
        snprintf(why, why_size, "truncated ELF header (%zu bytes)", n);
        return -1;
    }
    const int cls = h[EI_CLASS], data = h[EI_DATA];
    if (data != ELFDATA2LSB && data != ELFDATA2MSB) {
        snprintf(why, why_size, "ELF header has an unknown byte order (%d)", data);
        return -1;
    }
    /* e_type (2 bytes) then e_machine (2 bytes) follow e_ident */
    const unsigned type = data == ELFDATA2LSB ? (unsigned)(h[EI_NIDENT] | h[EI_NIDENT + 1] << 8)
                                              : (unsigned)(h[EI_NIDENT] << 8 | h[EI_NIDENT + 1]);
    const unsigned machine = data == ELFDATA2LSB ? (unsigned)(h[EI_NIDENT + 2] | h[EI_NIDENT + 3] << 8)
                                                 : (unsigned)(h[EI_NIDENT + 2] << 8 | h[EI_NIDENT + 3]);
    const unsigned mine = own_machine();
    char b1[32], b2[32];
    const int own_cls = sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32;
    if (mine != EM_NONE && machine != mine) {
        snprintf(why, why_size, "built for %s (%d-bit), this host is %s: build the plugin for this machine",
                 host_elf_machine_name(machine, b1, sizeof b1), cls == ELFCLASS64 ? 64 : 32,
                 host_elf_machine_name(mine, b2, sizeof b2));
        return -1;
    }
    if (cls != own_cls) {
        snprintf(why, why_size, "a %d-bit ELF file, this host is %d-bit", cls == ELFCLASS64 ? 64 : 32,
                 own_cls == ELFCLASS64 ? 64 : 32);
        return -1;
    }
    if (type != ET_DYN) {
        snprintf(why, why_size, "an ELF file of type %u, not a shared object (build with -shared -fPIC)", type);
        return -1;
    }
    return 0;
}
