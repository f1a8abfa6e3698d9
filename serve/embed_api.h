/*
 * embed_api — the embedding and reranking endpoints of `tessera serve`, as
 * llama-server spells them:
 *
 *   POST /v1/embeddings, /embeddings   input: a string, an array of strings,
 *        an array of token ids or an array of such arrays; encoding_format
 *        float or base64. /v1/embeddings answers in OpenAI's list shape with
 *        usage; /embeddings in llama-server's own ([{index, embedding: [[..]]}],
 *        one row per token with pooling none).
 *   POST /v1/rerank, /rerank, /reranking   query + documents (or texts),
 *        top_n, return_documents: results sorted by relevance_score, each with
 *        its index (llama-server's and Jina's shape).
 *
 * Enabled with --embeddings (or --reranking, which is rank pooling). The
 * endpoints own an embedding context of their own, decoded by the engine's
 * thread between its steps; a bad request is one 4xx and changes nothing
 * for the next.
 */
#ifndef TESSERA_SERVE_EMBED_API_H
#define TESSERA_SERVE_EMBED_API_H

#include <stdbool.h>
#include <stddef.h>

#include <tessera/tessera.h>

typedef struct serve_metrics serve_metrics; /* engine.h */
typedef struct serve_engine serve_engine;   /* engine.h */

typedef struct serve_embed serve_embed;

/* Take ctx (an embedding context of model; freed by serve_embed_free).
 * model_id names the model in responses. NULL when out of memory. */
serve_embed *serve_embed_new(tessera_model *model, tessera_context *ctx, const char *model_id);
void serve_embed_free(serve_embed *se);
/* Decode on e's thread from now on (serve_engine_run), as generation does:
 * one thread computes with the model. Before (or with none): on the
 * caller's thread, one request at a time. */
void serve_embed_set_engine(serve_embed *se, serve_engine *e);

/* Add what embedding and rerank requests decoded (prompt tokens, decode
 * calls and their time) to m, the engine's counters for /metrics. */
void serve_embed_metrics_add(serve_embed *se, serve_metrics *m);

/* The response to an embedding (rerank false; oai: OpenAI's shape, else
 * llama-server's) or rerank request body: a malloc'd JSON body and *status,
 * an error's too. Which URL asks which is the route table's (route.c); se
 * NULL (no --embeddings or --reranking) answers 501 saying how to start it. */
char *serve_embed_answer(serve_embed *se, bool rerank, bool oai, const char *body, size_t len, int *status);

#endif
