/*
 * pooling — from the hidden states of a sequence's tokens to its vector
 * (mean, first token, last token), the classification head of rerankers, and
 * the normalisations of llama.cpp's --embd-normalize. Plain host arithmetic
 * on f32 rows; the graph gives the rows (an embedding context's output).
 */
#ifndef TESSERA_MODEL_POOLING_H
#define TESSERA_MODEL_POOLING_H

#include <stdint.h>

#include "model/model.h"

/* out[0..dim) = the pooling of rows[0..n_rows) (each dim floats): mean
 * (TESSERA_POOLING_MEAN), else rows[0] (the caller passes only the row it
 * wants for cls, last and rank). Summed in double. */
void pool_rows(int32_t pooling, const float *rows, int32_t n_rows, int32_t dim, float *out);

/* Normalise x[0..n) in place: -1 none, 0 max-abs to int16's range, 1
 * taxicab, 2 Euclidean, p > 2 the p-norm. A zero vector stays zero. */
void pool_normalize(float *x, int32_t n, int32_t embd_norm);

/* The rows of a reranker's score: cls_out's rows, 0 when the model has no
 * classification head. */
int32_t pool_n_cls_out(const model *m);

/* scores[0..pool_n_cls_out) = cls_out . tanh(cls . x + cls_b) + cls_out_b
 * (cls absent: cls_out . x + cls_out_b) for the hidden state x [n_embd].
 * The head's weights must be in host memory (any dtype). 0 or -1. */
int pool_cls_head(const model *m, const float *x, float *scores);

#endif
