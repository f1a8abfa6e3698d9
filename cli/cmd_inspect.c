/*
 * tessera inspect FILE [--json] [--full] — print a GGUF file's header, its
 * metadata and its tensor table, as text for people or as one JSON document.
 * --validate instead loads the file as a model, with every check the loader
 * makes, and decodes one token to see that the logits are finite.
 *
 * Long arrays show their first elements and how many more there are; in text
 * mode long strings are cut (at a UTF-8 character boundary) with their
 * length. --full prints everything.
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>
#include <tessera/tessera_gguf.h>

#include "cli_util.h"
#include "cli_opts.h"
#include "commands.h"

enum {
    ARRAY_HEAD = 8,   /* elements shown of a top-level array */
    NESTED_HEAD = 4,  /* elements shown of an array inside an array */
    STRING_HEAD = 96, /* bytes shown of a metadata string */
};

typedef struct inspect_opts {
    int validate;
    int json;
    int full;
} inspect_opts;

/* ------------------------------------------------------------ strings */

/* At most max bytes of a string, in double quotes, never cutting a UTF-8
 * character. JSON: escaped per RFC 8259, invalid UTF-8 bytes become U+FFFD.
 * Text: control and invalid bytes as \xNN, and a cut string says its length.
 * Returns the bytes shown. */
static uint64_t put_string_max(FILE *o, const char *ptr, uint64_t len, uint64_t max,
                               const inspect_opts *opt) {
    const unsigned char *s = (const unsigned char *)ptr;
    uint64_t shown = len < max ? len : max;
    fputc('"', o);
    uint64_t i = 0;
    while (i < shown) {
        unsigned c = s[i];
        size_t seq = cli_utf8_seq_len(s + i, (size_t)(len - i));
        if (seq > 1) {
            if (i + seq > shown) break; /* do not cut a character in half */
            fwrite(s + i, 1, seq, o);
            i += seq;
            continue;
        }
        i++;
        if (seq == 0) {
            if (opt->json) fputs("\\ufffd", o);
            else fprintf(o, "\\x%02x", c);
        } else if (c == '"') fputs("\\\"", o);
        else if (c == '\\') fputs("\\\\", o);
        else if (c == '\n') fputs("\\n", o);
        else if (c == '\t') fputs("\\t", o);
        else if (c == '\r') fputs("\\r", o);
        else if (c < 0x20 || c == 0x7f) {
            if (opt->json) fprintf(o, "\\u%04x", c);
            else fprintf(o, "\\x%02x", c);
        } else fputc((int)c, o);
    }
    fputc('"', o);
    if (i < len && !opt->json) fprintf(o, "... (%" PRIu64 " bytes)", len);
    return i;
}

static void put_string(FILE *o, const char *ptr, uint64_t len, const inspect_opts *opt) {
    put_string_max(o, ptr, len, UINT64_MAX, opt);
}

/* Metadata strings are shortened unless --full. */
static uint64_t put_meta_string(FILE *o, const char *ptr, uint64_t len, const inspect_opts *opt) {
    return put_string_max(o, ptr, len, opt->full ? UINT64_MAX : STRING_HEAD, opt);
}

/* ------------------------------------------------------------- values */

/* The shortest %g form that reads back as the same value (1e-05, not
 * 9.99999975e-06). */
static void put_float(FILE *o, double x, bool is_f32, const inspect_opts *opt) {
    if (isfinite(x)) {
        char buf[40];
        for (int digits = is_f32 ? 6 : 15; digits <= (is_f32 ? 9 : 17); digits++) {
            snprintf(buf, sizeof buf, "%.*g", digits, x);
            if (is_f32 ? strtof(buf, NULL) == (float)x : strtod(buf, NULL) == x) break;
        }
        fputs(buf, o);
        return;
    }
    const char *s = isnan(x) ? "nan" : x > 0 ? "inf" : "-inf";
    /* JSON has no NaN or infinity: spell them as strings */
    if (opt->json) fprintf(o, "\"%s\"", s);
    else fputs(s, o);
}

