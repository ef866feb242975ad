#!/usr/bin/env python3
"""torch_interop.py PIPE_TRAIN: schedules as torch.distributed.pipelining writes them, run by
pipe_train, and pipe_train's --format torch read by torch (docs/schedules.md, "Schedules from
torch").

1. Every torch generator here (ScheduleGPipe, Schedule1F1B, ScheduleInterleaved1F1B,
   ScheduleLoopedBFS, ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble, ScheduleDualPipeV)
   builds its order for P = 2, 3, 4 with fake stages (as torch's own tests do); the order is
   dumped as _dump_csv does, compute-only and lowered (torch's sends, receives, waits, FSDP and
   gradient-reduction actions), and also as _format_pipeline_order's table. pipe_train checks each
   (--print-schedule) and trains with it under mpirun: parameters bitwise equal to --sequential.
   Schedule1F1B's order names micro-batch M on its last rank (torch's _get_pipeline_order starts
   that rank at micro-batch 1): refused at that action, exit 2.
2. pipe_train --format torch and torch-comms of every registered schedule: torch's _load_csv
   accepts it and its simulator (_simulate_comms_compute) runs it without deadlock.
3. Refusals: exit 2, one line naming file, line, action and the fix.
Skips (exit 77) without torch."""
import csv
import filecmp
import os
import subprocess
import sys
import tempfile

try:
    import torch  # noqa: F401
    from torch.distributed.pipelining import schedules as S
    from torch.distributed.pipelining.stage import _PipelineStageBase
except Exception as e:  # pragma: no cover
    print(f"SKIP: torch.distributed.pipelining not importable ({e})")
    sys.exit(77)

PIPE = sys.argv[1]
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
os.chdir(ROOT)
SPEC = "tests/pipeline/gate.yaml"
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
           OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
FAILS = []


def fail(msg):
    print("FAIL:", msg)
    FAILS.append(msg)


class FakeStage(_PipelineStageBase):
    """What a schedule's constructor reads of a stage, nothing else (torch's tests' mock)."""

    def __init__(self, num_stages, group_size, group_rank, stage_index):
        self.submod = None
        self.num_stages, self.group_size, self.group_rank = num_stages, group_size, group_rank
        self.group, self.stage_index, self.stage_index_to_group_rank = None, stage_index, None

    def _create_grad_recv_info(self, *a, **k):
        return None

    def _prepare_forward_infra(self, *a, **k):
        pass

    def _prepare_backward_infra(self, *a, **k):
        pass


GENERATORS = [  # torch's name, chunks per rank, placement
    ("GPipe", 1, "loop"), ("1F1B", 1, "loop"), ("Interleaved1F1B", 2, "loop"),
    ("LoopedBFS", 2, "loop"), ("InterleavedZeroBubble", 2, "loop"),
    ("ZBVZeroBubble", 2, "v"), ("DualPipeV", 2, "v"),
]


def rank0_stages(P, v, placement):
    C = P * v
    ids = [0] if v == 1 else ([0, 2 * P - 1] if placement == "v" else [0, P])
    return [FakeStage(C, P, 0, i) for i in ids]


def stage_rank(P, v, placement):
    if placement == "v":
        return lambda c: c if c < P else 2 * P - 1 - c
    return lambda c: c % P


def torch_orders(name, P, v, placement, M):
    """compute-only and lowered orders, {rank: [action or None]}, or None where torch has no
    such generator."""
    try:
        cls = S.get_schedule_class(name)
    except ValueError:
        return None
    stages = rank0_stages(P, v, placement)
    sched = cls(stages[0] if v == 1 else stages, M, loss_fn=lambda a, b: a)
    if v == 1:
        order = sched._get_pipeline_order()
        try:  # torch's own lowering, as _PipelineScheduleRuntime does for its schedules
            lowered = S._add_send_recv({r: [a for a in order[r] if a is not None]
                                        for r in order}, stage_to_rank=lambda c: c, num_stages=P)
            lowered = S._add_wait_send(lowered)
        except AssertionError:  # Schedule1F1B's order (micro-batch M) cannot be lowered
            lowered = None
    else:
        order, lowered = sched.pipeline_order, sched.pipeline_order_with_comms
    return order, lowered


