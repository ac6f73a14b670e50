#!/usr/bin/env python3
"""Checks a zrun --trace file against the trace-event format and the run.

  check_trace.py TRACE.json --schema SCHEMA.json --profile PROFILE.txt
                 --ranks W --steps A:B [--accum K]

- The file validates against SCHEMA (JSON Schema, python3-jsonschema).
- Every rank has its process and its tracks named; every traced step of
  every rank holds each instruction of the plan (as many as --profile
  counted, "in N instructions") exactly once per program run on the compute
  track; each async collective is also a slice on the communication track,
  and nothing else is.
- Rank 0's compute-track time per kind, summed over the traced steps and
  divided by their count, equals --profile's "ms/step" column (the same
  steps profiled: --trace-steps 1:N with --steps N).
Exits non-zero with the first mismatch.
"""
import argparse
import collections
import json
import re
import sys

try:
    import jsonschema  # python3-jsonschema (scripts/setup.sh); the GPU machine may lack it
except ImportError:
    jsonschema = None


def fail(msg):
    print("check_trace: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--schema", required=True)
    ap.add_argument("--profile", required=True)
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--steps", required=True)
    ap.add_argument("--accum", type=int, default=1)
    a = ap.parse_args()
    first, last = (int(x) for x in a.steps.split(":"))
    steps = list(range(first, last))

    trace = json.load(open(a.trace))
    if jsonschema:
        jsonschema.validate(trace, json.load(open(a.schema)))
    schema = "schema valid" if jsonschema else "schema not checked (no jsonschema module)"

    events = trace["traceEvents"]

    names = {(e["pid"], e.get("tid"), e["name"]): e["args"] for e in events if e["ph"] == "M"}
    for r in range(a.ranks):
        if names.get((r, None, "process_name"), {}).get("name") != "rank %d" % r:
            fail("rank %d has no process_name 'rank %d'" % (r, r))
        for tid, track in enumerate(["steps", "compute", "communication", "copy"]):
            if names.get((r, tid, "thread_name"), {}).get("name") != track:
                fail("rank %d: track %d is not named '%s'" % (r, tid, track))

    profile = open(a.profile).read()
    m = re.search(r"profile: [0-9.]+ ms per step in (\d+) instructions", profile)
    if not m:
        fail("no profile line in " + a.profile)
    instructions = int(m.group(1))
    per_kind = {k: float(v) for k, v in
                re.findall(r"^  ([a-z_0-9]+) +([0-9.]+) +[0-9.]+% +\d+$", profile, re.M)}
    if not per_kind:
        fail("no per-kind rows in " + a.profile)

    slices = [e for e in events if e["ph"] == "X"]
    for r in range(a.ranks):
        mine = [e for e in slices if e["pid"] == r]
        got_steps = sorted({e["args"]["step"] for e in mine if e["tid"] == 0 and e["cat"] == "step"})
        if got_steps != steps:
            fail("rank %d: traced steps %s, expected %s" % (r, got_steps, steps))
        for k in steps:
            compute = [e for e in mine if e["tid"] == 1 and e["args"]["step"] == k]
            runs = collections.Counter((e["args"]["program"], e["args"]["index"]) for e in compute)
            if len(runs) != instructions:
                fail("rank %d step %d: %d instructions on the compute track, the profile has %d"
                     % (r, k, len(runs), instructions))
            for (program, index), n in runs.items():
                want = a.accum if program == "micro_step" else 1
                if n != want:
                    fail("rank %d step %d: %s:%d ran %d times on the compute track, expected %d"
                         % (r, k, program, index, n, want))
            comm = [e for e in mine if e["tid"] == 2 and e["args"]["step"] == k]
            for e in comm:
                if e["cat"] != "collective" or not e["args"]["async"]:
                    fail("rank %d step %d: %s on the communication track is not an async "
                         "collective" % (r, k, e["name"]))
            started = sorted((e["args"]["program"], e["args"]["index"]) for e in compute
                             if e["cat"] == "collective" and e["args"]["async"])
            talked = sorted((e["args"]["program"], e["args"]["index"]) for e in comm)
            if started != talked:
                fail("rank %d step %d: async collectives %s, communication slices %s"
                     % (r, k, started, talked))
            for e in compute:
                if not e["name"] or e["dur"] < 0:
                    fail("rank %d: bad slice %s" % (r, e))
    totals = collections.defaultdict(float)
    for e in slices:
        if e["pid"] == 0 and e["tid"] == 1:
            totals[e["name"]] += e["dur"] / 1000.0
    for kind, ms in per_kind.items():
        traced = totals.get(kind, 0.0) / len(steps)
        if abs(traced - ms) > 0.0015 + 1e-4 * ms:
            fail("kind %s: %.4f ms/step in the trace, %.3f in the profile" % (kind, traced, ms))
    if set(totals) != set(per_kind):
        fail("kinds in the trace %s, in the profile %s" % (sorted(totals), sorted(per_kind)))
    print("check_trace: %d ranks, steps %d-%d, %d instructions a step, %d kinds match the profile"
          ", %s" % (a.ranks, first, last - 1, instructions, len(per_kind), schema))


if __name__ == "__main__":
    main()
