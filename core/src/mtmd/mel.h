/*
 * mel — Whisper's log-mel features of 16 kHz mono audio, as its feature
 * extractor computes them (public facts of OpenAI's whisper and Hugging
 * Face's WhisperFeatureExtractor): frames of 400 samples (25 ms) every 160
 * (10 ms), the signal reflected by 200 samples at either end (centred
 * frames), a periodic Hann window, the power spectrum of a 400-point DFT
 * (201 bins), the Slaney-style mel filterbank of librosa (area normalised,
 * 0 to 8 kHz), log10 of the energies floored at 1e-10, everything below
 * the maximum minus 8 raised to it, then (x + 4) / 4.
 */
#ifndef TESSERA_MTMD_MEL_H
#define TESSERA_MTMD_MEL_H

#include <stdint.h>

enum {
    MEL_RATE = 16000,
    MEL_N_FFT = 400,
    MEL_HOP = 160,
    MEL_N_BINS = MEL_N_FFT / 2 + 1,
};

typedef struct mel_bank {
    int32_t n_mel;
    float *filters; /* [n_mel][MEL_N_BINS] */
    float *window;  /* [MEL_N_FFT] */
    float *cos_t, *sin_t; /* [MEL_N_FFT] */
} mel_bank;

/* n_mel filters (1..256). 0, or -1 with error_get() set. */
int mel_bank_init(mel_bank *b, int32_t n_mel);
void mel_bank_free(mel_bank *b);

/* The number of frames mel_compute writes for n samples: n / MEL_HOP
 * (Whisper drops the centred STFT's last frame). */
int64_t mel_n_frames(int64_t n_samples);

/* Log-mel features of pcm[0..n) into out [n_mel][n_frames] (mel bin
 * major, frames contiguous), n_frames = mel_n_frames(n). The max-8 floor
 * is taken over these frames. 0, or -1 with error_get() set. */
int mel_compute(const mel_bank *b, const float *pcm, int64_t n, float *out);

#endif