static void put_scalar(FILE *o, const tessera_gguf_value *v, const inspect_opts *opt) {
    const unsigned char *p = v->data;
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
            uint64_t u64; int64_t i64; float f32; double f64; } x;
    memcpy(&x, p, v->size <= sizeof x ? v->size : sizeof x);
    switch (v->type) {
    case TESSERA_GGUF_UINT8: fprintf(o, "%" PRIu8, x.u8); break;
    case TESSERA_GGUF_INT8: fprintf(o, "%" PRId8, x.i8); break;
    case TESSERA_GGUF_UINT16: fprintf(o, "%" PRIu16, x.u16); break;
    case TESSERA_GGUF_INT16: fprintf(o, "%" PRId16, x.i16); break;
    case TESSERA_GGUF_UINT32: fprintf(o, "%" PRIu32, x.u32); break;
    case TESSERA_GGUF_INT32: fprintf(o, "%" PRId32, x.i32); break;
    case TESSERA_GGUF_UINT64: fprintf(o, "%" PRIu64, x.u64); break;
    case TESSERA_GGUF_INT64: fprintf(o, "%" PRId64, x.i64); break;
    case TESSERA_GGUF_FLOAT32: put_float(o, x.f32, true, opt); break;
    case TESSERA_GGUF_FLOAT64: put_float(o, x.f64, false, opt); break;
    case TESSERA_GGUF_BOOL: fputs(x.u8 ? "true" : "false", o); break;
    default: fputs("null", o); break;
    }
}

static void put_value(FILE *o, const tessera_gguf_value *v, int depth, const inspect_opts *opt);

static void put_array(FILE *o, const tessera_gguf_value *v, int depth, const inspect_opts *opt) {
    uint64_t head = opt->full ? v->count : depth == 0 ? ARRAY_HEAD : NESTED_HEAD;
    uint64_t shown = v->count < head ? v->count : head;
    uint64_t pos = 0;
    fputc('[', o);
    for (uint64_t j = 0; j < shown; j++) {
        tessera_gguf_value e;
        if (tessera_gguf_array_next(v, &pos, &e) != 0) break;
        if (j) fputs(", ", o);
        put_value(o, &e, depth + 1, opt);
    }
    /* JSON: the count beside the array says how many were left out */
    if (shown < v->count && !opt->json)
        fprintf(o, "%s... (%" PRIu64 " more)", shown ? ", " : "", v->count - shown);
    fputc(']', o);
}

static void put_value(FILE *o, const tessera_gguf_value *v, int depth, const inspect_opts *opt) {
    if (v->type == TESSERA_GGUF_STRING) put_meta_string(o, v->data, v->size, opt);
    else if (v->type == TESSERA_GGUF_ARRAY) put_array(o, v, depth, opt);
    else put_scalar(o, v, opt);
}

/* "uint32", "array[string; 512]", "array[array; 3]" */
static void type_label(char *buf, size_t n, const tessera_gguf_value *v) {
    if (v->type == TESSERA_GGUF_ARRAY)
        snprintf(buf, n, "array[%s; %" PRIu64 "]", tessera_gguf_type_name(v->elem_type), v->count);
    else snprintf(buf, n, "%s", tessera_gguf_type_name(v->type));
}

/* "[64, 512]" */
static void shape_label(char *buf, size_t n, const tessera_gguf_tensor *t) {
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t->n_dims && used < n; d++)
        used += (size_t)snprintf(buf + used, n - used, "%s%" PRId64, d ? ", " : "", t->ne[d]);
    if (used < n) snprintf(buf + used, n - used, "]");
}

static uint64_t tensor_bytes_total(const tessera_gguf *f) {
    uint64_t total = 0;
    tessera_gguf_tensor t;
    for (int64_t i = 0; i < tessera_gguf_tensor_count(f); i++)
        if (tessera_gguf_tensor_info(f, i, &t) == 0) total += t.size;
    return total;
}

