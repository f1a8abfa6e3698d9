/* tessera_mtmd.h: a projector for a model, media, chunks, encoding with a
 * cache by content hash, decoding the chunks into a context. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera_mtmd.h>

#include "host/host.h"
#include "media/media.h"
#include "model/public.h"
#include "mtmd/clip.h"
#include "mtmd/clip_audio.h"
#include "util/error.h"
#include "vocab/vocab.h"

enum { MEDIA_MAX_BYTES = 256 << 20 };

struct tessera_media {
    tessera_media_kind kind;
    media_image img;
    media_audio audio;
    char hash[17];
};

typedef struct cache_entry {
    char hash[28]; /* the medium's, ".N" for a sound's window N */
    float *rows;
    uint64_t used; /* last use, for eviction */
} cache_entry;

struct tessera_mtmd {
    const tessera_model *model;
    clip_model *clip;  /* a vision projector, or */
    clip_audio *audio; /* an audio one */
    tessera_mtmd_params params;
    host_device *devices[TESSERA_MAX_DEVICES];
    int n_devices;
    int32_t n_embd;
    cache_entry *cache;
    uint64_t tick;
    double last_ms;
    float *uncached; /* the last rows when cache_size is 0 */
};

typedef struct chunk {
    tessera_chunk_type type;
    tessera_token *tokens;
    int32_t n;
    const tessera_media *media;
    int32_t medium, tile; /* media chunks: which medium (tokenize's order) and which of
                          * its tiles (a sound's: its 30 s windows) */
} chunk;

struct tessera_mtmd_chunks {
    chunk *c;
    int32_t n;
};

tessera_mtmd_params tessera_mtmd_default_params(void) {
    tessera_mtmd_params p = {false, 0, false, 8};
    return p;
}

/* The token named exactly text, as libmtmd looks up the tokens it puts
 * around some families' tiles: its text in the vocabulary, a byte's byte
 * token (SPM's <0x0A> for "\n": llama.cpp's chunk holds it alone, without
 * the space prefix tokenizing would add), else the one token it tokenizes
 * to (BPE's "\n\n"); -1 when there is none. */
static tessera_token lookup_token(const tessera_mtmd *mm, const char *text) {
    const size_t len = strlen(text);
    int32_t id = vocab_text_to_token(mm->model->vocab, text, len);
    if (id >= 0) return id;
    if (len == 1) {
        char byte[8];
        snprintf(byte, sizeof byte, "<0x%02X>", (unsigned char)text[0]);
        if ((id = vocab_text_to_token(mm->model->vocab, byte, strlen(byte))) >= 0) return id;
    }
    tessera_token t[2];
    return tessera_tokenize(mm->model, text, len, t, 2, false, true) == 1 ? t[0] : -1;
}

/* The tokens looked up around an image (a square one at the encoder's size
 * stands for all: the names do not depend on the size) are the model's. */
static int check_lookups(const tessera_mtmd *mm, const char *path) {
    const int32_t S = clip_image_size(mm->clip);
    for (int32_t t = 0; t < clip_n_tiles(mm->clip, S, S); t++) {
        clip_text around[2];
        clip_tile_text(mm->clip, S, S, t, &around[0], &around[1]);
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < around[k].n; i++)
                if (around[k].lookup[i] && lookup_token(mm, around[k].piece[i]) < 0)
                    return error_set("%s: projector %s puts the token \"%s\" around images, and the model's "
                                     "vocabulary has no such token: not this model's mmproj",
                                     path, clip_projector_type(mm->clip),
                                     !strcmp(around[k].piece[i], "\n\n") ? "\\n\\n" : around[k].piece[i]);
    }
    return 0;
}

