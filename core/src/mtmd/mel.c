/* mel: Whisper's log-mel features (mel.h). */
#include "mtmd/mel.h"

#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* Slaney's mel scale as librosa has it (htk=False): linear below 1 kHz,
 * logarithmic above. */
static double hz_to_mel(double f) {
    const double f_sp = 200.0 / 3, min_log_hz = 1000, min_log_mel = min_log_hz / f_sp, logstep = log(6.4) / 27;
    return f >= min_log_hz ? min_log_mel + log(f / min_log_hz) / logstep : f / f_sp;
}

static double mel_to_hz(double m) {
    const double f_sp = 200.0 / 3, min_log_hz = 1000, min_log_mel = min_log_hz / f_sp, logstep = log(6.4) / 27;
    return m >= min_log_mel ? min_log_hz * exp(logstep * (m - min_log_mel)) : f_sp * m;
}

int mel_bank_init(mel_bank *b, int32_t n_mel) {
    memset(b, 0, sizeof *b);
    if (n_mel < 1 || n_mel > 256) return error_set("mel: %d mel bins is out of range [1, 256]", n_mel);
    b->n_mel = n_mel;
    b->filters = calloc((size_t)n_mel * MEL_N_BINS, sizeof(float));
    b->window = malloc(MEL_N_FFT * sizeof(float));
    b->cos_t = malloc(MEL_N_FFT * sizeof(float));
    b->sin_t = malloc(MEL_N_FFT * sizeof(float));
    double *pts = malloc((size_t)(n_mel + 2) * sizeof(double));
    if (!b->filters || !b->window || !b->cos_t || !b->sin_t || !pts) {
        free(pts);
        mel_bank_free(b);
        return error_set("mel: out of memory");
    }
    /* periodic Hann (torch.hann_window's default) */
    for (int i = 0; i < MEL_N_FFT; i++) {
        b->window[i] = (float)(0.5 - 0.5 * cos(2 * M_PI * i / MEL_N_FFT));
        b->cos_t[i] = (float)cos(2 * M_PI * i / MEL_N_FFT);
        b->sin_t[i] = (float)sin(2 * M_PI * i / MEL_N_FFT);
    }
    const double lo = hz_to_mel(0), hi = hz_to_mel(MEL_RATE / 2.0);
    for (int i = 0; i < n_mel + 2; i++) pts[i] = mel_to_hz(lo + (hi - lo) * i / (n_mel + 1));
    for (int m = 0; m < n_mel; m++) {
        const double enorm = 2.0 / (pts[m + 2] - pts[m]); /* librosa's norm="slaney" */
        for (int k = 0; k < MEL_N_BINS; k++) {
            const double f = (double)k * MEL_RATE / MEL_N_FFT;
            const double lower = (f - pts[m]) / (pts[m + 1] - pts[m]);
            const double upper = (pts[m + 2] - f) / (pts[m + 2] - pts[m + 1]);
            double w = lower < upper ? lower : upper;
            b->filters[(size_t)m * MEL_N_BINS + k] = (float)(w > 0 ? w * enorm : 0);
        }
    }
    free(pts);
    return 0;
}

void mel_bank_free(mel_bank *b) {
    free(b->filters);
    free(b->window);
    free(b->cos_t);
    free(b->sin_t);
    memset(b, 0, sizeof *b);
}

int64_t mel_n_frames(int64_t n_samples) { return n_samples / MEL_HOP; }

/* Mixed-radix decimation in time: x (n values, stride s) -> y (n values).
 * n divides MEL_N_FFT (2^4 * 5^2), so every twiddle is in the table. */
static void fft(const double complex *x, int n, int s, double complex *y, const double complex *tw) {
    if (n == 1) {
        y[0] = x[0];
        return;
    }
    int p = 2;
    while (n % p) p++;
    const int m = n / p;
    for (int r = 0; r < p; r++) fft(x + r * s, m, s * p, y + r * m, tw);
    double complex t[5];
    const int step = MEL_N_FFT / n;
    for (int k = 0; k < m; k++) {
        for (int r = 0; r < p; r++) t[r] = y[r * m + k];
        for (int q = 0; q < p; q++) {
            double complex acc = 0;
            for (int r = 0; r < p; r++) acc += t[r] * tw[((size_t)r * (k + q * m) * step) % MEL_N_FFT];
            y[q * m + k] = acc;
        }
    }
}

/* reflect (numpy's "reflect": the edge sample not repeated) */
static int64_t reflect(int64_t i, int64_t n) {
    if (n == 1) return 0;
    const int64_t period = 2 * (n - 1);
    i %= period;
    if (i < 0) i += period;
    return i < n ? i : period - i;
}

int mel_compute(const mel_bank *b, const float *pcm, int64_t n, float *out) {
    const int64_t T = mel_n_frames(n);
    if (T <= 0) return error_set("mel: %lld samples is shorter than one frame", (long long)n);
    double complex tw[MEL_N_FFT], in[MEL_N_FFT], spec[MEL_N_FFT];
    for (int i = 0; i < MEL_N_FFT; i++) tw[i] = b->cos_t[i] - I * (double)b->sin_t[i];
    double power[MEL_N_BINS];
    double top = -INFINITY;
    for (int64_t t = 0; t < T; t++) {
        const int64_t start = t * MEL_HOP - MEL_N_FFT / 2;
        for (int i = 0; i < MEL_N_FFT; i++) {
            int64_t j = start + i;
            if (j < 0 || j >= n) j = reflect(j, n);
            in[i] = (double)pcm[j] * b->window[i];
        }
        fft(in, MEL_N_FFT, 1, spec, tw);
        for (int k = 0; k < MEL_N_BINS; k++)
            power[k] = creal(spec[k]) * creal(spec[k]) + cimag(spec[k]) * cimag(spec[k]);
        for (int m = 0; m < b->n_mel; m++) {
            const float *f = b->filters + (size_t)m * MEL_N_BINS;
            double e = 0;
            for (int k = 0; k < MEL_N_BINS; k++) e += f[k] * power[k];
            const double l = log10(e > 1e-10 ? e : 1e-10);
            if (l > top) top = l;
            out[(size_t)m * T + t] = (float)l;
        }
    }
    const double floor_ = top - 8.0;
    for (int64_t i = 0; i < (int64_t)b->n_mel * T; i++) {
        const double l = out[i] < floor_ ? floor_ : out[i];
        out[i] = (float)((l + 4.0) / 4.0);
    }
    return 0;
}
