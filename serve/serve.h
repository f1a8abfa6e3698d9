/*
 * serve — `tessera serve` as a library (libtessera-serve.a): an OpenAI,
 * llama.cpp, Anthropic and Responses compatible HTTP server over one model.
 * This header gathers its parts for a program that runs a server
 * (cli/cmd_serve.c); each part has its own header:
 *
 *   engine.h  one model's slots and continuous batching; no HTTP or JSON
 *   format.h  every API shape: requests in, responses and streams out
 *   route.h   the endpoint table
 *   http.h    the transport (libmicrohttpd); gate.h the socket in front of it
 *   tools.h   tool calling's request side; log.h the request log
 *   embed_api.h  embeddings and reranking; gcp.h Vertex AI
 *   server.h  a whole server from a config: listen, start, drain, stop
 */
#ifndef TESSERA_SERVE_H
#define TESSERA_SERVE_H

#include "embed_api.h"
#include "engine.h"
#include "format.h"
#include "gate.h"
#include "http.h"
#include "log.h"
#include "route.h"
#include "server.h"
#include "tools.h"

#endif