tessera_mtmd *tessera_mtmd_load(const tessera_model *model, const char *path, const tessera_mtmd_params *params) {
    if (!model || !path) {
        error_set("mmproj: no model or path given");
        return NULL;
    }
    tessera_mtmd *mm = calloc(1, sizeof *mm);
    if (!mm) {
        error_set("%s: out of memory", path);
        return NULL;
    }
    mm->model = model;
    mm->params = params ? *params : tessera_mtmd_default_params();
    if (mm->params.cache_size < 0 || mm->params.cache_size > 1024) mm->params.cache_size = 8;
    mm->n_embd = tessera_model_n_embd(model);
    if (clip_audio_probe(path)) {
        mm->audio = clip_audio_load(path, mm->n_embd);
        if (!mm->audio) goto fail;
    } else {
        mm->clip = clip_model_load(path, mm->n_embd);
        if (!mm->clip) goto fail;
    }
    /* the model's devices, or its CPU devices alone */
    for (int32_t i = 0; i < model->n_devices; i++) {
        host_device *d = model->devices[i];
        if (mm->params.no_offload && d->info.kind != TSR_DEVICE_CPU) continue;
        mm->devices[mm->n_devices++] = d;
    }
    if (mm->n_devices == 0) mm->devices[mm->n_devices++] = host_device_ref();
    if (mm->clip && check_lookups(mm, path) != 0) goto fail;
    if (mm->params.cache_size > 0) {
        mm->cache = calloc((size_t)mm->params.cache_size, sizeof *mm->cache);
        if (!mm->cache) {
            error_set("%s: out of memory", path);
            goto fail;
        }
    }
    return mm;
fail:
    tessera_mtmd_free(mm);
    return NULL;
}

void tessera_mtmd_free(tessera_mtmd *mm) {
    if (!mm) return;
    for (int32_t i = 0; mm->cache && i < mm->params.cache_size; i++) free(mm->cache[i].rows);
    free(mm->cache);
    free(mm->uncached);
    clip_model_free(mm->clip);
    clip_audio_free(mm->audio);
    free(mm);
}

bool tessera_mtmd_supports_vision(const tessera_mtmd *mm) { return mm && mm->clip; }
bool tessera_mtmd_supports_audio(const tessera_mtmd *mm) { return mm && mm->audio; }
const char *tessera_mtmd_projector_type(const tessera_mtmd *mm) {
    return !mm ? "" : mm->audio ? clip_audio_projector_type(mm->audio) : clip_projector_type(mm->clip);
}
uint32_t tessera_mtmd_decode_flags(const tessera_mtmd *mm) {
    return mm && mm->clip && clip_non_causal(mm->clip) ? TESSERA_DECODE_NON_CAUSAL : 0;
}

/* ------------------------------------------------------------- media */

/* FNV-1a 64 over the kind, the size and the decoded samples. */
static void hash_media(tessera_media *m) {
    uint64_t h = 0xcbf29ce484222325ull;
    const uint8_t *p;
    size_t n;
    int32_t head[3] = {m->kind, m->img.nx, m->img.ny};
    for (size_t i = 0; i < sizeof head; i++) h = (h ^ ((const uint8_t *)head)[i]) * 0x100000001b3ull;
    if (m->kind == TESSERA_MEDIA_IMAGE) {
        p = m->img.rgb;
        n = (size_t)m->img.nx * (size_t)m->img.ny * 3;
    } else {
        p = (const uint8_t *)m->audio.pcm;
        n = (size_t)m->audio.n_samples * sizeof(float);
    }
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    snprintf(m->hash, sizeof m->hash, "%016llx", (unsigned long long)h);
}

tessera_media *tessera_media_from_buffer(const void *data, size_t size, const char *label) {
    if (!label) label = "media";
    tessera_media *m = calloc(1, sizeof *m);
    if (!m) {
        error_set("%s: out of memory", label);
        return NULL;
    }
    const char *fmt = NULL;
    media_kind k = media_sniff(data, size, &fmt);
    int rc;
    if (k == MEDIA_AUDIO) {
        m->kind = TESSERA_MEDIA_AUDIO;
        rc = media_audio_decode(data, size, label, NULL, &m->audio);
    } else {
        m->kind = TESSERA_MEDIA_IMAGE;
        rc = media_image_decode(data, size, label, NULL, &m->img);
    }
    if (rc != 0) {
        free(m);
        return NULL;
    }
    hash_media(m);
    return m;
}

tessera_media *tessera_media_from_file(const char *path) {
    if (!path) {
        error_set("media: no path given");
        return NULL;
    }
    void *d;
    size_t n;
    if (media_read_file(path, MEDIA_MAX_BYTES, &d, &n) != 0) return NULL;
    tessera_media *m = tessera_media_from_buffer(d, n, path);
    free(d);
    return m;
}

void tessera_media_free(tessera_media *m) {
    if (!m) return;
    media_image_free(&m->img);
    media_audio_free(&m->audio);
    free(m);
}

