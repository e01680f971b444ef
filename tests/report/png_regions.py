#!/usr/bin/env python3
"""Checks that regions of a PNG screenshot hold a drawn plot, stdlib only.

    png_regions.py SHOT.png X,Y,W,H ...            each region must be non-blank
    png_regions.py --blank SHOT.png X,Y,W,H ...    each region must be blank
    png_regions.py --text SHOT.png X,Y,W,H ...     each region must hold text

A region is non-blank when its luminance varies (standard deviation > 10)
and it holds at least 300 coloured pixels (max - min channel > 80): the data,
since frames, grid lines and text are grey. A region holds text when at
least 1% of its pixels are dark (luminance < 100) and its luminance varies.
Exit 0 when every region passes.
"""
import struct
import sys
import zlib


def decode_png(path):
    """(width, height, rows of (r, g, b) tuples) for 8-bit RGB/RGBA, non-interlaced PNGs."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    width, height, depth, color, _, _, interlace = header
    if depth != 8 or color not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG (depth {depth}, colour type {color}, interlace {interlace})")
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(width)])
        prev = line
    return width, height, rows


def region_stats(rows, x, y, w, h):
    lum, coloured = [], 0
    for row in rows[y:y + h]:
        for r, g, b in row[x:x + w]:
            lum.append(0.299 * r + 0.587 * g + 0.114 * b)
            coloured += max(r, g, b) - min(r, g, b) > 80
    mean = sum(lum) / len(lum)
    std = (sum((v - mean) ** 2 for v in lum) / len(lum)) ** 0.5
    dark = sum(v < 100 for v in lum) / len(lum)
    return std, coloured, dark


def main(argv):
    mode = argv[0] if argv[:1] in (["--blank"], ["--text"]) else "--drawn"
    if mode != "--drawn":
        argv = argv[1:]
    width, height, rows = decode_png(argv[0])
    ok = True
    for spec in argv[1:]:
        x, y, w, h = map(int, spec.split(","))
        if x + w > width or y + h > height:
            print(f"region {spec} lies outside the {width}x{height} screenshot")
            ok = False
            continue
        std, coloured, dark = region_stats(rows, x, y, w, h)
        drawn = std > 10 and coloured >= 300
        text = std > 10 and dark >= 0.01
        print(f"region {spec}: luminance std {std:.1f}, {coloured} coloured pixels, {100 * dark:.1f}% dark: "
              f"{'drawn' if drawn else 'text' if text else 'blank'}")
        passes = {"--drawn": drawn, "--blank": not drawn and not text, "--text": text}[mode]
        ok = ok and passes
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
