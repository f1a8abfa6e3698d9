/*
 * ref — the reference backend: plain portable C for every op and dtype.
 *
 * It is the oracle every other backend is tested against (tests/conformance),
 * and the fallback the scheduler uses when no other device supports a node.
 * It is a tsr_plugin like any other (name "ref", one CPU device "ref",
 * host-visible 64-byte aligned malloc'd buffers, reads host memory, lowest
 * priority); the host registers it as a built-in through ref_plugin_entry().
 *
 * Numerics (the contract other backends are compared against):
 *   - every op computes in f32 from sources converted to f32 (to_f32 of the
 *     dtype module for quantized types), results rounded to dst's dtype;
 *   - MUL_MAT, RMS_NORM, NORM, SOFT_MAX sums and FLASH_ATTN dot products
 *     accumulate in double, in index order, then round to f32 — the exact
 *     product of dequantized weights and f32 activations (llama.cpp's CPU
 *     backend quantizes activations to 8 bits instead; see the conformance
 *     tolerances);
 *   - ROPE follows ggml: theta_scale = freq_base^(-2/n_dims), theta advanced
 *     by repeated multiplication, YaRN ramp when ext_factor != 0.
 * Nodes run synchronously, in order, on the calling thread.
 */
#ifndef TESSERA_REF_H
#define TESSERA_REF_H

#include <stddef.h>
#include <stdint.h>

#include <tessera/plugin.h>

/* The built-in plugin table, or NULL if host_abi_version's major differs. */
const tsr_plugin *ref_plugin_entry(uint32_t host_abi_version);

/* 0 if ref can compute this node (op known, dtypes supported, shapes and
 * params consistent — tensor addresses are not looked at), else -1 with one
 * line in why[why_size] naming the op, the tensor and the problem. */
int ref_node_check(const tsr_node *node, char *why, size_t why_size);

/* Compute nodes in order on the calling thread. Tensors are addressed through
 * tsr_tensor.data (plain host memory or a host-visible buffer); a tensor with
 * data == NULL must live in a ref buffer (buffer + offset). abort_flag may be
 * NULL. On failure returns a status and error_get() says which node failed. */
tsr_status ref_compute(const tsr_node *nodes, int32_t n_nodes, const volatile int *abort_flag);

/* "MUL_MAT", "ROPE", ...; "unknown" for numbers outside tsr_op. */
const char *ref_op_name(int32_t op);

#endif
