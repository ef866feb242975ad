"""report_check.py PAGE.html STEPS EVALS STAGES: pipe_report's page parses as HTML, every chart
is well-formed SVG, and the curves have their points: loss, tokens/s and step time one per step,
eval loss one per evaluation, bubble and memory one curve per stage; the plan and the schedule
picture are there, and nothing is fetched from elsewhere (no script, no external link)."""
import html.parser
import re
import sys
import xml.etree.ElementTree as ET


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.series, self.tags, self.open = {}, [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if tag == "polyline" and a.get("class") == "series":
            pts = a.get("points", "").split()
            if len(pts) != int(a["data-points"]):
                fail("%s: %d points, data-points says %s" % (a["data-name"], len(pts), a["data-points"]))
            self.series[a["data-name"]] = len(pts)
        for k in ("src", "href"):
            if k in a and re.match(r"(https?:)?//", a[k]):
                fail("the page fetches %s" % a[k])


def main():
    path, steps, evals, stages = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    text = open(path, encoding="utf-8").read()
    p = Page()
    p.feed(text)
    p.close()
    if "script" in p.tags:
        fail("the page has a script")
    charts = re.findall(r"<svg class=\"chart\".*?</svg>", text, re.S)
    if len(charts) != 5:
        fail("%d charts, expected 5" % len(charts))
    for c in charts:
        ET.fromstring(c)  # raises on malformed SVG
    want = {"loss": steps, "eval loss": evals, "tokens/s": steps, "step ms": steps}
    for s in range(stages):
        want["bubble stage %d" % s] = steps
        want["MiB stage %d" % s] = steps
    if p.series != want:
        fail("curves %s, expected %s" % (p.series, want))
    if '<pre class="plan">' not in text or "stage" not in text.split('<pre class="plan">')[1]:
        fail("no plan")
    sched = re.search(r"<div class=\"schedule\">\s*(<svg.*?</svg>)", text, re.S)
    if not sched:
        fail("no schedule picture")
    ET.fromstring(sched.group(1))
    print("report_check: %d charts, curves %s, plan, schedule" % (len(charts), want))


main()
