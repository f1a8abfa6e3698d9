#!/bin/bash
# The structural and profiled half of a GPU session, run on the device
# machine from the bundle ../shared/gpu/bundle.sh makes (next to its
# check.sh, which measures speed against llama.cpp):
#   bash .gpu/gpu-check.sh [MODEL.gguf ...]     (or bash bench/gpu-check.sh:
#                                               the bundle is then ./.gpu)
# First the cooperative-matrix GEMM (mul_mat_coopmat.comp, off by default
# until this run proves it; ~2 min): the features vulkan0 reports with it
# forced, plugin check MUL_MAT and GRAPH with it at every column count
# (TESSERA_VULKAN_MATMUL=coopmat), the synthetic goldens at -ngl 99 with it
# forced, and pp512 of each model check.sh made (/tmp/gpu-models) on the
# tiled kernel vs on cooperative matrices (TESSERA_VULKAN_COOPMAT=1).
# GPU_CHECK_COOPMAT_ONLY=1 stops after that part.
# Then plugin check FLASH_ATTN and GRAPH with the split and the tiled
# flash attention kernels forced (TESSERA_VULKAN_FLASH_ATTN; ~1 min).
# For each model (default: the 1.1B TinyLlama-shaped Q4_0 that check.sh
# makes in /tmp/gpu-models) it shows that at -ngl 99 the whole graph is one
# split on vulkan0 with no weight copied per step and one submission per
# decoding step (--explain --verbose), then one profiled tg128 and pp512
# (tessera bench --profile): device time, bytes, GB/s and FLOP/s per op
# type, as shares of the card's ceilings when TESSERA_PEAK_GBPS and
# TESSERA_PEAK_GFLOPS are set (an H200 gets its data-sheet figures). One
# run tells which op to make faster next. Output also goes to
# $OUT/gpu-profile.txt. About a minute per model on an H200.
# Then the kernels with a switch, on vs off, on the first model (not
# profiled: plain t/s, 2 runs each; GPU_CHECK_KERNELS=0 skips it, ~2 min):
#   fusion (norm x weight as one dispatch) on / TESSERA_VULKAN_NO_FUSE=1;
#   flash attention -fa on, split over the keys for decoding and tiled for
#   prompts (auto) / one workgroup per (query, head) over all keys
#   (TESSERA_VULKAN_FLASH_ATTN=workgroup), tg128 and pp512 at depths 0 and
#   4096 (decoding over a long cache is where the split should tell).
set -u
D=$(cd "$(dirname "$0")" && pwd)
# run from the checkout (bench/): the bundle is .gpu beside it
[ -f "$D/bin.tar.xz" ] || [ -x "$D/tsr/tessera" ] || D=$(cd "$D/../.gpu" 2>/dev/null && pwd) || { echo "no bundle (.gpu)"; exit 3; }
O=${OUT:-/tmp/gpu-out}; mkdir -p "$O"
exec > >(tee -a "$O/gpu-profile.txt") 2>&1
to() { local s=$1; shift; timeout -k 5 "$s" "$@"; local r=$?; [ $r -ne 0 ] && echo "(rc=$r: $*)"; return 0; }
[ -x "$D/tsr/tessera" ] || { rm -rf "$D/tsr" "$D/lib"; tar xJf "$D/bin.tar.xz" -C "$D"; }
export LD_LIBRARY_PATH=$D/lib TESSERA_PLUGIN_PATH=$D/tsr
for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json; do
  [ -f "$icd" ] && { export VK_DRIVER_FILES=$icd VK_ICD_FILENAMES=$icd; break; }
