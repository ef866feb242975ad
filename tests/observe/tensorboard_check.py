"""tensorboard_check.py TB_DIR METRICS.jsonl: reads TB_DIR with TensorBoard's EventAccumulator
and checks that every scalar of every --metrics record is there once, at its step, with its
value (as float32), that no step shows twice, and that the spec and plan texts are present.
Under PIPETRAIN_AUTO_DEVICE=gpu (the test run on GPUs) the GPU's memory count must be there."""
import json
import os
import sys

from tensorboard.backend.event_processing import event_accumulator as ea


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def expected(rec):
    out = {"train/loss": rec["loss"], "train/lr": rec["lr"], "train/grad_norm": rec["grad_norm"],
           "perf/tokens_per_s": rec["tokens_per_s"], "perf/step_ms": rec["step_ms"],
           "train/skipped_steps": rec["skipped_steps"]}
    for key, tag in (("mfu", "perf/mfu"), ("seq_len", "train/seq_len"), ("eval_loss", "eval/loss"),
                     ("bubble_mean", "pipeline/bubble_mean")):
        if key in rec:
            out[tag] = rec[key]
    for s, b in enumerate(rec.get("bubble", [])):
        out["pipeline/bubble/stage_%d" % s] = b
    for s, m in enumerate(rec.get("peak_memory_bytes", [])):
        out["memory/peak_MiB/stage_%d" % s] = m / 2**20
    for s, m in enumerate(rec.get("gpu_memory_bytes", [])):  # on GPUs (the emulated build's)
        out["memory/gpu_MiB/stage_%d" % s] = m / 2**20
    return out


def main():
    tb_dir, metrics = sys.argv[1], sys.argv[2]
    acc = ea.EventAccumulator(tb_dir, size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
    acc.Reload()
    tags = acc.Tags()
    records = [json.loads(line) for line in open(metrics)]
    want = {}  # tag -> {step: value}
    for rec in records:
        for tag, v in expected(rec).items():
            want.setdefault(tag, {})[rec["step"]] = v
    covered = ["pipeline/bubble/stage_1", "memory/peak_MiB/stage_1", "eval/loss", "perf/mfu"]
    if os.environ.get("PIPETRAIN_AUTO_DEVICE") == "gpu":  # gpu_tensorboard: the GPU's count too
        covered.append("memory/gpu_MiB/stage_1")
    for tag in covered:
        if tag not in want:
            fail("the metrics lack %s: the test's run does not cover it" % tag)
    if set(tags["scalars"]) != set(want):
        fail("scalar tags %s, expected %s" % (sorted(tags["scalars"]), sorted(want)))
    for tag, by_step in want.items():
        got = acc.Scalars(tag)
        steps = [e.step for e in got]
        if steps != sorted(by_step):
            fail("%s: steps %s, expected %s (once each)" % (tag, steps, sorted(by_step)))
        for e in got:
            w = by_step[e.step]
            if abs(e.value - w) > 1e-6 * max(1.0, abs(w)):
                fail("%s step %d: %r, expected %r" % (tag, e.step, e.value, w))
    for tag, needle in (("spec", "transformer_block"), ("plan", "stage")):
        if tag not in tags["tensors"]:
            fail("no text summary %r (tensors: %s)" % (tag, tags["tensors"]))
        if acc.SummaryMetadata(tag).plugin_data.plugin_name != "text":
            fail("%s is not a text summary" % tag)
        texts = [e.tensor_proto.string_val[0].decode() for e in acc.Tensors(tag)]
        if len(texts) != len({e.step for e in acc.Tensors(tag)}) or needle not in texts[-1]:
            fail("%s text: %r" % (tag, texts))
    n = sum(len(v) for v in want.values())
    print("tensorboard_check: %d scalars over %d steps, texts spec and plan" % (n, len(records)))


main()
