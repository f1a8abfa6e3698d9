/* Fuzz target: the media decoders' entry points on arbitrary bytes. The data
 * goes to the decoder its first bytes name (an image or a sound) and, to
 * reach every parser, to the other entry too; small limits keep a fuzzed
 * header from asking for gigabytes. */
#include <stddef.h>
#include <stdint.h>

#include "media/media.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    media_limits l = media_limits_default();
    l.max_side = 2048;
    l.max_pixels = 1 << 20;
    l.max_seconds = 30;
    volatile uint64_t sink = 0;
    media_image im;
    if (media_image_decode(data, size, "fuzz", &l, &im) == 0) {
        sink += im.rgb[(size_t)im.nx * (size_t)im.ny * 3 - 1];
        media_image_free(&im);
    }
    media_audio a;
    if (media_audio_decode(data, size, "fuzz", &l, &a) == 0) {
        sink += (uint64_t)(a.pcm[a.n_samples - 1] != 0);
        media_audio_free(&a);
    }
    (void)sink;
    return 0;
}