tessera_media_kind tessera_media_get_kind(const tessera_media *m) { return m ? m->kind : 0; }
int32_t tessera_media_nx(const tessera_media *m) { return m ? m->img.nx : 0; }
int32_t tessera_media_ny(const tessera_media *m) { return m ? m->img.ny : 0; }
const char *tessera_media_hash(const tessera_media *m) { return m ? m->hash : ""; }

/* The embedding rows of a medium (all its tiles' or windows'); -1 when the
 * projector cannot take it. */
static int32_t media_rows(const tessera_mtmd *mm, const tessera_media *m) {
    if (!mm || !m) return -1;
    if (m->kind == TESSERA_MEDIA_AUDIO)
        return mm->audio ? clip_audio_n_chunks(mm->audio, m->audio.n_samples) * clip_audio_n_tokens(mm->audio) : -1;
    if (!mm->clip) return -1;
    return clip_n_tokens(mm->clip, m->img.nx, m->img.ny);
}

/* The tokens of the pieces of text around a tile, as add_pieces puts them
 * in a prompt (each tokenized apart); -1 with an error. */
static int32_t pieces_n_tokens(const tessera_mtmd *mm, const clip_text *t) {
    int32_t n = 0;
    for (int i = 0; i < t->n; i++) {
        if (t->lookup[i]) {
            if (lookup_token(mm, t->piece[i]) < 0)
                return error_set("mtmd: the vocabulary has no token \"%s\"", t->piece[i]);
            n++;
            continue;
        }
        int32_t k = tessera_tokenize(mm->model, t->piece[i], strlen(t->piece[i]), NULL, 0, false, true);
        if (k == INT32_MIN) return -1;
        n += k < 0 ? -k : k;
    }
    return n;
}

int32_t tessera_mtmd_media_n_tokens(const tessera_mtmd *mm, const tessera_media *m) {
    const int32_t rows = media_rows(mm, m);
    if (rows < 0 || m->kind == TESSERA_MEDIA_AUDIO) return rows; /* a sound's windows have no text around */
    int32_t n = rows;
    for (int32_t t = 0; t < clip_n_tiles(mm->clip, m->img.nx, m->img.ny); t++) {
        clip_text before, after;
        clip_tile_text(mm->clip, m->img.nx, m->img.ny, t, &before, &after);
        const int32_t nb = pieces_n_tokens(mm, &before), na = nb < 0 ? -1 : pieces_n_tokens(mm, &after);
        if (na < 0) return -1;
        n += nb + na;
    }
    return n;
}

/* ------------------------------------------------------------ chunks */

static int add_text(tessera_mtmd *mm, tessera_mtmd_chunks *ch, const char *text, size_t len, bool bos,
                    bool parse_special) {
    if (len == 0 && !bos) return 0;
    int32_t need = tessera_tokenize(mm->model, text, len, NULL, 0, bos, parse_special);
    if (need == INT32_MIN) return -1;
    if (need < 0) need = -need;
    if (need == 0) return 0;
    tessera_token *t = malloc((size_t)need * sizeof *t);
    if (!t) return error_set("tokenize: out of memory");
    int32_t got = tessera_tokenize(mm->model, text, len, t, need, bos, parse_special);
    if (got < 0) {
        free(t);
        return error_set("tokenize: the text changed size");
    }
    chunk *last = ch->n > 0 ? &ch->c[ch->n - 1] : NULL;
    if (last && last->type == TESSERA_CHUNK_TEXT) { /* one text chunk, as libmtmd makes */
        tessera_token *both = realloc(last->tokens, (size_t)(last->n + got) * sizeof *both);
        if (!both) {
            free(t);
            return error_set("tokenize: out of memory");
        }
        memcpy(both + last->n, t, (size_t)got * sizeof *t);
        last->tokens = both;
        last->n += got;
        free(t);
        return 0;
    }
    ch->c[ch->n++] = (chunk){TESSERA_CHUNK_TEXT, t, got, NULL, -1, 0};
    return 0;
}

/* The pieces of text around a tile into ch: each tokenized apart (special
 * tokens parsed) or looked up. */
