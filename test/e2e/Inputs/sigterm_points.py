"""SIGTERM at random points of a checkpointing run (zrun train).

usage: sigterm_points.py ZRUN PLAN IDS LABELS WORKDIR [RUNS]

Times an uninterrupted run of N steps, then RUNS times: starts the same run
with --checkpoint-dir and --metrics, sends SIGTERM after a random delay
within that time (counted from when zrun's handler is installed, at the
start of main; a run that ends before its signal shortens the time for the
next ones), and checks that the run
  - exits 0 (a preempted job that saved),
  - leaves complete metrics: steps 0..K-1, then {"event": "stopped", K},
  - leaves a complete checkpoint step-K that `latest` names,
and that resuming it to the end appends the remaining steps to the same
metrics file with the uninterrupted run's step, loss, grad_norm and lr, bit
for bit.
"""
import json
import os
import random
import signal
import subprocess
import sys
import time

zrun, plan, ids, labels, work = sys.argv[1:6]
runs = int(sys.argv[6]) if len(sys.argv) > 6 else 20
steps = 40
base = [zrun, "train", plan, "--data", f"input_ids={ids}", "--data", f"labels={labels}",
        "--steps", str(steps)]
keys = ("step", "loss", "grad_norm", "lr")


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def fail(run, what):
    sys.exit(f"run {run}: {what}")


def wait_for_handler(pid):
    """Waits until process |pid| catches SIGTERM (its handler is installed
    at the start of main; before that, while the loader runs, no process can
    catch a signal)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("SigCgt:") and int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)):
                        return
        except FileNotFoundError:
            return
        time.sleep(0.001)


start = time.monotonic()
subprocess.run(base + ["--metrics", f"{work}/full.jsonl"], check=True, stdout=subprocess.DEVNULL)
duration = time.monotonic() - start
full = [tuple(r[k] for k in keys) for r in records(f"{work}/full.jsonl")]
assert len(full) == steps

random.seed(20261201)
stopped_at = []
for run in range(runs):
    d = f"{work}/run{run}"
    os.makedirs(d)
    metrics, ck = f"{d}/m.jsonl", f"{d}/ck"
    launched = time.monotonic()
    p = subprocess.Popen(base + ["--metrics", metrics, "--checkpoint-dir", ck, "--save-every", "10"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_for_handler(p.pid)
    time.sleep(random.uniform(0.0, 0.9 * duration))
    finished = p.poll() is not None
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate()
    if finished:
        # The machine got faster than when the run was timed (CI runs tests
        # side by side): the next points are drawn within this run's time.
        duration = min(duration, time.monotonic() - launched)
    if p.returncode != 0:
        fail(run, f"exit {p.returncode}: {err}")
    got = records(metrics)
    if "event" not in got[-1]:
        # Finished before the signal arrived: a complete run, nothing to resume.
        if [tuple(r[k] for k in keys) for r in got] != full:
            fail(run, "finished, but its losses differ from the uninterrupted run")
        continue
    event, done = got[-1], got[:-1]
    k = event["steps_done"]
    if event["event"] != "stopped" or "SIGTERM" not in event["reason"]:
        fail(run, f"last record {event}")
    if [r["step"] for r in done] != list(range(k)):
        fail(run, f"metrics hold steps {[r['step'] for r in done]}, expected 0..{k - 1}")
    with open(f"{ck}/latest") as f:
        if f.read().strip() != f"step-{k}":
            fail(run, f"latest does not name step-{k}")
    if not os.path.exists(f"{ck}/step-{k}/manifest.pb"):
        fail(run, f"step-{k} is incomplete")
    stopped_at.append(k)
    subprocess.run(base + ["--metrics", metrics, "--checkpoint-dir", ck, "--resume", ck],
                   check=True, stdout=subprocess.DEVNULL)
    resumed = [tuple(r[k] for k in keys) for r in records(metrics) if "event" not in r]
    if resumed != full:
        fail(run, f"stopped at {k}: the resumed run's steps differ from the uninterrupted run")

print(f"{len(stopped_at)} of {runs} runs stopped by SIGTERM (at steps {sorted(stopped_at)}), "
      f"{runs - len(stopped_at)} finished first; every stop exited 0 with complete metrics and "
      f"checkpoint, and every resumed run matched the uninterrupted losses bit for bit")
if len(stopped_at) < runs // 2:
    sys.exit("too few runs were stopped: the points are not spread over the run")
