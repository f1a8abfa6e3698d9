/* tessera_tools.h: the quantizer (quant/) and the op conformance suite
 * (conformance/) behind the public API. */
#include <tessera/tessera_tools.h>

#include <string.h>
#include <unistd.h>

#include "conformance/conformance.h"
#include "quant/quant.h"
#include "util/error.h"

/* ------------------------------------------------------------ quantize */

static void quant_type_of(const quant_ftype *ft, tessera_quant_type *out) {
    out->name = ft->name;
    out->llama_ftype = ft->llama_ftype;
    out->base_type = ft->default_dtype;
    out->summary = ft->summary;
}

int32_t tessera_quant_type_count(void) {
    int n;
    quant_ftype_list(&n);
    return n;
}

int tessera_quant_type_get(int32_t i, tessera_quant_type *out) {
    int n;
    const quant_ftype *ft = quant_ftype_list(&n);
    if (i < 0 || i >= n) return error_set("quantization type index %d out of range (%d types)", (int)i, n);
    quant_type_of(&ft[i], out);
    return 0;
}

/* "Q4_0, Q4_1, ..." into buf. */
static void type_names(char *buf, size_t size) {
    int n;
    const quant_ftype *ft = quant_ftype_list(&n);
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", ft[i].name);
}

int32_t tessera_quant_type_find(const char *name, tessera_quant_type *out) {
    const quant_ftype *ft = quant_ftype_find(name);
    if (!ft) {
        char names[512];
        type_names(names, sizeof names);
        return error_set("unknown quantization type '%s' (known: %s)", name ? name : "(null)", names);
    }
    int n;
    const quant_ftype *list = quant_ftype_list(&n);
    if (out) quant_type_of(ft, out);
    return (int32_t)(ft - list);
}

tessera_quantize_params tessera_quantize_default_params(void) {
    tessera_quantize_params p;
    memset(&p, 0, sizeof p);
    p.type = "Q8_0";
    return p;
}

static int quant_params_of(const tessera_quantize_params *params, quant_params *out) {
    quant_params p;
    memset(&p, 0, sizeof p);
    p.ftype = quant_ftype_find(params->type);
    if (!p.ftype) return tessera_quant_type_find(params->type, NULL); /* the error lists the names */
    p.pure = params->pure;
    p.allow_requantize = params->allow_requantize;
    p.n_threads = params->n_threads;
    if (p.n_threads <= 0) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        p.n_threads = ncpu > 0 ? (int)(ncpu > 256 ? 256 : ncpu) : 1;
    }
    p.abort_flag = params->abort_flag;
    p.progress = params->progress; /* quant_progress is tessera_quant_progress */
    p.progress_user = params->progress_user;
    p.imatrix_file = params->imatrix_file;
    p.include = params->include_weights;
    p.n_include = params->n_include_weights;
    p.exclude = params->exclude_weights;
    p.n_exclude = params->n_exclude_weights;
    p.tensor_types = params->tensor_types;
    p.n_tensor_types = params->n_tensor_types;
    p.output_type = params->output_tensor_type;
    p.token_embd_type = params->token_embedding_type;
    p.leave_output = params->leave_output_tensor;
    *out = p;
    return 0;
}

int tessera_quantize_check_params(const tessera_quantize_params *params) {
    if (!params) return error_set("tessera_quantize_check_params: no params");
    quant_params p;
    memset(&p, 0, sizeof p);
    if (quant_params_of(params, &p) < 0) return -1;
    if (p.output_type && quant_override_type("--output-tensor-type", p.output_type, p.output_type) < 0)
        return -1;
    if (p.token_embd_type && quant_override_type("--token-embedding-type", p.token_embd_type, p.token_embd_type) < 0)
        return -1;
    quant_override *ov = NULL;
    if (quant_overrides_parse(p.tensor_types, p.n_tensor_types, &ov) != 0) return -1;
    quant_overrides_free(ov, p.n_tensor_types);
    return 0;
}

int tessera_quantize(const char *in_path, const char *out_path, const tessera_quantize_params *params) {
    if (!in_path || !out_path || !params) return error_set("tessera_quantize: missing path or params");
    quant_params p;
    if (quant_params_of(params, &p) < 0) return -1;
    return quant_model_file(in_path, out_path, &p);
}

int tessera_quantize_dry_run(const char *in_path, const tessera_quantize_params *params) {
    if (!in_path || !params) return error_set("tessera_quantize_dry_run: missing path or params");
    quant_params p;
    if (quant_params_of(params, &p) < 0) return -1;
    return quant_model_file(in_path, NULL, &p);
}

/* ---------------------------------------------------------- conformance */

_Static_assert((int)TESSERA_CHECK_PASS == (int)CONFORMANCE_PASS && (int)TESSERA_CHECK_FAIL == (int)CONFORMANCE_FAIL &&
                   (int)TESSERA_CHECK_ERROR == (int)CONFORMANCE_ERROR &&
                   (int)TESSERA_CHECK_NO_DEVICE == (int)CONFORMANCE_NO_DEVICE,
               "tessera_plugin_check returns conformance_run's statuses as they are");

int tessera_plugin_check(const tessera_plugin_check_params *params) {
    if (!params || !params->target) {
        error_set("tessera_plugin_check: no plugin given");
        return TESSERA_CHECK_ERROR;
    }
    return conformance_run(params); /* its options are these params */
}

const char *const *tessera_plugin_check_families(void) { return conformance_families(); }
