#!/usr/bin/env python3
"""svg_check.py FILE.svg [EXPECT_BOXES]: checks a pipeline picture (schedule/schedule_svg.c, as
drawn by pipe_train --print-schedule --svg or by pipe_trace).

The file must parse as XML with an <svg> root in the SVG namespace; every box (a <rect> of class
F or B) must have finite coordinates and a positive width and height. With EXPECT_BOXES, the
number of boxes must match (2 x stages x micro-batches for a whole step). Exit 0 when all holds,
1 otherwise, with one line saying why.
"""
import math
import sys
import xml.etree.ElementTree as ET

SVG_NS = "{http://www.w3.org/2000/svg}"


def fail(msg):
    print(f"svg_check: {msg}", file=sys.stderr)
    sys.exit(1)


def check_box(path, rect):
    try:
        x, y, w, h = (float(rect.get(k, "nan")) for k in ("x", "y", "width", "height"))
    except ValueError:
        fail(f"{path}: a box has a non-numeric coordinate: {rect.attrib}")
    if not all(math.isfinite(v) for v in (x, y, w, h)) or w <= 0 or h <= 0:
        fail(f"{path}: a box has a bad position or size: {rect.attrib}")


def main(argv):
    if len(argv) not in (2, 3):
        fail("usage: svg_check.py FILE.svg [EXPECT_BOXES]")
    path = argv[1]
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as e:
        fail(f"{path}: does not parse as XML: {e}")
    if root.tag != SVG_NS + "svg":
        fail(f"{path}: the root element is {root.tag}, not an SVG <svg>")
    boxes = [r for r in root.iter(SVG_NS + "rect") if r.get("class") in ("F", "B")]
    for rect in boxes:
        check_box(path, rect)
    n_f = sum(r.get("class") == "F" for r in boxes)
    n_b = len(boxes) - n_f
    if len(argv) == 3 and len(boxes) != int(argv[2]):
        fail(f"{path}: {len(boxes)} boxes (F {n_f}, B {n_b}), expected {argv[2]}")
    if n_f != n_b:
        fail(f"{path}: {n_f} forward boxes but {n_b} backward boxes")
    print(f"ok: {path}: {len(boxes)} boxes (F {n_f}, B {n_b})")


if __name__ == "__main__":
    main(sys.argv)
