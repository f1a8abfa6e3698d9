/*
 * tessera_mtmd.h — images (and later sounds) in prompts: a model's
 * multimodal projector (an mmproj file, as llama.cpp writes them), media
 * decoded from files or buffers, prompts with media markers split into text
 * and media chunks, media encoded into embedding rows and decoded into a
 * context at the right positions.
 *
 *     tessera_mtmd *mm = tessera_mtmd_load(model, "mmproj.gguf", NULL);
 *     tessera_media *img = tessera_media_from_file("cat.jpg");
 *     tessera_mtmd_chunks *ch = tessera_mtmd_tokenize(mm, "<__media__>Describe it.",
 *                                                     &img, 1, true, true);
 *     int32_t n_past;
 *     tessera_mtmd_eval_chunks(mm, ctx, ch, 0, &n_past);   // logits of the last token
 *     ... sample from tessera_logits(ctx, -1), decode from n_past ...
 *
 * Families: "mlp" (LLaVA-1.5 / MobileVLM style CLIP ViT), "gemma3",
 * "idefics3" (SmolVLM: an image in tiles, docs/multimodal.md). The encoder runs
 * as a graph on the model's devices (or the CPU alone: no_offload).
 * Embeddings of a medium are kept by content hash, so a conversation that
 * shows the same image every turn encodes it once.
 */
#ifndef TESSERA_MTMD_H
#define TESSERA_MTMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tessera/tessera.h>