/* Whether Tessera can run the file's architecture: "gemma3 (supported)",
 * "foo (not supported; supported: llama, ...)", "(none)". */
static void arch_label(char *buf, size_t n, const tessera_gguf *f, bool *supported) {
    const char *arch;
    uint64_t len;
    *supported = false;
    if (tessera_gguf_find_key(f, "general.architecture") < 0 ||
        tessera_gguf_get_str(f, "general.architecture", &arch, &len) != 0) {
        snprintf(buf, n, "(none)");
        return;
    }
    *supported = tessera_arch_supported(arch, (size_t)len);
    snprintf(buf, n, "%.*s (%s%s)", (int)(len > 64 ? 64 : len), arch,
             *supported ? "supported" : "not supported; supported: ", *supported ? "" : tessera_arch_list());
}

/* --------------------------------------------------------------- text */

static void print_text(FILE *o, const tessera_gguf *f, const inspect_opts *opt) {
    fprintf(o, "file         %s\n", tessera_gguf_path(f));
    for (int32_t i = 1; i < tessera_gguf_split_count(f); i++) /* a split model: its other files */
        fprintf(o, "%s %s (shard %d of %d)\n", i == 1 ? "split files " : "            ",
                tessera_gguf_split_file(f, i), (int)i + 1, (int)tessera_gguf_split_count(f));
    fprintf(o, "version      %" PRIu32 "\n", tessera_gguf_version(f));
    fprintf(o, "alignment    %" PRIu64 "\n", tessera_gguf_alignment(f));
    fprintf(o, "file size    %" PRIu64 " bytes\n", tessera_gguf_file_size(f));
    fprintf(o, "data offset  %" PRIu64 "\n", tessera_gguf_data_offset(f));
    fprintf(o, "metadata     %" PRId64 " keys\n", tessera_gguf_kv_count(f));
    fprintf(o, "tensors      %" PRId64 " (%" PRIu64 " bytes)\n", tessera_gguf_tensor_count(f),
            tensor_bytes_total(f));
    char arch[384];
    bool supported;
    arch_label(arch, sizeof arch, f, &supported);
    fprintf(o, "architecture %s\n", arch);

    fprintf(o, "\nmetadata:\n");
    for (int64_t i = 0; i < tessera_gguf_kv_count(f); i++) {
        tessera_gguf_value v;
        char type[64];
        if (tessera_gguf_kv_value(f, i, &v) != 0) continue;
        type_label(type, sizeof type, &v);
        fprintf(o, "  %-42s %-20s ", tessera_gguf_kv_key(f, i), type);
        put_value(o, &v, 0, opt);
        fputc('\n', o);
    }

    fprintf(o, "\ntensors:\n");
    fprintf(o, "  %5s  %-36s %-8s %-22s %12s %12s\n", "#", "name", "type", "shape", "offset",
            "bytes");
    for (int64_t i = 0; i < tessera_gguf_tensor_count(f); i++) {
        tessera_gguf_tensor t;
        if (tessera_gguf_tensor_info(f, i, &t) != 0) continue;
        char shape[128];
        shape_label(shape, sizeof shape, &t);
        fprintf(o, "  %5" PRId64 "  %-36s %-8s %-22s %12" PRIu64 " %12" PRIu64 "\n", i, t.name, t.type_name,
                shape, t.offset, t.size);
    }
}

/* --------------------------------------------------------------- json */