static int add_pieces(tessera_mtmd *mm, tessera_mtmd_chunks *ch, const clip_text *t) {
    for (int i = 0; i < t->n; i++) {
        if (!t->lookup[i]) {
            if (add_text(mm, ch, t->piece[i], strlen(t->piece[i]), false, true) != 0) return -1;
            continue;
        }
        tessera_token id = lookup_token(mm, t->piece[i]);
        if (id < 0) return error_set("mtmd tokenize: the vocabulary has no token \"%s\"", t->piece[i]);
        chunk *last = ch->n > 0 ? &ch->c[ch->n - 1] : NULL;
        if (!last || last->type != TESSERA_CHUNK_TEXT) {
            last = &ch->c[ch->n++];
            *last = (chunk){TESSERA_CHUNK_TEXT, NULL, 0, NULL, -1, 0};
        }
        tessera_token *more = realloc(last->tokens, (size_t)(last->n + 1) * sizeof *more);
        if (!more) return error_set("tokenize: out of memory");
        more[last->n++] = id;
        last->tokens = more;
    }
    return 0;
}

tessera_mtmd_chunks *tessera_mtmd_tokenize(tessera_mtmd *mm, const char *prompt, tessera_media *const *media,
                                           int32_t n_media, bool add_special, bool parse_special) {
    if (!mm || !prompt || n_media < 0 || (n_media > 0 && !media)) {
        error_set("mtmd tokenize: bad arguments");
        return NULL;
    }
    const size_t ml = strlen(TESSERA_MEDIA_MARKER);
    int32_t markers = 0;
    for (const char *p = strstr(prompt, TESSERA_MEDIA_MARKER); p; p = strstr(p + ml, TESSERA_MEDIA_MARKER))
        markers++;
    if (markers != n_media) {
        error_set("mtmd tokenize: the prompt has %d media markers (%s) but %d media were given", markers,
                  TESSERA_MEDIA_MARKER, n_media);
        return NULL;
    }
    /* each medium's tiles: a media chunk each, and a text chunk around */
    int64_t n_tiles = 0;
    for (int32_t k = 0; k < n_media; k++) {
        const tessera_media *m = media[k];
        if (!m || media_rows(mm, m) < 0) {
            error_set("mtmd tokenize: medium %d: %s this projector (%s) cannot take", k + 1,
                      !m ? "missing, or one" : m->kind == TESSERA_MEDIA_AUDIO ? "a sound," : "an image,",
                      tessera_mtmd_projector_type(mm));
            return NULL;
        }
        /* a sound: a chunk per 30 s window (libmtmd's) */
        n_tiles += m->kind == TESSERA_MEDIA_AUDIO ? clip_audio_n_chunks(mm->audio, m->audio.n_samples)
                                                  : clip_n_tiles(mm->clip, m->img.nx, m->img.ny);
    }
    tessera_mtmd_chunks *ch = calloc(1, sizeof *ch);
    if (ch) ch->c = calloc((size_t)(2 * n_tiles + 2), sizeof *ch->c);
    if (!ch || !ch->c) {
        free(ch);
        error_set("mtmd tokenize: out of memory");
        return NULL;
    }
    const char *p = prompt;
    bool first = true;
    for (int32_t k = 0;; k++) {
        const char *q = k < markers ? strstr(p, TESSERA_MEDIA_MARKER) : p + strlen(p);
        if (add_text(mm, ch, p, (size_t)(q - p), first && add_special, parse_special) != 0) goto fail;
        first = false;
        if (k == markers) break;
        const tessera_media *m = media[k];
        if (m->kind == TESSERA_MEDIA_AUDIO) {
            const char *before = clip_audio_text_before(mm->audio);
            if (before && add_text(mm, ch, before, strlen(before), false, true) != 0) goto fail;
            for (int32_t j = 0; j < clip_audio_n_chunks(mm->audio, m->audio.n_samples); j++)
                ch->c[ch->n++] = (chunk){TESSERA_CHUNK_AUDIO, NULL, clip_audio_n_tokens(mm->audio), m, k, j};
            p = q + ml;
            continue;
        }
        for (int32_t t = 0; t < clip_n_tiles(mm->clip, m->img.nx, m->img.ny); t++) {
            clip_text before, after;
            clip_tile_text(mm->clip, m->img.nx, m->img.ny, t, &before, &after);
            if (add_pieces(mm, ch, &before) != 0) goto fail;
            ch->c[ch->n++] = (chunk){TESSERA_CHUNK_IMAGE, NULL, clip_tile_n_tokens(mm->clip, m->img.nx, m->img.ny, t),
                                     m, k, t};
            if (add_pieces(mm, ch, &after) != 0) goto fail;
        }
        p = q + ml;
    }
    return ch;
fail:
    tessera_mtmd_chunks_free(ch);
    return NULL;
}

