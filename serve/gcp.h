/*
 * gcp — Vertex AI's prediction protocol (AIP_MODE=PREDICTION), as
 * llama-server's GCP mode: {"instances": [...]} -> {"predictions": [...]},
 * each instance an OpenAI chat or completion request (gcp.c).
 */
#ifndef TESSERA_SERVE_GCP_H
#define TESSERA_SERVE_GCP_H

#include "format.h"

/* The body's instances into calls/reqs[0..*n) (at most max), each parsed as
 * its endpoint's request and not submitted; 0, or -1 with *err filled and
 * nothing left to free. */
int serve_gcp_parse(const serve_api *api, const char *body, size_t len, serve_call *calls, serve_request **reqs,
                    int max, int *n, serve_error *err);
/* {"predictions": [each request's whole response]} (of readers' views);
 * NULL when out of memory. */
char *serve_gcp_response(const serve_api *api, const serve_call *calls, serve_request *const *reqs, int n);

#endif
