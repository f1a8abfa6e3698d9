/* The router's models: every GGUF of --models-dir and every section of
 * --models-preset, by name (router.h).
 *
 * Names in the directory:
 *   DIR/NAME.gguf               NAME (a split file's first part: NAME-00001-of-0000N.gguf, NAME)
 *   DIR/NAME/ (any .gguf)      NAME (the first file in name order, mmproj files skipped)
 *   DIR/ORG/REPO/QUANT.gguf     ORG/REPO:QUANT, as Hugging Face names a quantisation of a repo
 *
 * The preset is llama-server's INI: a [NAME] section per model, [*] for all;
 * its keys are the children's long flags without the dashes (ctx-size = 1024),
 * except the router's own: model (the file), hf-repo (a directory model
 * ORG/REPO:QUANT named by ORG/REPO), hf-file, spec-draft-hf, load-on-startup,
 * and dedup-cache-models (the directory models a section names are not listed,
 * though still served). */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "router.h"

enum { MAX_ARGS = 64 };

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* snprintf's result says it all fit (longer paths are skipped, not cut) */
static bool fits(int n, size_t size) { return n >= 0 && (size_t)n < size; }

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The .gguf files in dir, sorted; mmproj files and later split parts skipped. */
static int list_gguf(const char *dir, char ***out) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    char **names = NULL;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *s = e->d_name;
        if (s[0] == '.' || !ends_with(s, ".gguf") || strstr(s, "mmproj")) continue;
        const char *of = strstr(s, "-of-");
        if (of && of - s >= 6 && strncmp(of - 6, "-00001", 6) != 0) continue;
        char **grown = realloc(names, (size_t)(n + 1) * sizeof *names);
        if (!grown) break;
        names = grown;
        names[n++] = strdup(s);
    }
    closedir(d);
    if (n) qsort(names, (size_t)n, sizeof *names, cmp_str);
    *out = names;
    return n;
}

static void free_list(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* NAME.gguf or NAME-00001-of-0000N.gguf: NAME */
static void stem(const char *file, char *out, size_t size) {
    snprintf(out, size, "%s", file);
    char *dot = strstr(out, ".gguf");
    if (dot) *dot = '\0';
    char *of = strstr(out, "-of-");
    if (of && of - out >= 6 && !strncmp(of - 6, "-00001", 6)) of[-6] = '\0';
}

/* The model named name, made (unlisted) when new; a removed one comes back. */
static router_model *model_get(router *r, const char *name) {
    router_model *m = router_find(r, name);
    if (!m)
        for (int i = 0; i < r->n_models; i++)
            if (!strcmp(r->models[i]->name, name)) m = r->models[i];
    if (m) return m;
    if (r->n_models == r->cap_models) {
        int cap = r->cap_models ? r->cap_models * 2 : 16;
        router_model **grown = realloc(r->models, (size_t)cap * sizeof *grown);
        if (!grown) return NULL;
        r->models = grown;
        r->cap_models = cap;
    }
    m = calloc(1, sizeof *m);
    if (!m) return NULL;
    snprintf(m->name, sizeof m->name, "%s", name);
    m->removed = true;
    r->models[r->n_models++] = m;
    return m;
}

static void add_model(router *r, const char *name, const char *path) {
    router_model *m = model_get(r, name);
    if (!m) return;
    m->removed = false;
    snprintf(m->path, sizeof m->path, "%s", path);
}

static void scan_dir(router *r, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    char **files = NULL;
    int n = list_gguf(dir, &files);
    char name[256], path[PATH_MAX];
    for (int i = 0; i < n; i++) {
        stem(files[i], name, sizeof name);
        if (fits(snprintf(path, sizeof path, "%s/%s", dir, files[i]), sizeof path)) add_model(r, name, path);
    }
    free_list(files, n);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char sub[PATH_MAX];
        if (!fits(snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name), sizeof sub) || !is_dir(sub)) continue;
        if ((n = list_gguf(sub, &files)) > 0) { /* DIR/NAME/x.gguf */
            if (fits(snprintf(path, sizeof path, "%s/%s", sub, files[0]), sizeof path))
                add_model(r, e->d_name, path);
        }
        free_list(files, n);
        DIR *o = opendir(sub); /* DIR/ORG/REPO/QUANT.gguf */
        struct dirent *f;
        while (o && (f = readdir(o))) {
            char repo[PATH_MAX];
            if (!fits(snprintf(repo, sizeof repo, "%s/%s", sub, f->d_name), sizeof repo)) continue;
            if (f->d_name[0] == '.' || !is_dir(repo)) continue;
            n = list_gguf(repo, &files);
            for (int i = 0; i < n; i++) {
                char quant[128];
                stem(files[i], quant, sizeof quant);
                if (fits(snprintf(name, sizeof name, "%s/%s:%s", e->d_name, f->d_name, quant), sizeof name) &&
                    fits(snprintf(path, sizeof path, "%s/%s", repo, files[i]), sizeof path))
                    add_model(r, name, path);
            }
            free_list(files, n);
        }
        if (o) closedir(o);
    }
    closedir(d);
}

