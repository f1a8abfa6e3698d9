/*
 * imatrix — importance matrices in memory, and their two file formats
 * (see imatrix.h). Files are parsed as hostile: every length is checked
 * against what is left of the file before it is used.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "quant/imatrix.h"
#include "tensor/dtype.h"
#include "util/error.h"

imatrix *imatrix_new(void) {
    imatrix *im = calloc(1, sizeof *im);
    if (!im) error_set("imatrix: out of memory");
    return im;
}

void imatrix_free(imatrix *im) {
    if (!im) return;
    for (int64_t i = 0; i < im->n_entries; i++) {
        free(im->entries[i].name);
        free(im->entries[i].sums);
        free(im->entries[i].counts);
    }
    for (int64_t i = 0; i < im->n_datasets; i++) free(im->datasets[i]);
    free(im->entries);
    free(im->datasets);
    free(im);
}

const imatrix_entry *imatrix_find(const imatrix *im, const char *name) {
    for (int64_t i = 0; im && i < im->n_entries; i++)
        if (!strcmp(im->entries[i].name, name)) return &im->entries[i];
    return NULL;
}

imatrix_entry *imatrix_entry_get(imatrix *im, const char *name, int64_t ne0, int64_t n_mat) {
    imatrix_entry *e = (imatrix_entry *)imatrix_find(im, name);
    if (e) {
        if (e->ne0 != ne0 || e->n_mat != n_mat) {
            error_set("imatrix: '%s' has %lld x %lld values here and %lld x %lld elsewhere", name,
                      (long long)e->ne0, (long long)e->n_mat, (long long)ne0, (long long)n_mat);
            return NULL;
        }
        return e;
    }
    if (ne0 < 1 || n_mat < 1 || ne0 > (1 << 24) || n_mat > (1 << 16)) {
        error_set("imatrix: '%s' has an impossible shape %lld x %lld", name, (long long)ne0,
                  (long long)n_mat);
        return NULL;
    }
    if (im->n_entries == im->cap) {
        const int64_t cap = im->cap ? 2 * im->cap : 64;
        imatrix_entry *grown = realloc(im->entries, (size_t)cap * sizeof *grown);
        if (!grown) goto oom;
        im->entries = grown;
        im->cap = cap;
    }
    e = &im->entries[im->n_entries];
    *e = (imatrix_entry){.ne0 = ne0, .n_mat = n_mat};
    e->name = strdup(name);
    e->sums = calloc((size_t)(ne0 * n_mat), sizeof *e->sums);
    e->counts = calloc((size_t)n_mat, sizeof *e->counts);
    if (!e->name || !e->sums || !e->counts) {
        free(e->name);
        free(e->sums);
        free(e->counts);
        goto oom;
    }
    im->n_entries++;
    return e;
oom:
    error_set("imatrix: out of memory for '%s'", name);
    return NULL;
}

int imatrix_add_dataset(imatrix *im, const char *name) {
    char **grown = realloc(im->datasets, (size_t)(im->n_datasets + 1) * sizeof *grown);
    if (!grown) return error_set("imatrix: out of memory");
    im->datasets = grown;
    if (!(im->datasets[im->n_datasets] = strdup(name))) return error_set("imatrix: out of memory");
    im->n_datasets++;
    return 0;
}

void imatrix_filter(imatrix *im, const char *const *include, int n_include, const char *const *exclude,
                    int n_exclude) {
    int64_t kept = 0;
    for (int64_t i = 0; i < im->n_entries; i++) {
        imatrix_entry *e = &im->entries[i];
        bool keep = n_include == 0;
        for (int k = 0; k < n_include && !keep; k++) keep = strstr(e->name, include[k]) != NULL;
        for (int k = 0; k < n_exclude && keep; k++) keep = strstr(e->name, exclude[k]) == NULL;
        if (keep) {
            im->entries[kept++] = *e;
        } else {
            free(e->name);
            free(e->sums);
            free(e->counts);
        }
    }
    im->n_entries = kept;
}

void imatrix_entry_means(const imatrix_entry *e, float *out) {
    for (int64_t j = 0; j < e->n_mat; j++) {
        const float count = (float)e->counts[j];
        for (int64_t i = 0; i < e->ne0; i++)
            out[j * e->ne0 + i] = count > 0.0f ? (float)e->sums[j * e->ne0 + i] / count : 1.0f;
    }
}

/* ------------------------------------------------------------------ GGUF */

