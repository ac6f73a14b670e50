"""Tabulates bench/gpu-memory.sh's runs: measured device memory per rank vs
zcc's report, host memory, step time (mean of the steps after the first).

    memory_summary.py PLANS_DIR RUNS_DIR PREFIX
"""
import glob, json, os, re, sys

plans, runs, prefix = sys.argv[1:4]
def exposed(name):
    """ms a step the compute stream waits for communication (zrun --profile's
    wait and synchronous collectives), or None without a profile."""
    path = os.path.join(runs, name + ".profile")
    if not os.path.exists(path):
        return None
    kinds = dict(re.findall(r"^\s+(wait|all_gather|reduce_scatter|all_reduce)\s+([0-9.]+)",
                            open(path).read(), re.M))
    return sum(float(v) for v in kinds.values())


print("| plan | device per rank, measured | planned (report) | diff | host (pinned) | step |"
      " exposed communication |")
print("|---|---|---|---|---|---|---|")
for report_path in sorted(glob.glob(os.path.join(plans, prefix + "*.report"))):
    name = os.path.basename(report_path)[:-len(".report")]
    report = open(report_path).read()
    planned = int(re.search(r"^\s*peak\s+(\d+) B", report, re.M).group(1))
    host = re.search(r"^\s*host memory\s+(\d+) B", report, re.M)
    host = int(host.group(1)) if host else 0
    log = os.path.join(runs, name + ".log")
    text = open(log).read() if os.path.exists(log) else ""
    m = re.search(r"device \d+: (\d+) bytes .*? at most(?:, for (\d+) ranks)?", text)
    metrics = os.path.join(runs, name + ".jsonl")
    steps = [json.loads(l) for l in open(metrics)] if os.path.exists(metrics) else []
    if not m or len(steps) < 2:
        print(f"| {name} | FAILED | {planned / 2**30:.2f} GiB | | | | |")
        continue
    ranks = int(m.group(2) or 1)
    measured = int(m.group(1)) / ranks
    step = sum(s["step_ms"] for s in steps[1:]) / (len(steps) - 1)
    print(f"| {name} | {measured / 2**30:.2f} GiB ({int(measured)} B) | {planned / 2**30:.2f} GiB | "
          f"{100 * (measured - planned) / planned:+.2f}% | {host / 2**30:.2f} GiB | {step:.1f} ms | "
          + (f"{e:.1f} ms |" if (e := exposed(name)) is not None else "- |"))