#ifdef __cplusplus
extern "C" {
#endif

/* llama.cpp's default media marker. */
#define TESSERA_MEDIA_MARKER "<__media__>"

typedef struct tessera_mtmd tessera_mtmd;
typedef struct tessera_media tessera_media;
typedef struct tessera_mtmd_chunks tessera_mtmd_chunks;

typedef struct tessera_mtmd_params {
    bool no_offload;    /* run the encoder on the CPU (--no-mmproj-offload) */
    int32_t n_threads;  /* 0: the host's count */
    bool explain;       /* log the encoder graph's placement (--explain) */
    int32_t cache_size; /* media embeddings kept by content hash (default 8) */
} tessera_mtmd_params;

tessera_mtmd_params tessera_mtmd_default_params(void);

/* The projector at path for model (its embedding width must match). params
 * may be NULL. NULL with tessera_last_error() naming the key or tensor. */
tessera_mtmd *tessera_mtmd_load(const tessera_model *model, const char *path, const tessera_mtmd_params *params);
void tessera_mtmd_free(tessera_mtmd *mm);
bool tessera_mtmd_supports_vision(const tessera_mtmd *mm);
bool tessera_mtmd_supports_audio(const tessera_mtmd *mm);
/* "mlp", ... */
const char *tessera_mtmd_projector_type(const tessera_mtmd *mm);
/* The flags tessera_decode_embd takes for this projector's media:
 * TESSERA_DECODE_NON_CAUSAL where the text model reads an image's rows
 * both ways (gemma3), as llama.cpp's mtmd_decode_use_non_causal says. */
uint32_t tessera_mtmd_decode_flags(const tessera_mtmd *mm);

/* ------------------------------------------------------------- media */

typedef enum tessera_media_kind {
    TESSERA_MEDIA_IMAGE = 1,
    TESSERA_MEDIA_AUDIO = 2
} tessera_media_kind;

/* A medium decoded from a file or from the bytes of one (JPEG, PNG, WebP,
 * BMP, GIF; WAV, FLAC, MP3). label names it in errors (may be NULL). NULL
 * with an error naming the file and the part at fault. */
tessera_media *tessera_media_from_file(const char *path);
tessera_media *tessera_media_from_buffer(const void *data, size_t size, const char *label);
void tessera_media_free(tessera_media *media);
tessera_media_kind tessera_media_get_kind(const tessera_media *media);
/* Width and height of an image (0 for a sound). */
int32_t tessera_media_nx(const tessera_media *media);
int32_t tessera_media_ny(const tessera_media *media);
/* A hash of the decoded content (16 hex digits): the cache's key. */
const char *tessera_media_hash(const tessera_media *media);

/* The positions a medium costs in a prompt, before encoding it: its
 * embedding rows (all its tiles') and the text tessera_mtmd_tokenize puts
 * around it (idefics3's tile tokens and newlines between tiles, gemma3's
 * <start_of_image> / <end_of_image>, Qwen's vision start and end): what
 * the marker adds to tessera_mtmd_chunks_n_tokens. -1 when the projector
 * cannot take it (an image for an audio-only one). */
int32_t tessera_mtmd_media_n_tokens(const tessera_mtmd *mm, const tessera_media *media);

/* ------------------------------------------------------------ chunks */

typedef enum tessera_chunk_type {
    TESSERA_CHUNK_TEXT = 0,
    TESSERA_CHUNK_IMAGE = 1,
    TESSERA_CHUNK_AUDIO = 2
} tessera_chunk_type;

/* Split prompt at each marker (TESSERA_MEDIA_MARKER) into text chunks
 * (tokenized; add_special adds BOS to the first) and media chunks, the
 * media taken in order (not copied: they must outlive the chunks). The
 * markers and the media must match in number. NULL with an error. */
tessera_mtmd_chunks *tessera_mtmd_tokenize(tessera_mtmd *mm, const char *prompt, tessera_media *const *media,
                                           int32_t n_media, bool add_special, bool parse_special);
void tessera_mtmd_chunks_free(tessera_mtmd_chunks *chunks);
int32_t tessera_mtmd_chunks_count(const tessera_mtmd_chunks *chunks);
tessera_chunk_type tessera_mtmd_chunk_type(const tessera_mtmd_chunks *chunks, int32_t i);
/* Positions chunk i takes in the context (its tokens or embedding rows). */
int32_t tessera_mtmd_chunk_n_tokens(const tessera_mtmd_chunks *chunks, int32_t i);
/* The medium media chunk i shows, as its index in tokenize's media (-1 for
 * text): some projectors cut an image into tiles (idefics3: a grid and a
 * global view), each its own media chunk with text chunks between, as
 * llama.cpp's libmtmd does; the others give one chunk per medium. */
int32_t tessera_mtmd_chunk_medium(const tessera_mtmd_chunks *chunks, int32_t i);
/* The tokens of text chunk i (NULL for a media chunk). */
const tessera_token *tessera_mtmd_chunk_tokens(const tessera_mtmd_chunks *chunks, int32_t i, int32_t *n_tokens);
/* Positions all chunks take. */
int32_t tessera_mtmd_chunks_n_tokens(const tessera_mtmd_chunks *chunks);

/* Encode media chunk i: its rows (tessera_mtmd_chunk_n_tokens of them, each
 * tessera_model_n_embd wide), valid until the next encode or the
 * projector's end; from the cache when the same content was encoded
 * before (a medium in tiles is encoded whole at its first tile, so
 * tessera_mtmd_last_encode_ms is 0 for the others). NULL with an error. */
const float *tessera_mtmd_encode_chunk(tessera_mtmd *mm, const tessera_mtmd_chunks *chunks, int32_t i);
/* Milliseconds the last encode spent in the encoder graph (0: cached). */
double tessera_mtmd_last_encode_ms(const tessera_mtmd *mm);
/* The grid a medium's rows form (across, down; row order) for
 * tessera_decode_embd_grid: a dynamic-resolution projector's cells
 * (qwen2vl_merger, qwen2.5vl_merger), else n_tokens x 1. 0, or -1 with an
 * error. */
int tessera_mtmd_media_grid(const tessera_mtmd *mm, const tessera_media *media, int32_t *nx, int32_t *ny);
int tessera_mtmd_chunk_grid(const tessera_mtmd *mm, const tessera_mtmd_chunks *chunks, int32_t i, int32_t *nx,
                            int32_t *ny);

/* Decode embedding rows into sequence 0 of ctx at pos, pos + 1, ... as
 * tessera_decode does tokens (flags: TESSERA_DECODE_ALL_LOGITS,
 * TESSERA_DECODE_NON_CAUSAL). */
int tessera_decode_embd(tessera_context *ctx, const float *embd, int32_t n_rows, int32_t pos, uint32_t flags);
/* The same into sequence seq (0..TESSERA_MAX_SEQ-1) of a context made for
 * several (a server's slots), beside the tokens tessera_decode_batch gives
 * the others. */
int tessera_decode_embd_seq(tessera_context *ctx, const float *embd, int32_t n_rows, int32_t pos, int32_t seq,
                            uint32_t flags);
/* The same for a medium whose nx x ny rows (row order) are a grid: on a
 * model with M-RoPE (qwen2vl) row r turns by (t0, t0 + r / nx, t0 + r % nx),
 * t0 the rope position of pos, and text after it goes on at t0 +
 * max(nx, ny) as libmtmd places it (the cache still counts nx * ny
 * positions: the next text token is at pos + nx * ny); elsewhere it is
 * tessera_decode_embd_seq. tessera_mtmd_chunk_grid gives a chunk's grid. */
int tessera_decode_embd_grid(tessera_context *ctx, const float *embd, int32_t nx, int32_t ny, int32_t pos,
                             int32_t seq, uint32_t flags);

/* Decode every chunk in order into sequence 0 from pos (text in batches,
 * media encoded then decoded), logits kept for the last token; *new_pos
 * gets the position after the last. 0, or -1 with an error. */
int tessera_mtmd_eval_chunks(tessera_mtmd *mm, tessera_context *ctx, const tessera_mtmd_chunks *chunks,
                             int32_t pos, int32_t *new_pos);
/* The same but for the chunks' first `skip` positions, which the cache
 * already holds at pos .. pos + skip - 1 (a prefix kept from the last
 * prompt: a chat's next turn with the same image decodes only its new
 * text); skip must be below the chunks' positions and not inside a media
 * chunk (a medium's rows are decoded whole). */
int tessera_mtmd_eval_chunks_from(tessera_mtmd *mm, tessera_context *ctx, const tessera_mtmd_chunks *chunks,
                                  int32_t pos, int32_t skip, int32_t *new_pos);

#ifdef __cplusplus
}
#endif

#endif
