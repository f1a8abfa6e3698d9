#!/usr/bin/env python3
"""make_wav.py OUT.wav SECONDS [RATE] [CHANNELS] — a deterministic test sound.

Pure Python (the wave module): a chord of three tones whose pitch glides,
bursts of noise from a fixed linear congruential generator, a second of
near-silence every seven, and 40 dB less past 30 s (a second window
quieter than the first), as 16-bit PCM. The same arguments give the same bytes, so the
goldens in this folder (made from these files with llama.cpp's libmtmd)
hold for the files the tests make.
"""
import math
import struct
import sys
import wave


def samples(seconds, rate):
    n = int(seconds * rate)
    state = 12345
    out = []
    for i in range(n):
        t = i / rate
        v = 0.0
        for k, f in enumerate((220.0, 330.0, 440.0 + 40.0 * t)):
            v += 0.18 / (k + 1) * math.sin(2 * math.pi * f * t + k)
        state = (1103515245 * state + 12345) & 0x7FFFFFFF
        noise = state / 0x7FFFFFFF - 0.5
        if int(t * 4) % 3 == 1:  # a burst of noise a quarter second in three
            v += 0.3 * noise
        if 1.0 <= t % 7.0 < 2.0:  # a quiet second
            v *= 0.01
        if t >= 30.0:  # past Whisper's first window, 40 dB quieter
            v *= 0.01
        out.append(max(-1.0, min(1.0, v)))
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    path, seconds = sys.argv[1], float(sys.argv[2])
    rate = int(sys.argv[3]) if len(sys.argv) > 3 else 16000
    channels = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    data = bytearray()
    for v in samples(seconds, rate):
        s = int(round(v * 32767))
        data += struct.pack("<h", s) * channels
    with wave.open(path, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(bytes(data))


if __name__ == "__main__":
    main()