static void print_json(FILE *o, const tessera_gguf *f, const inspect_opts *opt) {
    fputs("{\n  \"file\": ", o);
    const char *path = tessera_gguf_path(f);
    put_string(o, path, strlen(path), opt);
    fprintf(o, ",\n  \"split_count\": %d", (int)tessera_gguf_split_count(f));
    fprintf(o, ",\n  \"version\": %" PRIu32 ",\n  \"alignment\": %" PRIu64
            ",\n  \"file_size\": %" PRIu64 ",\n  \"data_offset\": %" PRIu64
            ",\n  \"kv_count\": %" PRId64 ",\n  \"tensor_count\": %" PRId64
            ",\n  \"tensor_bytes\": %" PRIu64,
            tessera_gguf_version(f), tessera_gguf_alignment(f), tessera_gguf_file_size(f), tessera_gguf_data_offset(f),
            tessera_gguf_kv_count(f), tessera_gguf_tensor_count(f), tensor_bytes_total(f));
    char arch[384];
    bool supported;
    arch_label(arch, sizeof arch, f, &supported);
    fprintf(o, ",\n  \"architecture_supported\": %s,\n  \"metadata\": {", supported ? "true" : "false");
    for (int64_t i = 0; i < tessera_gguf_kv_count(f); i++) {
        tessera_gguf_value v;
        if (tessera_gguf_kv_value(f, i, &v) != 0) continue;
        const char *key = tessera_gguf_kv_key(f, i);
        fputs(i ? ",\n    " : "\n    ", o);
        put_string(o, key, strlen(key), opt);
        fprintf(o, ": {\"type\": \"%s\"", tessera_gguf_type_name(v.type));
        if (v.type == TESSERA_GGUF_ARRAY) {
            uint64_t head = opt->full ? v.count : ARRAY_HEAD;
            fprintf(o, ", \"elem_type\": \"%s\", \"count\": %" PRIu64 ", \"truncated\": %s",
                    tessera_gguf_type_name(v.elem_type), v.count, v.count > head ? "true" : "false");
        }
        fputs(", \"value\": ", o);
        if (v.type == TESSERA_GGUF_STRING) {
            /* a shortened string says so, and how long it is */
            uint64_t shown = put_meta_string(o, v.data, v.size, opt);
            if (shown < v.size)
                fprintf(o, ", \"length\": %" PRIu64 ", \"truncated\": true", v.size);
        } else {
            put_value(o, &v, 0, opt);
        }
        fputc('}', o);
    }
    fputs(tessera_gguf_kv_count(f) ? "\n  },\n  \"tensors\": [" : "},\n  \"tensors\": [", o);
    for (int64_t i = 0; i < tessera_gguf_tensor_count(f); i++) {
        tessera_gguf_tensor t;
        if (tessera_gguf_tensor_info(f, i, &t) != 0) continue;
        fputs(i ? ",\n    {\"name\": " : "\n    {\"name\": ", o);
        put_string(o, t.name, strlen(t.name), opt);
        fprintf(o, ", \"type\": \"%s\", \"type_id\": %" PRId32 ", \"shape\": [", t.type_name, t.type);
        for (int d = 0; d < t.n_dims; d++) fprintf(o, "%s%" PRId64, d ? ", " : "", t.ne[d]);
        fprintf(o, "], \"offset\": %" PRIu64 ", \"bytes\": %" PRIu64 "}", t.offset, t.size);
    }
    fputs(tessera_gguf_tensor_count(f) ? "\n  ]\n}\n" : "]\n}\n", o);
}

/* ------------------------------------------------------------ validate */

/* Load path as `tessera run` would and decode its first token (BOS, else 0).
 * NULL when it is fine, else the error (static storage). */
static const char *validate_model(const char *path, char *desc, size_t desc_size) {
    static char why[1024];
    tessera_init_params ip = {0};
    if (tessera_init(&ip) != 0) return tessera_last_error();
    tessera_model *m = tessera_model_load(path, NULL);
    if (!m) {
        snprintf(why, sizeof why, "%s", tessera_last_error());
        tessera_shutdown();
        return why;
    }
    snprintf(desc, desc_size, "%s", tessera_model_desc(m));
    const char *err = NULL;
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = 8;
    cp.n_threads = 1;
    tessera_context *ctx = tessera_context_new(m, &cp);
    tessera_token t = tessera_token_bos(m) >= 0 ? tessera_token_bos(m) : 0;
    if (!ctx || tessera_decode(ctx, &t, 1, 0, 0) != 0) {
        snprintf(why, sizeof why, "%s", tessera_last_error());
        err = why;
    }
    tessera_context_free(ctx);
    tessera_model_free(m);
    tessera_shutdown();
    return err;
}