static int load_gguf(imatrix *im, const char *path) {
    int rc = -1;
    gguf_file *f = gguf_open(path);
    if (!f) return -1;
    gguf_str s;
    if (gguf_find_key(f, "general.type") < 0 || gguf_get_str(f, "general.type", &s) != 0 || s.len != 7 ||
        memcmp(s.ptr, "imatrix", 7) != 0) {
        error_set("%s: not an importance matrix (general.type is not \"imatrix\")", path);
        goto done;
    }
    int64_t v;
    if (gguf_find_key(f, "imatrix.chunk_count") >= 0 && gguf_get_int(f, "imatrix.chunk_count", &v) == 0)
        im->chunk_count += v;
    if (gguf_find_key(f, "imatrix.chunk_size") >= 0 && gguf_get_int(f, "imatrix.chunk_size", &v) == 0)
        im->chunk_size = v;
    gguf_type et;
    uint64_t n_ds = 0;
    const void *arr;
    if (gguf_find_key(f, "imatrix.datasets") >= 0 &&
        gguf_get_arr(f, "imatrix.datasets", &et, &n_ds, &arr) == 0 && et == GGUF_TYPE_STRING) {
        for (uint64_t i = 0; i < n_ds; i++) {
            char name[4096];
            if (gguf_get_arr_str(f, "imatrix.datasets", i, &s) != 0) continue;
            snprintf(name, sizeof name, "%.*s", (int)(s.len < sizeof name ? s.len : sizeof name - 1), s.ptr);
            if (imatrix_add_dataset(im, name) != 0) goto done;
        }
    }
    error_clear();
    static const char sfx[] = ".in_sum2";
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor_info *t = gguf_tensor(f, i);
        const size_t len = strlen(t->name);
        if (len <= sizeof sfx - 1 || strcmp(t->name + len - (sizeof sfx - 1), sfx) != 0) continue;
        char name[512], cname[520];
        if (len - (sizeof sfx - 1) >= sizeof name) {
            error_set("%s: tensor name '%s' is too long", path, t->name);
            goto done;
        }
        memcpy(name, t->name, len - (sizeof sfx - 1));
        name[len - (sizeof sfx - 1)] = '\0';
        snprintf(cname, sizeof cname, "%s.counts", name);
        const gguf_tensor_info *c = gguf_find_tensor(f, cname);
        if (!c) {
            error_set("%s: '%s' has no matching '%s'", path, t->name, cname);
            goto done;
        }
        if (t->dtype != TSR_DTYPE_F32 || c->dtype != TSR_DTYPE_F32 || t->n_dims > 2 || c->n_dims > 2 ||
            c->ne[0] != 1 || c->ne[1] != t->ne[1]) {
            error_set("%s: '%s' / '%s' are not F32 [ne0, n] / [1, n] tensors", path, t->name, cname);
            goto done;
        }
        imatrix_entry *e = imatrix_entry_get(im, name, t->ne[0], t->ne[1]);
        if (!e) {
            error_set("%s: %s", path, error_get());
            goto done;
        }
        const float *sums = t->data, *counts = c->data;
        for (int64_t k = 0; k < t->ne[0] * t->ne[1]; k++) e->sums[k] += sums[k];
        for (int64_t k = 0; k < t->ne[1]; k++) e->counts[k] += counts[k];
    }
    rc = 0;
done:
    gguf_close(f);
    return rc;
}

static int entry_compare(const void *a, const void *b) {
    return strcmp((*(const imatrix_entry *const *)a)->name, (*(const imatrix_entry *const *)b)->name);
}

