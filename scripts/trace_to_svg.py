#!/usr/bin/env python3
"""trace_to_svg.py TRACE.json OUT.svg [--step N] [--label TEXT]: the measured pipeline picture
of one step.

Reads a Chrome trace written by `pipe_train ... --trace TRACE.json` and draws the forward (F<mb>)
and backward (B<mb>) spans of one step (default: the first step in the file) the way
`pipe_train SPEC --print-schedule --svg FILE` draws the simulated schedule: one row per stage
(replica 0's ranks, named by the "rank R (stage S, replica D)" process_name metadata), a box per
span at its measured start and duration with the micro-batch inside. Time a span spent blocked
on a neighbour (the "wait" spans nested in it) is drawn pale and counts as idle.

The title's measured bubble is the idle fraction of the step's pipeline window across stages:
1 - (forward and backward time, waits excluded) / (stages x window), where the window runs from
the first forward's start to the last backward's end. Reductions and the optimizer after the
window are not drawn, as in the simulated picture. The title starts with --label, or else with
the trace's metadata "schedule" when it has one. Python standard library only.
"""
import argparse
import json
import math
import re
import sys

# Layout and colours: the same numbers as schedule/schedule_svg.c.
LEFT, RIGHT, TOP, ROW_H, ROW_GAP, AXIS_H = 80, 24, 64, 26, 6, 44
COLOUR = {"F": "#6baed6", "B": "#fd8d3c"}
PLOT_W = 900.0  # pixels for the window
TRACK = re.compile(r"rank (\d+) \(stage (\d+), replica (\d+)\)")
SPAN = re.compile(r"^([FB])(\d+)$")


def fail(msg):
    print(f"trace_to_svg: {msg}", file=sys.stderr)
    sys.exit(1)


