#!/usr/bin/env bash
# report.sh PIPE_TRAIN PIPE_REPORT [render]: a 2-stage run with data.eval, --metrics, --trace and
# its --plan drawn by pipe_report; report_check.py parses the page and counts each curve's points
# (a point per step, per evaluation). With `render`, headless Chromium also draws the page to PNG
# and the picture must not be blank (skipped, exit 77, without Chromium).
pipe_train=$(realpath "$1") pipe_report=$(realpath "$2") mode=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
source "$(dirname "$0")/../lib.sh"
browser=$(command -v chromium || command -v chromium-browser || true)
[ "$mode" != render ] || [ -n "$browser" ] || skip "no chromium to render the page (apt-get install chromium)"
spec=tests/pipeline/gate.yaml
head -c 30000 examples/data/tiny.txt | tail -c 6000 >"$work/heldout.txt"
set_=(--set pipeline.stages=2 --set train.steps=6
      --set "data.eval={path: $work/heldout.txt, every: 3, batches: 1}")
"$pipe_train" "$spec" "${set_[@]}" --plan >"$work/plan.txt"
pt_mpirun 2 "$pipe_train" "$spec" --quiet "${set_[@]}" --metrics "$work/m.jsonl" \
  --trace "$work/trace.json" --trace-steps 2:2
"$pipe_report" "$work/m.jsonl" --trace "$work/trace.json" --plan "$work/plan.txt" "$work/r.html"
python3 "$here/report_check.py" "$work/r.html" 6 2 2
if [ "$mode" = render ]; then
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --window-size=1400,2200 --screenshot="$work/r.png" "file://$work/r.html" >/dev/null 2>&1 ||
    fail "chromium could not render $work/r.html"
  python3 "$here/png_check.py" "$work/r.png"
fi
