"""png_check.py PICTURE.png: a screenshot is not blank: at least 2% of its pixels are not
near-white, and it has colour (the curves). A small PNG reader (8-bit RGB/RGBA, not
interlaced, as Chromium writes) so the check needs only the standard library."""
import struct
import sys
import zlib


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail("%s is not a PNG" % path)
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    if depth != 8 or ctype not in (2, 6) or interlace:
        fail("unexpected PNG format (depth %d, colour type %d)" % (depth, ctype))
    bpp = 3 if ctype == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
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
        rows.append(line)
        prev = line
    return w, h, bpp, rows


def main():
    w, h, bpp, rows = read_png(sys.argv[1])
    ink = colour = 0
    for line in rows:
        for x in range(0, w * bpp, bpp * 2):  # every other pixel is plenty
            r, g, b = line[x], line[x + 1], line[x + 2]
            if min(r, g, b) < 200:
                ink += 1
            if max(r, g, b) - min(r, g, b) > 60:
                colour += 1
    total = h * ((w + 1) // 2)
    if ink < 0.02 * total or colour < 200:
        fail("the picture looks blank: %d of %d pixels inked, %d coloured" % (ink, total, colour))
    print("png_check: %dx%d, %.1f%% inked, %d coloured pixels" % (w, h, 100.0 * ink / total, colour))


main()