static void json_string(FILE *o, const char *s) {
    fputc('"', o);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(o, "\\%c", c);
        else if (c < 0x20) fprintf(o, "\\u%04x", c);
        else fputc(c, o);
    }
    fputc('"', o);
}

static int run_validate(const char *path, bool json) {
    char desc[512] = "";
    const char *err = validate_model(path, desc, sizeof desc);
    if (json) {
        fputs("{\"file\": ", stdout);
        json_string(stdout, path);
        fprintf(stdout, ", \"valid\": %s, \"%s\": ", err ? "false" : "true", err ? "error" : "model");
        json_string(stdout, err ? err : desc);
        fputs("}\n", stdout);
    } else if (!err) {
        printf("%s: valid: %s; one decode step gives finite logits\n", path, desc);
    }
    if (err) fprintf(stderr, "tessera inspect: %s\n", err);
    return err ? 1 : 0;
}

/* ---------------------------------------------------------------- main */

static const cli_option inspect_own[] = {
    {NULL, "--validate", NULL,
     "load the file as a model with every check the loader makes (hyperparameters, tensors, "
     "vocabulary) and decode one token; exit 1 naming the fault if it would not load or its "
     "logits are not finite",
     CLI_SWITCH, CLI_OWN(inspect_opts, validate), 0, 0, NULL, 0, 0},
    {NULL, "--json", NULL, "print one JSON document instead of text", CLI_SWITCH, CLI_OWN(inspect_opts, json),
     0, 0, NULL, 0, 0},
    {NULL, "--full", NULL,
     "do not shorten long arrays and strings (JSON marks shortened values with \"truncated\": true and "
     "gives \"count\" or \"length\")",
     CLI_SWITCH, CLI_OWN(inspect_opts, full), 0, 0, NULL, 0, 0},
    CLI_END,
};

static const cli_command inspect_cmd = {
    .name = "tessera inspect",
    .synopsis = "FILE [--json] [--full] [--validate]",
    .about = "Print a GGUF file's header (version, alignment, counts, data offset, file size),\n"
             "all metadata and all tensors (name, type, shape, offset, bytes).",
    .own = inspect_own,
    .max_positional = 2, /* a second one is named in the error */
    .epilog = "Tensor offsets are relative to the data section, as stored in the file (for a\n"
              "split model, given its first file: of the shard that holds the tensor).\n"
              "Exit status: 0 on success, 1 if the file cannot be read or is not valid GGUF\n"
              "(with --validate: or would not load as a model), 2 on a usage error.\n",
};

int cmd_inspect(int argc, char **argv) {
    inspect_opts opt = {0};
    cli_params p;
    cli_params_init(&p);
    int rc = cli_parse(&inspect_cmd, argc, argv, &p, &opt);
    if (rc != 0) return rc > 0 ? 0 : 2;
    if (p.n_positional == 0) {
        fprintf(stderr, "tessera inspect: no file given (usage: tessera inspect FILE [--json])\n");
        return 2;
    }
    if (p.n_positional > 1) {
        fprintf(stderr, "tessera inspect: more than one file given ('%s' and '%s')\n", p.positional[0],
                p.positional[1]);
        return 2;
    }
    const char *path = p.positional[0];
    if (opt.validate) return run_validate(path, opt.json);
    tessera_gguf *f = tessera_gguf_open(path);
    if (!f) {
        fprintf(stderr, "tessera inspect: %s\n", tessera_last_error());
        return 1;
    }
    if (opt.json) print_json(stdout, f, &opt);
    else print_text(stdout, f, &opt);
    tessera_gguf_close(f);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "tessera inspect: error writing the output\n");
        return 1;
    }
    return 0;
}