def load_events(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: cannot read the trace: {e}")
    # Chrome accepts both {"traceEvents": [...]} and a bare array of events
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    meta = doc.get("metadata", {}) if isinstance(doc, dict) else {}
    return events, meta if isinstance(meta, dict) else {}


def stage_of_pid(events):
    """pid -> stage for replica 0's tracks; without metadata, pid = stage (one replica)."""
    stages = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            m = TRACK.fullmatch(str(e.get("args", {}).get("name", "")))
            if m and int(m.group(3)) == 0:
                stages[e.get("pid")] = int(m.group(2))
    if not stages:
        print("trace_to_svg: no 'rank R (stage S, replica D)' track names; taking pid as stage",
              file=sys.stderr)
        stages = {e.get("pid"): int(e.get("pid")) for e in events if isinstance(e.get("pid"), int)}
    return stages


def step_of(e):
    return e.get("args", {}).get("step")


def spans_of_step(events, stages, step):
    """(boxes, waits) of one step on replica 0: dicts with stage, kind, mb, t0, t1 in us."""
    boxes, waits = [], []
    for e in events:
        if e.get("ph") != "X" or e.get("pid") not in stages or step_of(e) != step:
            continue
        t0 = float(e.get("ts", 0.0))
        span = {"stage": stages[e["pid"]], "t0": t0, "t1": t0 + float(e.get("dur", 0.0))}
        m = SPAN.match(str(e.get("name", "")))
        if m:
            boxes.append(dict(span, kind=m.group(1), mb=int(m.group(2))))
        elif e.get("cat") == "wait":
            waits.append(span)
    return boxes, waits


def attach_waits(boxes, waits):
    """Each box gets the waits nested in it (same stage, inside its interval)."""
    for b in boxes:
        b["waits"] = [w for w in waits if w["stage"] == b["stage"] and
                      w["t0"] >= b["t0"] - 1e-3 and w["t1"] <= b["t1"] + 1e-3]


def busy(b):
    return (b["t1"] - b["t0"]) - sum(w["t1"] - w["t0"] for w in b["waits"])


def escape(text):
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def tick_step(span):
    """1, 2 or 5 times a power of ten: at most about 20 ticks over span."""
    p = 10.0 ** math.floor(math.log10(span / 20.0)) if span > 0 else 1.0
    while True:
        for m in (1.0, 2.0, 5.0):
            if span / (m * p) <= 20.0:
                return m * p
        p *= 10.0


class Canvas:
    def __init__(self, n_stages, t_origin, window_us):
        self.n_stages, self.t_origin = n_stages, t_origin
        self.window_ms = window_us / 1e3
        self.unit = PLOT_W / self.window_ms if self.window_ms > 0 else 1.0  # pixels per ms
        self.width = LEFT + int(round(self.window_ms * self.unit)) + RIGHT
        self.height = int(self.row_y(n_stages)) + AXIS_H
        self.out = []

    def row_y(self, stage):
        return TOP + stage * (ROW_H + ROW_GAP)

    def x(self, t_us):
        return LEFT + (t_us - self.t_origin) / 1e3 * self.unit


def draw_header(c, title):
    c.out.append(f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{c.width}" '
                 f'height="{c.height}" viewBox="0 0 {c.width} {c.height}" '
                 f'font-family="sans-serif">')
    c.out.append('<rect width="100%" height="100%" fill="#ffffff"/>')
    c.out.append(f'<text x="12" y="24" font-size="15" font-weight="bold">{escape(title)}</text>')
    # legend swatches carry no class: only the step's boxes are class F or B
    c.out.append(
        '<g font-size="12">\n'
        f'<rect x="12" y="34" width="14" height="14" fill="{COLOUR["F"]}" stroke="#333333"/>'
        '<text x="31" y="45">forward</text>\n'
        f'<rect x="96" y="34" width="14" height="14" fill="{COLOUR["B"]}" stroke="#333333"/>'
        '<text x="115" y="45">backward</text>\n'
        '<text x="190" y="45" fill="#555555">blank: idle; pale: waiting for a neighbour inside '
        'F/B; number: micro-batch; measured times</text>\n</g>')


def draw_box(c, b):
    x, y = c.x(b["t0"]), c.row_y(b["stage"])
    w = max((b["t1"] - b["t0"]) / 1e3 * c.unit, 0.1)
    tip = (f'stage {b["stage"]} {b["kind"]}{b["mb"]}: {(b["t0"] - c.t_origin) / 1e3:.3f} ms, '
           f'{(b["t1"] - b["t0"]) / 1e3:.3f} ms long, {busy(b) / 1e3:.3f} ms computing')
    c.out.append(f'<rect class="{b["kind"]}" x="{x:.1f}" y="{y:.1f}" width="{w:.2f}" '
                 f'height="{ROW_H}" fill="{COLOUR[b["kind"]]}" stroke="#333333" '
                 f'stroke-width="0.5"><title>{tip}</title></rect>')
    for wt in b["waits"]:
        ww = (wt["t1"] - wt["t0"]) / 1e3 * c.unit
        if ww >= 0.1:
            c.out.append(f'<rect class="wait" x="{c.x(wt["t0"]):.1f}" y="{y:.1f}" '
                         f'width="{ww:.2f}" height="{ROW_H}" fill="#ffffff" fill-opacity="0.75"/>')
    if w >= 12:  # a label only where it fits; the tooltip always has it
        c.out.append(f'<text x="{x + w / 2:.1f}" y="{y + ROW_H / 2 + 4:.1f}" font-size="11" '
                     f'text-anchor="middle">{b["mb"]}</text>')


def draw_rows(c, boxes):
    for st in range(c.n_stages):
        y = c.row_y(st)
        c.out.append(f'<g id="stage-{st}">\n<text x="12" y="{y + ROW_H / 2 + 4:.1f}" '
                     f'font-size="12">stage {st}</text>')
        c.out.append(f'<rect x="{LEFT}" y="{y:.1f}" width="{c.window_ms * c.unit:.1f}" '
                     f'height="{ROW_H}" fill="none" stroke="#cccccc"/>')
        for b in boxes:
            if b["stage"] == st:
                draw_box(c, b)
        c.out.append("</g>")


def draw_axis(c):
    y, step = c.row_y(c.n_stages) + 2, tick_step(c.window_ms)
    c.out.append(f'<g font-size="11" fill="#555555">\n<line x1="{LEFT}" y1="{y:.1f}" '
                 f'x2="{LEFT + c.window_ms * c.unit:.1f}" y2="{y:.1f}" stroke="#555555"/>')
    i = 0
    while i * step <= c.window_ms + 1e-9:
        x = LEFT + i * step * c.unit
        c.out.append(f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{x:.1f}" y2="{y + 4:.1f}" '
                     f'stroke="#555555"/><text x="{x:.1f}" y="{y + 16:.1f}" '
                     f'text-anchor="middle">{i * step:g}</text>')
        i += 1
    c.out.append(f'<text x="{LEFT}" y="{y + 32:.1f}">time (ms)</text>\n</g>')


def pick_step(events, stages, wanted):
    steps = sorted({step_of(e) for e in events if e.get("ph") == "X" and e.get("pid") in stages
                    and SPAN.match(str(e.get("name", ""))) and step_of(e) is not None})
    if not steps:
        fail("the trace has no forward/backward spans (F<mb>, B<mb>) on replica 0")
    if wanted is None:
        return steps[0]
    if wanted not in steps:
        fail(f"step {wanted} is not in the trace; it has steps {', '.join(map(str, steps))}")
    return wanted


def main():
    ap = argparse.ArgumentParser(description="Draw one step of a pipetrain trace as SVG.")
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--step", type=int, help="1-based step as in the trace (default: the first)")
    ap.add_argument("--label", help="title prefix, e.g. the schedule (default: metadata.schedule)")
    args = ap.parse_args()
    events, meta = load_events(args.trace)
    stages = stage_of_pid(events)
    step = pick_step(events, stages, args.step)
    boxes, waits = spans_of_step(events, stages, step)
    attach_waits(boxes, waits)
    n_stages = max(stages.values()) + 1
    n_micro = len({b["mb"] for b in boxes if b["stage"] == 0})
    t0, t1 = min(b["t0"] for b in boxes), max(b["t1"] for b in boxes)
    bubble = 1.0 - sum(busy(b) for b in boxes) / (n_stages * (t1 - t0)) if t1 > t0 else 0.0
    label = args.label if args.label is not None else meta.get("schedule")
    name = f"{label}, " if label else ""
    title = (f"{name}step {step}: P = {n_stages} stages, M = {n_micro} micro-batches, "
             f"measured bubble {100 * bubble:.1f}%")
    c = Canvas(n_stages, t0, t1 - t0)
    draw_header(c, title)
    draw_rows(c, sorted(boxes, key=lambda b: b["t0"]))
    draw_axis(c)
    c.out.append("</svg>")
    try:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write("\n".join(c.out) + "\n")
    except OSError as e:
        fail(f"{args.out}: cannot write: {e}")
    print(f"{args.out}: {title} ({len(boxes)} boxes, window {(t1 - t0) / 1e3:.3f} ms)")


if __name__ == "__main__":
    main()
