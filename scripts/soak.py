#!/usr/bin/env python3
"""soak.py: kill-and-resume soak test of pipe_train's checkpoints. Not part of the CTest suite.

What it checks, and why: a long run that checkpoints every few steps (train.checkpoint) is
killed over and over, at random moments and in random ways, and resumed each time with
`--load ROOT`; at the end its parameters must be bitwise equal to those of one uninterrupted
run of the same spec. That is the promise users rely on when a job is preempted or a node
dies (docs/checkpoint.md "Exact resume"), and it exercises together what the unit-style
tests check one at a time (tests/checkpoint/kill_save.sh: kill -9 of one sequential process;
tests/engine/preempt.sh: one SIGTERM; tests/engine/dead_rank.sh: one dead rank): saves cut short on some
ranks only, pruning, preemption saves, resumes under another layout, many times in a row.

  1. reference: the spec trained S steps in one go (--metrics, --gather REF.safetensors).
  2. soak: launch `mpirun -np N pipe_train SPEC --set train.checkpoint={dir: ROOT, every: K,
     keep: 2} [--load ROOT]`, wait until a random step, then one of (drawn from --seed):
       kill9-rank    SIGKILL of one random rank           (a node or the OOM killer)
       kill9-mpirun  SIGKILL of mpirun                    (the launcher dies; ranks orphaned)
       term-rank     SIGTERM to one random rank           (preemption: must save, exit 0)
       term-mpirun   SIGTERM to mpirun (Open MPI 4.1 passes it on to every rank about 1 s
                     later, odls_base_sigkill_timeout, then SIGKILLs them as long again later:
                     a slower preemption save is cut short; mpirun exits 1 even when every
                     rank saved and exited 0)
       term-grace    SIGTERM to one rank, then SIGKILL of every process 0-60 ms later (a
                     batch scheduler's grace period running out during the preemption save)
       early-kill9   SIGKILL of a rank 0.05-0.6 s after launch (start-up, MPI init, loading;
                     of mpirun if no rank has started yet)
     then waits (at most --hang-timeout s) until every process of the job is gone, and checks:
       - the exit status: 0 and "preempted after step N: checkpoint written to ROOT/step-N"
         for term-rank (and step-N is then the newest complete checkpoint); non-zero for the
         SIGKILL kinds; no unexpected pipetrain error line (damaged/not a checkpoint/...);
       - the run resumed at the newest complete checkpoint (its first step is that step + 1)
         and every step's loss, lr and grad_norm equal the reference's bit for bit;
       - ROOT: the newest complete step-N (one with manifest.json) never goes back, also not
         within a run (a complete step-N set aside as step-N.previous by a save over it that
         was cut short, newer than every step-N that --load ROOT sees, is a lost checkpoint);
         every complete checkpoint's files match their manifest's CRC-32 and sizes; at most
         keep+1 complete ones at or below the newest periodic step (preemption saves of other
         steps are pruned by the next periodic save);
       - no process of the job is left.
     Between restarts the layout changes too (pipelined on N or 2 stages, or --sequential,
     with random schedule 1f1b/gpipe and partition parameters/uniform/balanced): checkpoints
     load under any layout, and with OPENBLAS_NUM_THREADS=1 (set here) all layouts with one
     data-parallel replica compute bitwise-equal results (docs/training.md; checked here step
     by step). data_parallel is always 1: changing it changes the global batch.
  3. after the kills, a last resume runs to step S with --gather SOAK.safetensors, which must
     equal REF.safetensors byte for byte (the file holds the whole model, named by layer, and
     a __metadata__ of format, step and ties only: no time, so it is identical too). On a
     difference the tensors that differ are listed.
  At the end, files that cut-short saves left in ROOT for good (incomplete step-N that no
  later save or prune removes, step-N.previous) are listed as WARNINGs (failures with --strict).
  Prints every attempt, then a summary (kills by kind, restarts, steps re-done, saves cut
  short, layouts, wall time) and PASS or FAIL; exits 1 on any failure, 2 on bad usage.

Run (from anywhere; builds build-soak/pipe_train unless PIPE_TRAIN=path is given; the checks
after each run are in soak_checks.py beside it):
  python3 scripts/soak.py                 # ~3.5 min on 2 cores: 4 ranks, 2000 steps, 50 kills
  python3 scripts/soak.py --quick         # ~1 min: 400 steps, 10 kills
  python3 scripts/soak.py --smoke         # ~30 s: 150 steps, 5 kills
  python3 scripts/soak.py --seed 1234     # repeat a sequence (see below)
  --help lists every option.
Bounded: one launch per kill plus the reference and the final run; every wait has a limit
(--hang-timeout after a kill, 300 s to reach a kill's step, an hour for the reference and the
final run). Every process it starts (mpirun, ranks, orphans: each carries the work directory in
its arguments) is SIGKILLed on the way out, whatever the way out, and the work directory removed.
Time: the reference run (~20-35 s for the default) plus ~3 s per kill (start-up; teardown:
mpirun takes ~2 s to notice a dead rank), on 2 cores; slower when the machine is busy.
The seed fixes every random draw (layout, kind, target step, victim rank, delays). Where the
previous run stopped depends on timing, and near the end a kill through mpirun or an early
kill becomes a kill of a rank (the ranks would otherwise finish first, at a speed measured
from the reference run), so a repeat follows the same sequence of layouts and kinds around
the same steps, not necessarily the same bytes on disk. Python standard library only.
"""
import argparse
import collections
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from soak_checks import Failure, check_metrics, read_metrics, root_state, safetensors_diff

