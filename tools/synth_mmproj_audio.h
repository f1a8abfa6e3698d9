/* tessera-synth-mmproj's audio projectors (synth_mmproj_audio.c). */
#ifndef TESSERA_TOOLS_SYNTH_MMPROJ_AUDIO_H
#define TESSERA_TOOLS_SYNTH_MMPROJ_AUDIO_H

typedef struct synth_audio_opts {
    const char *out;
    int dim, layers, heads, ffn, proj, seed;
    int n_mel;       /* mel bins (Whisper large-v3, Ultravox: 128) */
    int n_pos;       /* learned positions (Whisper: 1500, 30 s) */
    int stack;       /* frames stacked by the projector (Ultravox: 8) */
    int proj_hidden; /* the projector's first linear (halved by SwiGLU) */
} synth_audio_opts;

/* Write an Ultravox mmproj (Whisper encoder, Ultravox projector). */
int synth_mmproj_ultravox(const synth_audio_opts *o);

#endif