def write_csv(path, order):
    """As _dump_csv writes it."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        for r in sorted(order):
            w.writerow(order[r])


def pipe(args, np=None, timeout=300):
    cmd = [PIPE, SPEC] + args
    if np:
        cmd = ["timeout", str(timeout), "mpirun", "-np", str(np), "--oversubscribe"] + cmd
    return subprocess.run(cmd, env=ENV, capture_output=True, text=True)


def sets(P, M, extra=()):
    out = ["--set", f"pipeline.stages={P}", "--set", f"train.micro_batches={M}",
           "--set", "train.steps=2"]
    for kv in extra:
        out += ["--set", kv]
    return out


def params_equal(prefix_a, prefix_b, np):
    """Every rank's dumped parameters (--dump-params) of the pipelined run, together, against
    the sequential run's: compare_runs.py does the stitching."""
    r = subprocess.run([sys.executable, "tests/pipeline/compare_runs.py", prefix_a + ".jsonl",
                        prefix_a, prefix_b + ".jsonl", prefix_b, str(np)],
                       capture_output=True, text=True)
    return r.returncode == 0, r.stdout + r.stderr


def run_torch_files(tmp):
    refs = {}
    for P in (2, 3, 4):
        M = 2 * P
        for name, v, placement in GENERATORS:
            got = torch_orders(name, P, v, placement, M)
            if got is None:
                print(f"note: torch {torch.__version__} has no Schedule{name}")
                continue
            order, lowered = got
            bad_mb = [(r, a) for r in order for a in order[r]
                      if a is not None and a.microbatch_index is not None
                      and a.microbatch_index >= M]
            forms = {"csv": order, "lowered": lowered}
            for form, o in forms.items():
                if o is None:
                    continue
                path = os.path.join(tmp, f"{name}_P{P}_{form}.csv")
                write_csv(path, o)
                check_file(tmp, name, P, M, v, form, path, bad_mb, refs)
            table = os.path.join(tmp, f"{name}_P{P}_table.txt")
            with open(table, "w") as f:
                f.write(S._format_pipeline_order(order))
            r = pipe(["--print-schedule"] + sets(P, M, [f"pipeline.schedule_file={table}"]))
            if (r.returncode == 2) != bool(bad_mb):
                fail(f"{name} P={P} table: exit {r.returncode}: {r.stderr.strip()}")


def check_file(tmp, name, P, M, v, form, path, bad_mb, refs):
    where = f"torch {name} P={P} M={M} ({form})"
    r = pipe(["--print-schedule"] + sets(P, M, [f"pipeline.schedule_file={path}"]))
    if bad_mb:
        rank, a = bad_mb[0]
        want = f"rank {rank}, action {a}: micro-batch {a.microbatch_index} is out of range"
        if r.returncode != 2 or want not in r.stderr or path not in r.stderr:
            fail(f"{where}: want exit 2 and '{want}', got {r.returncode}: {r.stderr.strip()}")
        else:
            print(f"ok: {where}: refused: {r.stderr.strip()}")
        return
    if r.returncode != 0:
        fail(f"{where}: --print-schedule exit {r.returncode}: {r.stderr.strip()}")
        return
    if M not in refs:
        ref = os.path.join(tmp, f"seq_M{M}")
        s = pipe(["--sequential", "--quiet", "--metrics", ref + ".jsonl", "--dump-params", ref]
                 + sets(1, M))
        if s.returncode != 0:
            fail(f"sequential M={M}: {s.stderr.strip()}")
            return
        refs[M] = ref
    run = os.path.join(tmp, f"run_{name}_{P}_{form}")
    t = pipe(["--quiet", "--metrics", run + ".jsonl", "--dump-params", run]
             + sets(P, M, [f"pipeline.schedule_file={path}"]), np=P)
    if t.returncode != 0:
        fail(f"{where}: run exit {t.returncode}: {t.stderr.strip()[-600:]}")
        return
    same, out = params_equal(refs[M], run, P)
    if not same:
        fail(f"{where}: not bitwise equal to --sequential: {out.strip()[-600:]}")
    else:
        print(f"ok: {where}: bitwise equal to --sequential")


def registered_names():
    r = pipe(["--print-schedule", "--set", "pipeline.schedule=not_a_schedule"])
    line = r.stderr[r.stderr.find("expected one of ") + len("expected one of "):]
    return [n.strip() for n in line.split(", got")[0].split(",") if n.strip()]


