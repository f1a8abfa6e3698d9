/* tessera-synth-mmproj's audio projectors (synth_mmproj_audio.c). */
#ifndef TESSERA_TOOLS_SYNTH_MMPROJ_AUDIO_H
#define TESSERA_TOOLS_SYNTH_MMPROJ_AUDIO_H

typedef struct synth_audio_opts {
    const char *out;
    const char *projector; /* ultravox or voxtral */
    int dim, layers, heads, ffn, proj, seed;
    int n_mel;       /* mel bins (Whisper large-v3, Ultravox: 128) */
    int n_pos;       /* learned positions (Whisper: 1500, 30 s) */
    int stack;       /* frames stacked by the projector (Ultravox: 8, Voxtral: 4) */
    int proj_hidden; /* the projector's first linear's outputs (Ultravox:
                      * halved by SwiGLU; Voxtral: the text width) */
} synth_audio_opts;

/* Write an audio mmproj: a Whisper encoder and the projector o->projector
 * names (ultravox: stacked frames, RMS norm, linear, SwiGLU, RMS norm,
 * linear; voxtral: stacked frames, linear, GELU, linear). */
int synth_mmproj_audio(const synth_audio_opts *o);

#endif