KINDS = ["kill9-rank", "kill9-mpirun", "term-rank", "term-mpirun", "term-grace", "early-kill9"]
# kind -> weight (percent) for pipelined runs, and for sequential ones (no mpirun there)
WEIGHTS_PIPELINED = {"kill9-rank": 30, "kill9-mpirun": 10, "term-rank": 20, "term-mpirun": 10,
                     "term-grace": 15, "early-kill9": 15}
WEIGHTS_SEQUENTIAL = {"kill9-rank": 40, "term-rank": 25, "term-grace": 20, "early-kill9": 15}
# Lines that must never appear, whatever killed the run.
BAD_RE = re.compile(
    r"damaged|not a checkpoint|no such checkpoint|written for a different model"
    r"|saving the checkpoint|cannot set the existing|tied weight .* differs|non-finite"
    r"|Segmentation|signal 11|signal 6|Aborted|AddressSanitizer|runtime error|different specs"
    r"|--gather")
ERROR_LINE = re.compile(r"^pipetrain(\[rank [0-9]+\])?: error.*$", re.M)
# what survivors of a SIGKILL may say about the lost peer (watchdog, MPI)
PEER_LOST = re.compile(r"no progress|rank [0-9]+|peer|MPI|connection|signal")
PREEMPTED = re.compile(r"^pipetrain: preempted after step ([0-9]+): checkpoint written to "
                       r"(.*); resume", re.M)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Usage(Exception):
    """Bad command line."""


# --- Processes ---------------------------------------------------------------------------------

def proc_stat(pid):
    """(command name, state, parent pid) of a live process, or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    name, rest = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()
    return name, rest[0], int(rest[1])


def all_pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def rank_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\0")
    except OSError:
        return None
    for kv in env:
        if kv.startswith(b"OMPI_COMM_WORLD_RANK="):
            return int(kv.split(b"=", 1)[1])
    return None


def last_step(path):
    """The newest step in a metrics file (0 if none)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 1500))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return 0
    found = re.findall(r'"step":([0-9]+)', tail)
    return int(found[-1]) if found else 0


def shell_status(rc):
    """The shell's way of showing an exit status: 128 + N for a death by signal N."""
    return 128 - rc if rc < 0 else rc


def kill(pids, sig):
    for p in pids:
        try:
            os.kill(p, sig)
        except (ProcessLookupError, PermissionError):
            pass


# --- The soak ----------------------------------------------------------------------------------

