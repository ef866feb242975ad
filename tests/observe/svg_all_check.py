#!/usr/bin/env python3
"""svg_all_check.py BUILD_DIR IMG_DIR: every registered schedule's picture that test_svg wrote
(BUILD_DIR/pipetrain_svg_all_*.svg) and the ones in docs/img (IMG_DIR/schedule_*.svg) parse as
XML, and there are at least 16 of them. Exit 0 when all holds, 1 otherwise."""
import glob
import sys
import xml.etree.ElementTree as ET

files = glob.glob(sys.argv[1] + "/pipetrain_svg_all_*.svg") + glob.glob(sys.argv[2] + "/schedule_*.svg")
for f in files:
    ET.parse(f)
if len(files) < 16:
    sys.exit(f"svg_all_check: {len(files)} pictures, expected at least 16: {files}")
print(len(files), "pictures parse")
