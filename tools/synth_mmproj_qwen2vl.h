/* tessera-synth-mmproj's Qwen2-VL / Qwen2.5-VL writer (synth_mmproj_qwen2vl.c). */
#ifndef TESSERA_TOOLS_SYNTH_MMPROJ_QWEN2VL_H
#define TESSERA_TOOLS_SYNTH_MMPROJ_QWEN2VL_H

/* projector: "qwen2vl_merger" or "qwen2.5vl_merger". 0, or -1 with error_get(). */
int synth_mmproj_qwen2vl(const char *out, const char *projector, int dim, int layers, int heads, int ffn, int image,
                         int patch, int proj, int seed);

#endif