/* The listed model ORG/REPO names (ORG/REPO itself, else ORG/REPO:*). */
static router_model *find_repo(router *r, const char *repo) {
    router_model *m = router_find(r, repo);
    if (m) return m;
    size_t n = strlen(repo);
    for (int i = 0; i < r->n_models; i++) {
        router_model *c = r->models[i];
        if (!c->removed && !strncmp(c->name, repo, n) && c->name[n] == ':') return c;
    }
    return NULL;
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = '\0';
    return s;
}

static bool truthy(const char *v) {
    return !strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "on") || !strcasecmp(v, "yes");
}

typedef struct section {
    char name[256];
    char model[PATH_MAX], hf_repo[512], draft_repo[512];
    int dedup, load_on_startup; /* -1: not set */
    char *args[MAX_ARGS];
    int n_args;
} section;

static void section_arg(section *s, const char *key, const char *value) {
    if (s->n_args + 2 > MAX_ARGS) return;
    if (!strcasecmp(value, "false") || !strcasecmp(value, "off")) return;
    size_t n = strlen(key) + 3;
    char *flag = malloc(n);
    if (!flag) return;
    snprintf(flag, n, "--%s", key);
    s->args[s->n_args++] = flag;
    if (*value && !truthy(value)) s->args[s->n_args++] = strdup(value);
}

static void section_key(section *s, const char *key, const char *value, const char *preset_dir) {
    if (!strcmp(key, "model") || !strcmp(key, "m")) {
        if (value[0] != '/' && access(value, F_OK) != 0) /* relative to the preset */
            snprintf(s->model, sizeof s->model, "%s/%s", preset_dir, value);
        else
            snprintf(s->model, sizeof s->model, "%s", value);
    } else if (!strcmp(key, "hf-repo") || !strcmp(key, "hf")) {
        snprintf(s->hf_repo, sizeof s->hf_repo, "%s", value);
    } else if (!strcmp(key, "spec-draft-hf") || !strcmp(key, "hf-repo-draft") || !strcmp(key, "hfd")) {
        snprintf(s->draft_repo, sizeof s->draft_repo, "%s", value);
    } else if (!strcmp(key, "dedup-cache-models")) {
        s->dedup = truthy(value);
    } else if (!strcmp(key, "load-on-startup")) {
        s->load_on_startup = truthy(value);
    } else if (!strcmp(key, "hf-file") || !strcmp(key, "hff")) {
        /* the directory's name of the model says which file */
    } else {
        section_arg(s, key, value);
    }
}

