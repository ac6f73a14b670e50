#!/usr/bin/env python3
"""Checks a zrun trace-page page, as Chromium rendered it, against its trace.

  check_trace_page.py DOM.html TRACE.json...

DOM.html is the page's DOM after its scripts ran (render_page.py --dom).
Its table of time by kind must hold, for every process (rank) of the
traces and every kind on its compute track, the total microseconds and
count computed here from the JSON; <body data-slices> must be the number of
complete events. Prints a summary line; exits 1 on the first mismatch.
"""
import collections
import json
import re
import sys


def fail(msg):
    print("check_trace_page: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    dom_path, traces = sys.argv[1], sys.argv[2:]
    events = []
    for path in traces:
        t = json.load(open(path))
        events += t["traceEvents"] if isinstance(t, dict) else t
    compute = {(e["pid"], e["tid"]) for e in events
               if e["ph"] == "M" and e["name"] == "thread_name" and e["args"]["name"] == "compute"}
    slices = [e for e in events if e["ph"] == "X"]
    want = collections.defaultdict(lambda: [0.0, 0])
    for e in slices:
        if (e["pid"], e.get("tid", 0)) in compute:
            w = want[(e["pid"], e["name"])]
            w[0] += e["dur"]
            w[1] += 1
    dom = open(dom_path).read()
    body = re.search(r"<body([^>]*)>", dom).group(1)
    drawn = re.search(r'data-slices="(\d+)"', body)
    if not drawn or int(drawn.group(1)) != len(slices):
        fail("the page drew %s slices, the traces hold %d" % (drawn and drawn.group(1), len(slices)))
    got = {}
    for attrs in re.findall(r"<td ([^>]*data-kind[^>]*)>", dom):
        a = dict(re.findall(r'data-([a-z]+)="([^"]*)"', attrs))
        got[(int(a["rank"]), a["kind"])] = (float(a["us"]), int(a["count"]))
    if set(got) != set(want):
        fail("kinds differ: page only %s, trace only %s"
             % (sorted(set(got) - set(want)), sorted(set(want) - set(got))))
    for key, (us, n) in want.items():
        if got[key][1] != n or abs(got[key][0] - us) > 1e-3 + 1e-9 * us:
            fail("rank %d %s: page %.3f us (%d), trace %.3f us (%d)"
                 % (key[0], key[1], got[key][0], got[key][1], us, n))
    ranks = len({k[0] for k in want})
    print("check_trace_page: %d slices drawn, %d kinds over %d ranks as in the trace"
          % (len(slices), len({k[1] for k in want}), ranks))


if __name__ == "__main__":
    main()