void tessera_mtmd_chunks_free(tessera_mtmd_chunks *ch) {
    if (!ch) return;
    for (int32_t i = 0; i < ch->n; i++) free(ch->c[i].tokens);
    free(ch->c);
    free(ch);
}

int32_t tessera_mtmd_chunks_count(const tessera_mtmd_chunks *ch) { return ch ? ch->n : 0; }

static const chunk *chunk_at(const tessera_mtmd_chunks *ch, int32_t i) {
    if (!ch || i < 0 || i >= ch->n) {
        error_set("mtmd: chunk %d does not exist", i);
        return NULL;
    }
    return &ch->c[i];
}

tessera_chunk_type tessera_mtmd_chunk_type(const tessera_mtmd_chunks *ch, int32_t i) {
    const chunk *c = chunk_at(ch, i);
    return c ? c->type : TESSERA_CHUNK_TEXT;
}

int32_t tessera_mtmd_chunk_n_tokens(const tessera_mtmd_chunks *ch, int32_t i) {
    const chunk *c = chunk_at(ch, i);
    return c ? c->n : 0;
}

int32_t tessera_mtmd_chunk_medium(const tessera_mtmd_chunks *ch, int32_t i) {
    const chunk *c = chunk_at(ch, i);
    return c && c->type != TESSERA_CHUNK_TEXT ? c->medium : -1;
}

const tessera_token *tessera_mtmd_chunk_tokens(const tessera_mtmd_chunks *ch, int32_t i, int32_t *n) {
    const chunk *c = chunk_at(ch, i);
    if (n) *n = c && c->tokens ? c->n : 0;
    return c ? c->tokens : NULL;
}

int32_t tessera_mtmd_chunks_n_tokens(const tessera_mtmd_chunks *ch) {
    int32_t n = 0;
    for (int32_t i = 0; ch && i < ch->n; i++) n += ch->c[i].n;
    return n;
}

/* ------------------------------------------------------------ encode */

/* A medium's rows are encoded and kept whole, all its tiles together; a
 * chunk's are its tile's, from the row after the tiles before it. Without
 * a cache (cache_size 0), every call encodes its tile alone. */
const float *tessera_mtmd_encode_chunk(tessera_mtmd *mm, const tessera_mtmd_chunks *ch, int32_t i) {
    const chunk *c = chunk_at(ch, i);
    if (!mm || !c) return NULL;
    if (c->type == TESSERA_CHUNK_TEXT) {
        error_set("mtmd encode: chunk %d is text", i);
        return NULL;
    }
    /* an image's tiles are kept together under its hash, a sound's
     * windows each under "hash.N" */
    const bool audio = c->type == TESSERA_CHUNK_AUDIO;
    const media_image *img = &c->media->img;
    char key[sizeof mm->cache[0].hash];
    if (audio) snprintf(key, sizeof key, "%s.%d", c->media->hash, (int)c->tile);
    else snprintf(key, sizeof key, "%s", c->media->hash);
    size_t at = 0;
    for (int32_t t = 0; !audio && t < c->tile; t++) at += (size_t)clip_tile_n_tokens(mm->clip, img->nx, img->ny, t);
    at *= (size_t)mm->n_embd;
    mm->tick++;
    mm->last_ms = 0;
    cache_entry *slot = NULL;
    for (int32_t k = 0; mm->cache && k < mm->params.cache_size; k++) {
        cache_entry *e = &mm->cache[k];
        if (e->rows && !strcmp(e->hash, key)) {
            e->used = mm->tick;
            return e->rows + at;
        }
        if (!slot || !e->rows || (slot->rows && e->used < slot->used)) slot = e;
    }
    const int32_t n_rows = slot && !audio ? clip_n_tokens(mm->clip, img->nx, img->ny) : c->n;
    float *rows = malloc((size_t)n_rows * (size_t)mm->n_embd * sizeof(float));
    if (!rows) {
        error_set("mtmd encode: out of memory");
        return NULL;
    }
    clip_run run = {mm->devices, mm->n_devices, mm->params.n_threads, mm->params.explain, 0};
    const int rc = audio ? clip_audio_encode(mm->audio, &run, c->media->audio.pcm, c->media->audio.n_samples,
                                             c->tile, rows)
                   : slot ? clip_encode(mm->clip, &run, img, rows)
                          : clip_encode_tile(mm->clip, &run, img, c->tile, rows);
    if (rc != 0) {
        free(rows);
        return NULL;
    }
    mm->last_ms = run.encode_ms;
    if (!slot) { /* no cache: keep the last */
        free(mm->uncached);
        mm->uncached = rows;
        return rows;
    }
    free(slot->rows);
    slot->rows = rows;
    slot->used = mm->tick;
    memcpy(slot->hash, key, sizeof slot->hash);
    return rows + at;
}