def run_our_torch_format(tmp):
    names = registered_names()
    if not names:
        fail("no schedule names in pipe_train's refusal of an unknown schedule")
    for name in names:
        for P in (2, 3, 4):
            M = 2 * P
            for fmt in ("torch", "torch-comms"):
                where = f"pipe_train {name} P={P} M={M} --format {fmt}"
                r = pipe(["--print-schedule", "--format", fmt] +
                         sets(P, M, [f"pipeline.schedule={name}"]))
                if r.returncode != 0:
                    fail(f"{where}: exit {r.returncode}: {r.stderr.strip()}")
                    continue
                path = os.path.join(tmp, f"ours_{name}_{P}_{fmt}.csv")
                with open(path, "w") as f:
                    f.write(r.stdout)
                try:
                    with open(path, newline="") as f:
                        rows = list(csv.reader(f))
                    C = max(S._Action.from_str(a).stage_index for row in rows for a in row)
                    v = (C + 1) // P
                    placement = "v" if any(S._Action.from_str(a).stage_index == 2 * P - 1
                                           for a in rows[0]) and v == 2 else "loop"
                    sched = S._PipelineScheduleRuntime(rank0_stages(P, v, placement), M,
                                                       loss_fn=lambda a, b: a)
                    fmt_arg = "compute_comms" if fmt == "torch-comms" else "compute_only"
                    sched._load_csv(path, format=fmt_arg)
                    to_rank = sched.stage_index_to_group_rank
                    lowered = sched.pipeline_order_with_comms
                    if fmt == "torch":  # torch's lowering adds FSDP actions its simulator lacks
                        lowered = S._add_send_recv(
                            {r: [a for a in o if a is not None]
                             for r, o in sched.pipeline_order.items()},
                            stage_to_rank=lambda c: to_rank[c], num_stages=sched._num_stages)
                    S._simulate_comms_compute(lowered, lambda c: to_rank[c], sched._num_stages)
                except Exception as e:
                    fail(f"{where}: torch refuses it: {type(e).__name__}: {str(e)[:400]}")
                    continue
                # and pipe_train reads it back
                b = pipe(["--print-schedule"] + sets(P, M, [f"pipeline.schedule_file={path}"]))
                if b.returncode != 0:
                    fail(f"{where}: read back: {b.stderr.strip()}")
                else:
                    print(f"ok: {where}: torch loads and simulates it, pipe_train reads it back")


def run_refusals(tmp):
    cases = [  # file text, P, M, what stderr must hold, settings
        ("0F0,0F1,0F2,0B0,0B1,0B2\n1F0,1F1,1B0,1F3,1B1,1B3\n", 2, 3,
         ":2: rank 1, action 1F3: micro-batch 3 is out of range: train.micro_batches is 3 "
         "(micro-batches 0..2); renumber the action or raise train.micro_batches"),
        ("0F0,0B0\n1F0,1B0,2F0\n", 2, 1,
         ":2: rank 1, action 2F0: chunk 2 makes 3 chunks on 2 ranks, but every rank holds as "
         "many (a multiple of 2 chunks); renumber the chunks"),
        ("0F0,0B0,2F0,2B0\n1F0,1B0,3F0,3B0\n", 2, 1,
         ":1: rank 0, action 2F0: chunk 2 is out of range: 2 ranks x pipeline.virtual_stages 1 "
         "make chunks 0..1; renumber the chunk or set pipeline.virtual_stages to 2",
         "pipeline.virtual_stages=1"),
        ("rank 0: 0F0 0F1 0F1 0B0 0B1\nrank 1: 1F0 1F1 1B0 1B1\n", 2, 2,
         ":1: rank 0, action 0F1: forward of micro-batch 1 runs twice on chunk 0 (first at "
         "line 1); remove one"),
        ("rank 0: 0LOAD0 0F0 0B0\nrank 1: 1F0 1B0\n", 2, 1,
         ":1: rank 0: '0LOAD0' is not an action; write CHUNK CODE MB (0F3, 1I2, 1W2, 0sA3, or "
         "torch's 0SEND_F3) or FLUSH, TIE, DP, OPT; pipetrain's load is L (0L3)"),
        ("0F0,0B0\n", 2, 1, ": 1 ranks, but pipeline.stages is 2; set pipeline.stages to 1"),
    ]
    for i, (text, P, M, want, *extra) in enumerate(cases):
        path = os.path.join(tmp, f"bad{i}.csv")
        with open(path, "w") as f:
            f.write(text)
        r = pipe(["--print-schedule"] + sets(P, M, [f"pipeline.schedule_file={path}"] + extra))
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        if r.returncode != 2 or len(lines) != 1 or (path + want) not in lines[0]:
            fail(f"refusal {i}: want exit 2 and '{path}{want}', got {r.returncode}: {r.stderr}")
        else:
            print(f"ok: refused: {lines[0]}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        run_refusals(tmp)
        run_our_torch_format(tmp)
        run_torch_files(tmp)
    if FAILS:
        print(f"{len(FAILS)} failure(s)")
        sys.exit(1)
    print("torch interop: all passed")


if __name__ == "__main__":
    main()