class Soak:
    def __init__(self, opt, pipe_train):
        self.o, self.pipe_train = opt, pipe_train
        self.rng = random.Random(opt.seed)
        self.work = tempfile.mkdtemp(prefix="pipetrain-soak.")
        self.root = os.path.join(self.work, "ckpt")
        self.job = None  # the run in flight: a Popen of mpirun, or of pipe_train when sequential
        self.said = collections.Counter()  # what killed runs printed (digits as N): how often
        self.prev_newest, self.prev_junk, self.ever_complete = 0, set(), set()
        self.attempt, self.kind, self.layout, self.out = 0, "reference", None, None
        if opt.sequential:
            self.layouts, self.ref_layout = ["seq"], "seq"
        else:
            self.ref_layout = f"{opt.ranks}:1f1b:parameters"
            if opt.fixed_layout:
                self.layouts = [self.ref_layout]
            else:
                self.layouts = [f"{p}:{sc}:{pa}" for p in sorted({opt.ranks, 2})
                                for sc in ("1f1b", "gpipe")
                                for pa in ("parameters", "uniform", "balanced")]
                self.layouts += ["seq"] * 3  # about one run in five sequential

    @staticmethod
    def layout_name(layout):
        if layout == "seq":
            return "seq"
        p, sc, pa = layout.split(":")
        return f"p{p}/{sc}/{pa}"

    def where(self):
        return f"attempt {self.attempt} ({self.kind}) [{self.layout_name(self.layout)}]"

    def output(self):
        try:
            with open(self.out, encoding="utf-8", errors="replace") as f:
                return f.read()
        except (OSError, TypeError):
            return ""

    def fail_with_output(self, msg):
        sys.stderr.write(self.output())
        raise Failure(msg)

    # processes

    def our_procs(self):
        """Every live mpirun/pipe_train of ours: each carries the work directory in its args."""
        mark, found = (self.work + "/").encode(), []
        for p in all_pids():
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    if mark not in f.read():
                        continue
            except OSError:
                continue
            st = proc_stat(p)
            # a zombie has ended; its new parent reaps it
            if st and st[1] != "Z" and ("pipe_train" in st[0] or "mpirun" in st[0]):
                found.append(p)
        return found

    def rank_pids(self):
        """The running pipe_train processes of the run."""
        lp = self.job.pid
        st = proc_stat(lp)
        if st and st[0] == "pipe_train":
            return [lp]
        kids = []
        for p in all_pids():
            s = proc_stat(p)
            if s and s[2] == lp and s[0] == "pipe_train" and s[1] != "Z":
                kids.append(p)
        return sorted(kids)

    def launch(self, layout, out, met, *extra):
        o = self.o
        args = [o.spec, "--quiet", "--set", f"train.steps={o.steps}", "--set",
                "pipeline.data_parallel=1", "--metrics", met, *extra]
        if layout == "seq":
            cmd = [self.pipe_train, *args, "--sequential"]
        else:
            p, sc, pa = layout.split(":")
            cmd = ["mpirun", "-np", p, "--oversubscribe", self.pipe_train, *args,
                   "--set", f"pipeline.stages={p}", "--set", f"pipeline.schedule={sc}",
                   "--set", f"pipeline.partition={pa}"]
        self.out = out
        with open(out, "wb") as f:
            self.job = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)

    def finish(self, limit):
        """Waits for the run and every process of ours to end: (exit status, seconds)."""
        t0 = time.monotonic()
        while self.job.poll() is None or self.our_procs():
            if time.monotonic() - t0 > limit:
                left = [self.job.pid] * (self.job.poll() is None) + self.our_procs()
                subprocess.run(["ps", "-o", "pid,ppid,stat,etime,args", "-p",
                                ",".join(map(str, left))], stdout=sys.stderr, check=False)
                self.fail_with_output(f"a hang: attempt {self.attempt} ({self.kind}) did not end "
                                      f"within {limit} s")
            time.sleep(0.05)
        rc = shell_status(self.job.returncode)
        self.job = None
        return rc, time.monotonic() - t0

    def cleanup(self):
        """SIGKILL of everything of ours that still runs; the work directory goes."""
        if self.job is not None and self.job.poll() is None:
            kill([self.job.pid], signal.SIGKILL)
        kill(self.our_procs(), signal.SIGKILL)
        if self.job is not None:
            try:
                self.job.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if self.o.keep_work:
            print(f"soak: kept {self.work}")
        else:
            shutil.rmtree(self.work, ignore_errors=True)

    # checks after a run

    def check_output(self):
        text = self.output()
        m = BAD_RE.search(text)
        if m:
            line = text[text.rfind("\n", 0, m.start()) + 1:text.find("\n", m.end())]
            self.fail_with_output(f"{self.where()}: unexpected message: {line}")
        for m in ERROR_LINE.finditer(text):
            msg = m.group(0).split("error: ", 1)[-1]
            if self.kind in ("kill9-rank", "kill9-mpirun", "early-kill9", "term-mpirun",
                             "term-grace") and PEER_LOST.search(msg):
                continue
            self.fail_with_output(f"{self.where()}: unexpected error line: {m.group(0)}")
        if self.kind in ("reference", "final"):
            return
        lines = {re.sub(r"[0-9]+", "N", line.replace(self.work, "WORK"))
                 for line in text.split("\n") if not re.fullmatch(r"-*| *", line)}
        for line in lines:
            self.said[f"{self.kind}: {line}"] += 1

    def check_root(self):
        """The checkpoint root after a run: its state, and how many leftovers the run added."""
        try:
            st = root_state(self.root, self.o.keep, self.o.every)
        except Failure as e:
            for d in sorted(os.listdir(self.root)):
                if d.startswith("step-"):
                    print(f"  {d}: {' '.join(sorted(os.listdir(os.path.join(self.root, d))))}",
                          file=sys.stderr)
            raise Failure(f"{self.where()}: {e}") from None
        self.ever_complete.update(st.complete)
        junk = ({("incomplete", j) for j in st.incomplete} | {("previous", j) for j in st.previous}
                | {("tmp", j) for j in st.tmps})
        new_junk = len(junk - self.prev_junk)
        self.prev_junk = junk
        if st.newest < self.prev_newest:
            why = ""
            if self.prev_newest in st.previous:
                why = (f" (step-{self.prev_newest:08d}.previous holds it: a save over that "
                       f"complete checkpoint was cut short, and --load ROOT does not look at "
                       f"step-N.previous)")
            raise Failure(f"{self.where()}: the newest complete checkpoint went back from step "
                          f"{self.prev_newest} to {st.newest}{why}")
        self.prev_newest = st.newest
        return st, new_junk

    def check_run(self, start):
        try:
            return check_metrics(self.ref, os.path.join(self.work, f"run{self.attempt}.jsonl"),
                                 start)
        except Failure as e:
            self.fail_with_output(f"{self.where()}: {e}")

    # the three parts

    def reference(self):
        met = os.path.join(self.work, "ref.jsonl")
        self.layout = self.ref_layout
        self.launch(self.ref_layout, os.path.join(self.work, "ref.out"), met,
                    "--gather", os.path.join(self.work, "ref.safetensors"))
        rc, took = self.finish(3600)
        if rc != 0:
            self.fail_with_output(f"the reference run exited {rc}")
        self.check_output()
        print(f"reference: {self.layout_name(self.ref_layout)}, {self.o.steps} steps in "
              f"{took:.1f}s", flush=True)
        if last_step(met) != self.o.steps:
            raise Failure(f"the reference run did not reach step {self.o.steps}")
        self.ref = {x["step"]: x for x in read_metrics(met)}
        self.ref_s = took
        # steps trained in 3 s (as fast as the reference ran): kills that do not stop the ranks
        # at once come no later than that before the end
        self.margin = int(3 * self.o.steps / max(took, 1e-3))

    def pick_kind(self):
        weights = WEIGHTS_SEQUENTIAL if self.layout == "seq" else WEIGHTS_PIPELINED
        allowed = [(k, w) for k, w in weights.items() if k in self.o.kinds]
        r = self.rng.randrange(max(1, sum(w for _, w in allowed)))
        for k, w in allowed:
            if r < w:
                return k
            r -= w
        return "kill9-rank"  # when only mpirun kinds are allowed and this run is sequential

    def final_run(self, start, ckpt, load):
        self.kind = "final"
        self.launch(self.layout, self.out, self.met, *ckpt, *load,
                    "--gather", os.path.join(self.work, "soak.safetensors"))
        rc, took = self.finish(3600)
        if rc != 0:
            self.fail_with_output(f"the final run exited {rc}")
        self.check_output()
        _, last, n = self.check_run(start)
        self.state, _ = self.check_root()
        self.trained += n
        if not (last == self.o.steps or (start == self.o.steps and n == 0)):
            raise Failure(f"the final run ended at step {last}, not {self.o.steps}")
        print(f"#{self.attempt:<3d} {'[' + self.layout_name(self.layout) + ']':<24} from step "
              f"{start:<5d} -> ran to step {self.o.steps} (exit 0, {took:.1f}s)", flush=True)

    def wait_for_step(self, target):
        t_launch = time.monotonic()
        while last_step(self.met) < target:
            if self.job.poll() is not None:
                rc, _ = self.finish(5)
                self.fail_with_output(f"attempt {self.attempt}: the run ended (exit {rc}) "
                                      f"before the kill at step {target}")
            if time.monotonic() - t_launch > 300:
                self.fail_with_output(f"a hang: attempt {self.attempt} has not reached step "
                                      f"{target} after 300 s (at step {last_step(self.met)})")
            time.sleep(0.02)

    def strike(self, kind, victim, rp, grace):
        launcher = self.job.pid
        if kind in ("kill9-rank", "early-kill9"):
            kill([victim or launcher], signal.SIGKILL)
        elif kind == "kill9-mpirun":
            kill([launcher], signal.SIGKILL)
        elif kind == "term-rank":
            kill([victim or launcher], signal.SIGTERM)
        elif kind == "term-mpirun":
            kill([launcher], signal.SIGTERM)
        elif kind == "term-grace":
            kill([victim or launcher], signal.SIGTERM)
            time.sleep(grace)
            kill([launcher, *rp], signal.SIGKILL)

    def kill_run(self, start, ckpt, load, killed):
        o, left = self.o, self.o.steps - start
        # the target step: spread the remaining kills over the remaining steps
        span = max(2, 2 * left // (o.kills - killed + 1))
        kind = self.pick_kind()
        # after a signal to mpirun the ranks go on for a while (~1 s: Open MPI forwards SIGTERM
        # late, and orphaned ranks notice mpirun's death late), and early-kill9 does not wait
        # for a step: not near the end, or the run could finish first
        if (kind.endswith("-mpirun") or kind == "early-kill9") and \
                start + 1 + span > o.steps - self.margin:
            kind = "term-rank" if kind == "term-mpirun" else "kill9-rank"
        self.kind = kind
        target = min(start + 1 + self.rng.randrange(span), o.steps - 10)  # not after the end
        jitter = self.rng.randrange(40) / 1000
        early_delay = (50 + self.rng.randrange(550)) / 1000
        grace = self.rng.randrange(60) / 1000
        pick = self.rng.randrange(1 << 15)
        self.launch(self.layout, self.out, self.met, *ckpt, *load)
        if kind == "early-kill9":
            time.sleep(early_delay)
        else:
            self.wait_for_step(target)
            time.sleep(jitter)
        rp = self.rank_pids()
        victim = rp[pick % len(rp)] if rp else None
        vrank = rank_of(victim) if victim else None
        at = last_step(self.met)
        self.strike(kind, victim, rp, grace)
        rc, took = self.finish(o.hang_timeout)
        self.max_took = max(self.max_took, took)
        self.kind_n[kind] += 1
        self.kind_rc[kind][rc] += 1
        self.check_output()
        _, last, n = self.check_run(start)
        self.trained += n
        self.state, new_junk = self.check_root()
        note = self.check_exit(kind, rc, last)
        text = self.output()
        if kind == "kill9-rank" and vrank is not None and self.layout != "seq" and \
                not re.search(rf"process rank {vrank} with PID .* exited on signal 9", text):
            note.append(f"mpirun did not name rank {vrank}")
        if new_junk:
            self.torn += 1
            note.append("a save cut short")
        who = f"rank {vrank}" if vrank is not None and not kind.endswith("mpirun") else ""
        notes = f" ({', '.join(note)})" if note else ""
        print(f"#{self.attempt:<3d} {'[' + self.layout_name(self.layout) + ']':<24} from step "
              f"{start:<5d} {kind:<12} {who:<9} at step {'-' if n == 0 else at:<5} exit "
              f"{rc:<3d} in {took:4.1f}s; newest checkpoint {self.state.newest}{notes}",
              flush=True)
        if o.verbose:
            print("".join(f"    | {line}\n" for line in text.splitlines()), end="")

    def check_exit(self, kind, rc, last):
        """The exit status and the preemption line against the kind; notes for the log."""
        pre = PREEMPTED.search(self.output())
        if kind == "term-rank":
            if rc != 0:
                self.fail_with_output(f"attempt {self.attempt} (term-rank): exited {rc} after "
                                      f"SIGTERM, want 0")
            if not pre:
                self.fail_with_output(f"attempt {self.attempt} (term-rank): no 'preempted after "
                                      f"step N' line")
        elif kind.startswith("kill9-") or kind == "early-kill9":
            if rc == 0:
                self.fail_with_output(f"attempt {self.attempt} ({kind}): exited 0 after a SIGKILL")
        if not pre:
            return []
        pstep, pdir = int(pre.group(1)), pre.group(2)
        want = os.path.join(self.root, f"step-{pstep:08d}")
        if pdir != want:
            raise Failure(f"attempt {self.attempt} ({kind}): preemption checkpoint in {pdir}, "
                          f"want {want}")
        if pstep != last:
            raise Failure(f"attempt {self.attempt} ({kind}): preempted after step {pstep}, but "
                          f"the last step trained was {last}")
        if self.state.newest != pstep:
            raise Failure(f"attempt {self.attempt} ({kind}): preempted after step {pstep}, but "
                          f"the newest complete checkpoint is step {self.state.newest}")
        return [f"preempted at {pstep}"]

    def soak(self):
        o = self.o
        self.kind_n = collections.Counter()
        self.kind_rc = collections.defaultdict(collections.Counter)
        self.layout_n = collections.Counter()
        self.trained = self.torn = killed = 0
        self.max_took = 0.0
        ckpt = ["--set", f"train.checkpoint={{dir: {self.root}, every: {o.every}, keep: {o.keep}}}"]
        for self.attempt in range(1, o.kills + 2):  # one launch per kill, then the final run
            start = self.prev_newest
            self.layout = self.layouts[self.rng.randrange(len(self.layouts))]
            self.out = os.path.join(self.work, f"run{self.attempt}.out")
            self.met = os.path.join(self.work, f"run{self.attempt}.jsonl")
            load = ["--load", self.root] if start > 0 else []
            self.layout_n[self.layout_name(self.layout)] += 1
            if killed >= o.kills or o.steps - start < 20:  # the last run: to the end
                self.final_run(start, ckpt, load)
                return
            self.kill_run(start, ckpt, load, killed)
            killed += 1
        raise Failure(f"no final run after {o.kills} kills")  # unreachable: the loop ends in it

    def warnings(self):
        """What cut-short saves left in ROOT for good (nothing deletes them later)."""
        st, out = self.state, []
        for j in st.incomplete:
            if j in self.ever_complete or (j % self.o.every == 0 and j < st.newest):
                # seen complete, or a periodic step that training went past: the rerun of a
                # cut-short periodic save rewrites it, so what is left is an old checkpoint
                # that pruning cut short
                out.append(f"step-{j}: an old checkpoint whose deletion (pruning) was cut short; "
                           f"later prunes left it there, although docs/checkpoint.md says 'it "
                           f"is deleted at the next prune'")
            elif j % self.o.every != 0:
                out.append(f"step-{j}: a preemption save cut short; left there for good "
                           f"(docs/checkpoint.md: a step-N without a manifest is neither "
                           f"counted, deleted nor loaded)")
            else:
                out.append(f"step-{j}: a save cut short")
        out += [f"step-{j}.previous: a checkpoint set aside by a save over it that was cut "
                f"short; never deleted" for j in st.previous]
        return out

    def summary(self, t_start):
        """Compares the gathered files, prints the summary; returns 0 (PASS) or 1."""
        o, st = self.o, self.state
        ref, got = (os.path.join(self.work, n) for n in ("ref.safetensors", "soak.safetensors"))
        with open(ref, "rb") as a, open(got, "rb") as b:
            same = a.read() == b.read()
        if not same:
            print("soak: the final parameters differ from the uninterrupted run's:",
                  file=sys.stderr)
            for line in safetensors_diff(ref, got):
                print(f"  {line}", file=sys.stderr)
        print(f"== soak summary (seed {o.seed})")
        exits = {k: "".join(f" {rc} x{c}" for rc, c in sorted(v.items()))
                 for k, v in self.kind_rc.items()}
        kinds = "".join(f" {k} {n} (exit{exits[k]});" for k, n in sorted(self.kind_n.items()))
        print(f"kills: {sum(self.kind_n.values())} of {o.kills}:{kinds}")
        print(f"restarts: {self.attempt - 1}; layouts: "
              + " ".join(f"{k} x{n}" for k, n in sorted(self.layout_n.items())))
        print(f"steps trained: {self.trained} for {o.steps} ({self.trained - o.steps} re-done "
              f"after kills); saves cut short: {self.torn}")
        join = lambda xs: " ".join(map(str, xs)) or "-"
        print(f"checkpoint root at the end: complete step(s) {join(st.complete)}; incomplete: "
              f"{join(st.incomplete)}; set aside (.previous): {join(st.previous)}; temp files: "
              f"{len(st.tmps)}")
        print(f"slowest teardown after a kill: {self.max_took:.1f}s (limit {o.hang_timeout}s); "
              f"reference run {self.ref_s:.1f}s; wall time {time.monotonic() - t_start:.0f}s")
        print(f"final parameters vs the uninterrupted run: "
              f"{'bitwise equal' if same else 'DIFFERENT'}")
        print("what the killed runs printed (numbers as N; blank and ---- lines left out):")
        for line, n in sorted(self.said.items()):
            print(f"  {n:3d} x {line}")
        warns = self.warnings()
        for w in warns:
            print(f"WARNING: {w}")
        if not same:
            raise Failure("final parameters differ")
        if warns and o.strict:
            raise Failure(f"--strict: {len(warns)} warning(s)")
        extra = f" ({len(warns)} warning(s) about files left behind; --strict fails on them)"
        print(f"soak: PASS{extra if warns else ''}")

    def run(self):
        o = self.o
        print(f"soak: seed {o.seed}; {self.pipe_train}")
        layouts = (f"varied ({len(self.layouts)} choices)" if len(self.layouts) > 1
                   else f"fixed ({self.layout_name(self.layouts[0])})")
        print(f"soak: spec {o.spec_arg}, {o.steps} steps, checkpoint every {o.every} (keep "
              f"{o.keep}), {o.kills} kills, "
              f"{'sequential' if o.sequential else f'{o.ranks} ranks'}, layouts: {layouts}",
              flush=True)
        t_start = time.monotonic()
        self.reference()
        self.soak()
        self.summary(t_start)


# --- Command line ------------------------------------------------------------------------------

def whole(minimum):
    def parse(text):
        if not re.fullmatch(r"[0-9]+", text) or int(text) < minimum:
            raise argparse.ArgumentTypeError(f"wants a whole number >= {minimum}, got '{text}'")
        return int(text)
    return parse


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="soak.py", description="Kill-and-resume soak test of pipe_train's checkpoints "
        "(the module docstring says what it checks).")
    ap.add_argument("--ranks", type=whole(1), default=4, help="ranks of the pipelined runs (4)")
    ap.add_argument("--steps", type=whole(1), help="steps to train (2000)")
    ap.add_argument("--every", type=whole(1), default=5, help="checkpoint every K steps (5)")
    ap.add_argument("--keep", type=whole(1), default=2, help="checkpoints kept (2)")
    ap.add_argument("--kills", type=whole(0), help="how many kills (50)")
    ap.add_argument("--seed", type=whole(0), help="seed of every random draw (random, printed)")
    ap.add_argument("--spec", default="tests/pipeline/gate.yaml", help="the spec to train")
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help="which kills, comma-separated (default all: " + ", ".join(KINDS) + ")")
    ap.add_argument("--sequential", action="store_true", help="every run in one process")
    ap.add_argument("--fixed-layout", action="store_true", help="no layout changes")
    ap.add_argument("--hang-timeout", type=whole(1), default=30,
                    help="seconds a killed run may take to end (30)")
    ap.add_argument("--quick", action="store_true", help="400 steps, 10 kills (~1 min)")
    ap.add_argument("--smoke", action="store_true", help="150 steps, 5 kills (~30 s)")
    ap.add_argument("--keep-work", action="store_true", help="keep the temporary directory")
    ap.add_argument("--strict", action="store_true", help="also fail on the WARNINGs")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each run's output")
    o = ap.parse_args(argv)
    size = (150, 5) if o.smoke else (400, 10) if o.quick else (2000, 50)
    o.steps = o.steps if o.steps is not None else size[0]
    o.kills = o.kills if o.kills is not None else size[1]
    if o.seed is None:
        o.seed = int.from_bytes(os.urandom(2), "little")
    o.kinds = o.kinds.split(",")
    for k in o.kinds:
        if k not in KINDS:
            raise Usage(f"--kinds: unknown kind '{k}' (known: {' '.join(KINDS)})")
    o.sequential = o.sequential or o.ranks == 1
    o.spec_arg = o.spec
    if not os.path.isfile(o.spec) and os.path.isfile(os.path.join(REPO, o.spec)):
        o.spec = os.path.join(REPO, o.spec)  # a path in the repository, from elsewhere
    if not os.path.isfile(o.spec):
        raise Usage(f"no such spec: {o.spec}")
    o.spec = os.path.realpath(o.spec)
    return o