done
T=$D/tsr/tessera
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
case $gpu in *H200*) : "${TESSERA_PEAK_GBPS:=4800}" "${TESSERA_PEAK_GFLOPS:=989000}" ;; esac
export TESSERA_PEAK_GBPS=${TESSERA_PEAK_GBPS:-} TESSERA_PEAK_GFLOPS=${TESSERA_PEAK_GFLOPS:-}
echo "device: ${gpu:-unknown}; ceilings: ${TESSERA_PEAK_GBPS:-?} GB/s, ${TESSERA_PEAK_GFLOPS:-?} GFLOP/s"
models=("$@")
if [ ${#models[@]} -eq 0 ]; then
  M=/tmp/gpu-models; mkdir -p "$M"
  [ -f "$M/1b-Q4_0.gguf" ] || "$D/tsr/tessera-synth" -q -o "$M/1b-Q4_0.gguf" \
    --vocab-from "$D/data/vocab/ggml-vocab-llama-spm.gguf" --type Q4_0 \
    --dim 2048 --layers 22 --heads 32 --kv-heads 4 --ffn 5632 --vocab 32000
  models=("$M/1b-Q4_0.gguf")
fi
coopmat_check() {
  echo "=== cooperative matrices: vulkan0 with TESSERA_VULKAN_MATMUL=coopmat (want 'coopmat(f32)' or 'coopmat(f16)')"
  TESSERA_VULKAN_MATMUL=coopmat "$T" devices 2>&1 | grep -A4 " vulkan0 " | grep -E "features"
  echo "=== plugin check MUL_MAT and GRAPH with TESSERA_VULKAN_MATMUL=coopmat (every column count; F32 weights stay tiled)"
  for fam in MUL_MAT GRAPH; do
    TESSERA_VULKAN_MATMUL=coopmat to 180 "$T" plugin check "$D/tsr/libtessera-backend-vulkan.so" --op $fam |
      grep -E "cases:|FAIL" | head -20
  done
  if [ -x "$D/tsr/test_golden" ] && [ -d "$D/data/models" ]; then
    echo "=== goldens on vulkan0 -ngl 99 with TESSERA_VULKAN_MATMUL=coopmat (no FAIL line: passed)"
    for g in "synth-s-F16 strict 5e-3" "synth-s-BF16 strict 2e-2" "synth-s-Q4_0 quant" "synth-s-Q8_0 quant" \
             "synth-s-Q4_K_M-mix quant" "synth-s-Q6_K quant"; do
      set -- $g
      [ -f "$D/data/models/$1.gguf" ] || { echo "($1: not in the bundle)"; continue; }
      TESSERA_VULKAN_MATMUL=coopmat TESSERA_SHARED=$D/data TESSERA_BUILD_ROOT=$D/tsr to 90 "$D/tsr/test_golden" "$@" \
        --device vulkan0 -ngl 99 2>&1 | grep -E "FAIL|device" | sed "s/^/$1: /"
    done
  fi
  echo "=== pp512 (-ngl 99, -fa off, 2 runs): tiled kernel, then cooperative matrices (TESSERA_VULKAN_COOPMAT=1)"
  for m in $(printf '%s\n' /tmp/gpu-models/*.gguf "${models[@]}" | sort -u); do
    [ -f "$m" ] || continue
    for cm in 0 1; do
      echo "--- $(basename "$m") TESSERA_VULKAN_COOPMAT=$cm"
      TESSERA_VULKAN_COOPMAT=$cm to 150 "$T" bench -m "$m" -p 512 -n 0 -r 2 -dev vulkan0 -ngl 99 -fa off | grep -E "pp512"
    done
  done
}
coopmat_check
[ "${GPU_CHECK_COOPMAT_ONLY:-0}" = 1 ] && exit 0

# The kernels a default plugin check does not reach on a GPU (its cases
# are too small to split over keys or to tile), forced: their proof there.
for fa in split tiled; do
  echo "=== plugin check FLASH_ATTN and GRAPH with TESSERA_VULKAN_FLASH_ATTN=$fa"
  for fam in FLASH_ATTN GRAPH; do
    TESSERA_VULKAN_FLASH_ATTN=$fa to 120 "$T" plugin check "$D/tsr/libtessera-backend-vulkan.so" --op $fam | grep -E "cases:"
  done
done
for m in "${models[@]}"; do
  echo "=== $(basename "$m"): placement and submissions at -ngl 99"
  to 120 "$T" run -m "$m" -dev vulkan0 -ngl 99 --explain --verbose --temp 0 -n 16 -p "Once upon a time" 2>&1 |
    grep -E "^([0-9]+ nodes|split|  copy|fallback|per decoding step|generation)"
  echo "=== $(basename "$m"): tessera bench --profile (vulkan0, -ngl 99, -fa off)"
  to 240 "$T" bench -m "$m" -p 512 -n 128 -r 2 -dev vulkan0 -ngl 99 -fa off --profile
done

[ "${GPU_CHECK_KERNELS:-1}" = 0 ] && exit 0
m=${models[0]}
echo "=== $(basename "$m"): kernels on vs off (tessera bench, vulkan0, -ngl 99, 2 runs)"
kb() { echo "--- $1"; shift; to 300 env "$@" "$T" bench -m "$m" -dev vulkan0 -ngl 99 -r 2 -o md "${KB_ARGS[@]}"; }
KB_ARGS=(-p 512 -n 128 -fa off)
kb "fusion on (default), -fa off"
kb "fusion off" TESSERA_VULKAN_NO_FUSE=1
KB_ARGS=(-p 512 -n 128 -d 0,4096 -fa on)
kb "-fa on, split (decoding) and tiled (prompts) (default)"
kb "-fa on, one workgroup per (query, head)" TESSERA_VULKAN_FLASH_ATTN=workgroup
