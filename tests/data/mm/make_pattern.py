# A test pattern PNG (RGB8) in pure Python: gradients, a disc and stripes.
import math, struct, sys, zlib
def png(path, w, h):
    rows = []
    for y in range(h):
        r = bytearray([0])
        for x in range(w):
            u, v = x / (w - 1), y / (h - 1)
            d = math.hypot(u - 0.6, v - 0.4) < 0.25
            R = (int(255 * u) // 16 * 16) if not d else 230
            G = (int(255 * v) // 16 * 16) if not d else 40
            B = (128 + 100 * ((x // 7 + y // 11) % 2) - 60 * d) & 255
            r += bytes((R, G, B))
        rows.append(bytes(r))
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    data += chunk(b"IDAT", zlib.compress(b"".join(rows), 9)) + chunk(b"IEND", b"")
    open(path, "wb").write(data)
png(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