/* A parsed [NAME] section becomes a model (global: the [*] section). */
static void section_apply(router *r, const section *s, const section *global) {
    if (!s->name[0] || !strcmp(s->name, "*")) return;
    router_model *m = model_get(r, s->name);
    if (!m) return;
    m->removed = false;
    m->path[0] = '\0';
    router_model *main = NULL, *draft = NULL;
    if (s->model[0]) {
        snprintf(m->path, sizeof m->path, "%s", s->model);
    } else if (s->hf_repo[0] && (main = find_repo(r, s->hf_repo))) {
        snprintf(m->path, sizeof m->path, "%s", main->path);
    }
    if (s->draft_repo[0]) draft = find_repo(r, s->draft_repo);
    int dedup = s->dedup >= 0 ? s->dedup : global->dedup > 0;
    if (dedup) {
        if (main && main != m) main->hidden = true;
        if (draft && draft != m) draft->hidden = true;
    }
    m->load_on_startup = s->load_on_startup > 0;
    for (int i = 0; i < m->n_args; i++) free(m->args[i]);
    free(m->args);
    m->args = calloc((size_t)(global->n_args + s->n_args) + 1, sizeof *m->args);
    m->n_args = 0;
    for (int i = 0; m->args && i < global->n_args; i++) m->args[m->n_args++] = strdup(global->args[i]);
    for (int i = 0; m->args && i < s->n_args; i++) m->args[m->n_args++] = strdup(s->args[i]);
}

static void section_clear(section *s) {
    for (int i = 0; i < s->n_args; i++) free(s->args[i]);
    memset(s, 0, sizeof *s);
    s->dedup = s->load_on_startup = -1;
}

/* Two passes over the file: [*] first (it applies to every section), then the models. */
static int read_preset(router *r, const char *file) {
    FILE *f = fopen(file, "r");
    if (!f) {
        fprintf(stderr, "tessera serve: --models-preset %s: cannot read it\n", file);
        return -1;
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", file);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    section global, cur;
    memset(&global, 0, sizeof global);
    memset(&cur, 0, sizeof cur);
    section_clear(&global);
    section_clear(&cur);
    char line[4096];
    for (int pass = 0; pass < 2; pass++) {
        rewind(f);
        int lineno = 0;
        bool in_global = false;
        while (fgets(line, sizeof line, f)) {
            lineno++;
            char *s = trim(line);
            if (!*s || *s == ';' || *s == '#') continue;
            if (*s == '[') {
                char *end = strchr(s, ']');
                if (!end) {
                    fprintf(stderr, "tessera serve: %s:%d: a section without ']'\n", file, lineno);
                    continue;
                }
                *end = '\0';
                if (pass == 1) section_apply(r, &cur, &global);
                section_clear(&cur);
                snprintf(cur.name, sizeof cur.name, "%s", trim(s + 1));
                in_global = !strcmp(cur.name, "*");
                continue;
            }
            char *eq = strchr(s, '=');
            if (!eq) {
                fprintf(stderr, "tessera serve: %s:%d: expected 'key = value'\n", file, lineno);
                continue;
            }
            *eq = '\0';
            char *key = trim(s), *value = trim(eq + 1);
            size_t vn = strlen(value);
            if (vn >= 2 && value[0] == '"' && value[vn - 1] == '"') value[vn - 1] = '\0', value++;
            while (*key == '-') key++;
            if (pass == 0 && in_global) section_key(&global, key, value, dir);
            else if (pass == 1 && !in_global && cur.name[0]) section_key(&cur, key, value, dir);
        }
        if (pass == 1) section_apply(r, &cur, &global);
        section_clear(&cur);
    }
    section_clear(&global);
    fclose(f);
    return 0;
}

router_model *router_find(router *r, const char *name) {
    for (int i = 0; i < r->n_models; i++)
        if (!r->models[i]->removed && !strcmp(r->models[i]->name, name)) return r->models[i];
    return NULL;
}

int router_catalog_load(router *r) {
    for (int i = 0; i < r->n_models; i++) {
        r->models[i]->removed = true;
        r->models[i]->hidden = false;
    }
    if (r->models_dir) scan_dir(r, r->models_dir);
    int rc = r->preset ? read_preset(r, r->preset) : 0;
    /* a model gone from the list: its child stops */
    for (int i = 0; i < r->n_models; i++) {
        router_model *m = r->models[i];
        if (m->removed && m->state != ROUTER_UNLOADED) router_stop(r, m);
        if (m->removed && m->queued) router_dequeue(r, m);
    }
    /* listed in name order */
    for (int i = 1; i < r->n_models; i++)
        for (int j = i; j > 0 && strcmp(r->models[j - 1]->name, r->models[j]->name) > 0; j--) {
            router_model *t = r->models[j];
            r->models[j] = r->models[j - 1];
            r->models[j - 1] = t;
        }
    return rc;
}