def find_pipe_train():
    if os.environ.get("PIPE_TRAIN"):
        path = os.path.realpath(os.environ["PIPE_TRAIN"])
        if not os.path.exists(path):
            raise Usage(f"PIPE_TRAIN={os.environ['PIPE_TRAIN']} does not exist")
        return path
    build = os.path.join(REPO, "build-soak")
    print(f"building {build}/pipe_train (cmake, Release) ...", flush=True)
    steps = [] if os.path.exists(os.path.join(build, "CMakeCache.txt")) else \
        [["cmake", "-S", REPO, "-B", build, "-DCMAKE_BUILD_TYPE=Release"]]
    steps.append(["cmake", "--build", build, "-j", str(os.cpu_count() or 2), "--target",
                  "pipe_train"])
    for cmd in steps:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
        if r.returncode != 0:
            sys.stderr.write(r.stdout.decode("utf-8", "replace"))
            raise Failure("the build failed")
    return os.path.join(build, "pipe_train")


def repeat_line(o):
    line = (f"python3 scripts/soak.py --ranks {o.ranks} --steps {o.steps} --every {o.every} "
            f"--keep {o.keep} --kills {o.kills} --spec {o.spec_arg} --kinds {','.join(o.kinds)}")
    line += " --sequential" * o.sequential + " --fixed-layout" * o.fixed_layout
    return f"{line} --seed {o.seed}"


def on_signal(signum, frame):
    raise KeyboardInterrupt


def main(argv):
    try:
        o = parse_args(argv)
        pipe_train = find_pipe_train()
    except Usage as e:
        print(f"soak.py: {e}", file=sys.stderr)
        return 2
    except Failure as e:
        print(f"soak: FAIL: {e}", file=sys.stderr)
        return 1
    os.chdir(REPO)  # specs name their data relative to the repository root (examples/data/...)
    os.environ.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")  # bitwise needs 1 thread
    if os.geteuid() == 0:
        os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    signal.signal(signal.SIGTERM, on_signal)  # the cleanup below runs on SIGTERM too
    s = Soak(o, pipe_train)
    try:
        s.run()
        return 0
    except Failure as e:
        print(f"soak: FAIL: {e}", file=sys.stderr)
        print(f"soak: repeat with: {repeat_line(o)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("soak: interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second signal must not cut the cleanup
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        s.cleanup()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