double tessera_mtmd_last_encode_ms(const tessera_mtmd *mm) { return mm ? mm->last_ms : 0; }

int tessera_mtmd_media_grid(const tessera_mtmd *mm, const tessera_media *m, int32_t *nx, int32_t *ny) {
    if (!mm || !m || !nx || !ny) return error_set("mtmd grid: bad arguments");
    if (m->kind == TESSERA_MEDIA_AUDIO || !mm->clip) { /* a sound's rows are a line */
        const int32_t n = media_rows(mm, m);
        if (n < 0) return error_set("mtmd grid: this projector (%s) cannot take the medium",
                                    tessera_mtmd_projector_type(mm));
        *nx = n;
        *ny = 1;
        return 0;
    }
    clip_grid(mm->clip, m->img.nx, m->img.ny, nx, ny);
    return 0;
}

int tessera_mtmd_chunk_grid(const tessera_mtmd *mm, const tessera_mtmd_chunks *ch, int32_t i, int32_t *nx,
                            int32_t *ny) {
    const chunk *c = chunk_at(ch, i);
    if (!c) return -1;
    if (c->type == TESSERA_CHUNK_AUDIO) { /* one 30 s window: a line of rows */
        *nx = c->n;
        *ny = 1;
        return 0;
    }
    if (c->type != TESSERA_CHUNK_IMAGE) return error_set("mtmd grid: chunk %d is not an image", i);
    if (mm && nx && ny && clip_n_tiles(mm->clip, c->media->img.nx, c->media->img.ny) > 1) {
        *nx = c->n, *ny = 1; /* one tile of several: its rows in a line */
        return 0;
    }
    return tessera_mtmd_media_grid(mm, c->media, nx, ny);
}

int tessera_mtmd_eval_chunks_from(tessera_mtmd *mm, tessera_context *ctx, const tessera_mtmd_chunks *ch,
                                  int32_t pos, int32_t skip, int32_t *new_pos) {
    if (!mm || !ctx || !ch) return error_set("mtmd eval: bad arguments");
    if (skip < 0 || (skip > 0 && skip >= tessera_mtmd_chunks_n_tokens(ch)))
        return error_set("mtmd eval: skip %d is not below the chunks' %d positions", skip,
                         tessera_mtmd_chunks_n_tokens(ch));
    const int32_t n_batch = (int32_t)ctx->params.n_batch;
    for (int32_t i = 0, at = 0; i < ch->n; at += ch->c[i].n, i++) {
        const chunk *c = &ch->c[i];
        const int32_t from = skip > at ? skip - at : 0; /* of this chunk, in the cache already */
        if (from >= c->n) {
            pos += c->n;
            continue;
        }
        if (c->type == TESSERA_CHUNK_TEXT) {
            pos += from;
            for (int32_t b = from; b < c->n; b += n_batch) {
                int32_t n = c->n - b < n_batch ? c->n - b : n_batch;
                if (tessera_decode(ctx, c->tokens + b, n, pos, 0) != 0) return -1;
                pos += n;
            }
        } else {
            if (from > 0) return error_set("mtmd eval: skip %d falls inside media chunk %d", skip, i);
            const float *rows = tessera_mtmd_encode_chunk(mm, ch, i);
            if (!rows) return -1;
            /* the rows of one medium, as the grid they are (M-RoPE) */
            int32_t gx, gy;
            if (tessera_mtmd_chunk_grid(mm, ch, i, &gx, &gy) != 0 ||
                tessera_decode_embd_grid(ctx, rows, gx, gy, pos, 0, tessera_mtmd_decode_flags(mm)) != 0)
                return -1;
            pos += c->n;
        }
    }
    if (new_pos) *new_pos = pos;
    return 0;
}

int tessera_mtmd_eval_chunks(tessera_mtmd *mm, tessera_context *ctx, const tessera_mtmd_chunks *ch, int32_t pos,
                             int32_t *new_pos) {
    return tessera_mtmd_eval_chunks_from(mm, ctx, ch, pos, 0, new_pos);
}