/* Entries sorted by name (pointers into im; free the array). */
static const imatrix_entry **sorted_entries(const imatrix *im) {
    const imatrix_entry **v = malloc((size_t)(im->n_entries ? im->n_entries : 1) * sizeof *v);
    if (!v) {
        error_set("imatrix: out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < im->n_entries; i++) v[i] = &im->entries[i];
    qsort(v, (size_t)im->n_entries, sizeof *v, entry_compare);
    return v;
}

static int save_gguf(const imatrix *im, const imatrix_entry **v, const char *path) {
    int rc = -1;
    float **bufs = calloc((size_t)(2 * im->n_entries + 1), sizeof *bufs);
    gguf_str *ds = calloc((size_t)(im->n_datasets + 1), sizeof *ds);
    gguf_writer *w = gguf_writer_new();
    if (!bufs || !ds || !w) {
        error_set("%s: out of memory", path);
        goto done;
    }
    for (int64_t i = 0; i < im->n_datasets; i++) ds[i] = (gguf_str){im->datasets[i], strlen(im->datasets[i])};
    if (gguf_writer_set_str(w, "general.type", "imatrix", 7) != 0 ||
        gguf_writer_set_arr_str(w, "imatrix.datasets", ds, (uint64_t)im->n_datasets) != 0 ||
        gguf_writer_set_u32(w, "imatrix.chunk_count", (uint32_t)im->chunk_count) != 0 ||
        gguf_writer_set_u32(w, "imatrix.chunk_size", (uint32_t)im->chunk_size) != 0)
        goto done;
    for (int64_t i = 0; i < im->n_entries; i++) {
        const imatrix_entry *e = v[i];
        char name[600];
        float *s = bufs[2 * i] = malloc((size_t)(e->ne0 * e->n_mat) * sizeof *s);
        float *c = bufs[2 * i + 1] = malloc((size_t)e->n_mat * sizeof *c);
        if (!s || !c) {
            error_set("%s: out of memory", path);
            goto done;
        }
        for (int64_t k = 0; k < e->ne0 * e->n_mat; k++) s[k] = (float)e->sums[k];
        for (int64_t k = 0; k < e->n_mat; k++) c[k] = (float)e->counts[k];
        const int64_t ne_s[2] = {e->ne0, e->n_mat}, ne_c[2] = {1, e->n_mat};
        const int nd = e->n_mat > 1 ? 2 : 1;
        snprintf(name, sizeof name, "%s.in_sum2", e->name);
        if (gguf_writer_add_tensor(w, name, TSR_DTYPE_F32, nd, ne_s, s) != 0) goto done;
        snprintf(name, sizeof name, "%s.counts", e->name);
        if (gguf_writer_add_tensor(w, name, TSR_DTYPE_F32, nd, ne_c, c) != 0) goto done;
    }
    rc = gguf_writer_write_file(w, path);
done:
    gguf_writer_free(w);
    for (int64_t i = 0; bufs && i < 2 * im->n_entries; i++) free(bufs[i]);
    free(bufs);
    free(ds);
    return rc;
}

/* ---------------------------------------------------------- legacy .dat */

typedef struct reader {
    const unsigned char *p;
    size_t left, size;
    const char *path;
} reader;

static int read_i32(reader *r, int32_t *v, const char *what) {
    if (r->left < 4)
        return error_set("%s: truncated at byte %zu (reading %s)", r->path, r->size - r->left, what);
    memcpy(v, r->p, 4);
    r->p += 4;
    r->left -= 4;
    return 0;
}

static int load_dat(imatrix *im, const char *path, const unsigned char *data, size_t size) {
    reader r = {data, size, size, path};
    int32_t n_entries = 0;
    if (read_i32(&r, &n_entries, "the entry count") != 0) return -1;
    if (n_entries < 1 || (size_t)n_entries > size / 12)
        return error_set("%s: %d entries cannot fit in %zu bytes: not an importance matrix", path, n_entries,
                         size);
    for (int32_t k = 0; k < n_entries; k++) {
        int32_t len = 0, ncall = 0, nval = 0;
        char name[512];
        if (read_i32(&r, &len, "a name length") != 0) return -1;
        if (len < 1 || len >= (int32_t)sizeof name || (size_t)len > r.left)
            return error_set("%s: entry %d: bad name length %d at byte %zu", path, k, len, r.size - r.left - 4);
        memcpy(name, r.p, (size_t)len);
        name[len] = '\0';
        r.p += len;
        r.left -= (size_t)len;
        if (read_i32(&r, &ncall, "ncall") != 0 || read_i32(&r, &nval, "nval") != 0) return -1;
        if (nval < 1 || (size_t)nval > r.left / 4)
            return error_set("%s: entry '%s': %d values do not fit in the file", path, name, nval);
        imatrix_entry *e = imatrix_entry_get(im, name, nval, 1);
        if (!e) return error_set("%s: %s", path, error_get());
        for (int32_t i = 0; i < nval; i++) {
            float f;
            memcpy(&f, r.p + 4 * (size_t)i, 4);
            e->sums[i] += f;
        }
        e->counts[0] += ncall;
        r.p += 4 * (size_t)nval;
        r.left -= 4 * (size_t)nval;
    }
    int32_t last_call = 0, len = 0;
    if (r.left == 0) return 0; /* old files end here */
    if (read_i32(&r, &last_call, "the chunk count") != 0) return -1;
    im->chunk_count += last_call;
    if (r.left == 0) return 0;
    if (read_i32(&r, &len, "the dataset name length") != 0) return -1;
    if (len < 0 || (size_t)len > r.left || len > 4095)
        return error_set("%s: bad dataset name length %d", path, len);
    char ds[4096];
    memcpy(ds, r.p, (size_t)len);
    ds[len] = '\0';
    return imatrix_add_dataset(im, ds);
}

static int save_dat(const imatrix *im, const imatrix_entry **v, const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) return error_set("%s: cannot create: %s", path, strerror(errno));
    const int32_t n = (int32_t)im->n_entries;
    const int32_t ncall = (int32_t)im->chunk_count;
    bool ok = fwrite(&n, 4, 1, f) == 1;
    for (int64_t i = 0; ok && i < im->n_entries; i++) {
        const imatrix_entry *e = v[i];
        const int32_t len = (int32_t)strlen(e->name), nval = (int32_t)(e->ne0 * e->n_mat);
        ok = fwrite(&len, 4, 1, f) == 1 && fwrite(e->name, 1, (size_t)len, f) == (size_t)len &&
             fwrite(&ncall, 4, 1, f) == 1 && fwrite(&nval, 4, 1, f) == 1;
        for (int64_t j = 0; ok && j < e->n_mat; j++)
            for (int64_t k = 0; ok && k < e->ne0; k++) {
                const float c = (float)e->counts[j];
                const float val = c > 0 ? (float)e->sums[j * e->ne0 + k] / c * (float)ncall : 0.0f;
                ok = fwrite(&val, 4, 1, f) == 1;
            }
    }
    const char *ds = im->n_datasets ? im->datasets[0] : "";
    const int32_t dlen = (int32_t)strlen(ds);
    ok = ok && fwrite(&ncall, 4, 1, f) == 1 && fwrite(&dlen, 4, 1, f) == 1 &&
         fwrite(ds, 1, (size_t)dlen, f) == (size_t)dlen;
    if (fclose(f) != 0) ok = false;
    if (!ok) {
        remove(path);
        return error_set("%s: write failed", path);
    }
    return 0;
}

/* ------------------------------------------------------------------ both */

int imatrix_load(imatrix *im, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return error_set("%s: cannot open: %s", path, strerror(errno));
    unsigned char magic[4] = {0};
    const size_t got = fread(magic, 1, 4, f);
    if (got == 4 && !memcmp(magic, "GGUF", 4)) {
        fclose(f);
        return load_gguf(im, path);
    }
    /* legacy: the whole file in memory (a few MB for large models) */
    if (fseek(f, 0, SEEK_END) != 0) goto read_fail;
    const long size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) goto read_fail;
    unsigned char *data = malloc((size_t)size + 1);
    if (!data) {
        fclose(f);
        return error_set("%s: out of memory", path);
    }
    if (fread(data, 1, (size_t)size, f) != (size_t)size) {
        free(data);
        goto read_fail;
    }
    fclose(f);
    const int rc = load_dat(im, path, data, (size_t)size);
    free(data);
    return rc;
read_fail:
    fclose(f);
    return error_set("%s: read failed", path);
}

int imatrix_save(const imatrix *im, const char *path, bool legacy) {
    const imatrix_entry **v = sorted_entries(im);
    if (!v) return -1;
    const int rc = legacy ? save_dat(im, v, path) : save_gguf(im, v, path);
    free(v);
    return rc;
}
