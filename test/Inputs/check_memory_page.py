#!/usr/bin/env python3
"""zcc --emit=memory-html against zcc --emit=report, plan by plan.

  check_memory_page.py ZCC MODEL OUTDIR -- FLAGS [-- FLAGS ...]

For each flag set: compiles MODEL twice (--emit=report, --emit=memory-html),
reads the page's embedded data (<script id="data">) and checks that
- its peak equals the report's 'peak' row (bytes), and the device arena
  it draws is the report's 'activations+workspace' row;
- every drawn buffer lies inside its arena, lives within the step, and the
  live bytes never exceed the high-water mark;
- the buffers listed live at the peak add up to no more than the arena.
Prints one line per plan; exits non-zero at the first mismatch.
"""
import json
import re
import subprocess
import sys


def fail(msg):
    print("check_memory_page: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    zcc, model, out = sys.argv[1:4]
    rest = sys.argv[4:]
    sets, cur = [], None
    for a in rest:
        if a == "--":
            cur = []
            sets.append(cur)
        else:
            cur.append(a)
    for n, flags in enumerate(sets):
        base = [zcc, model, "--loss", "cross-entropy"] + flags
        report = subprocess.run(base + ["--emit=report", "-o", "-"], capture_output=True,
                                text=True)
        if report.returncode:
            fail("zcc %s --emit=report failed: %s" % (" ".join(flags), report.stderr))
        page_path = "%s/memory-%d.html" % (out, n)
        page = subprocess.run(base + ["--emit=memory-html", "-o", page_path],
                              capture_output=True, text=True)
        if page.returncode:
            fail("zcc %s --emit=memory-html failed: %s" % (" ".join(flags), page.stderr))
        html = open(page_path).read()
        m = re.search(r'<script id="data" type="application/json">(.*?)</script>', html, re.S)
        if not m:
            fail("%s: no data in the page" % page_path)
        d = json.loads(m.group(1))
        row = lambda name: int(re.search(r"^  %s +(\d+) B" % re.escape(name), report.stdout,
                                         re.M).group(1))
        peak, device = row("peak"), row("activations+workspace")
        if d["peak_bytes"] != peak:
            fail("%s: the page's peak %d, the report's %d" % (" ".join(flags), d["peak_bytes"], peak))
        if d["arenas"]["device"] != device or d["peak"]["device_allocated"] != device:
            fail("%s: device arena %d (drawn high-water %d), the report's %d"
                 % (" ".join(flags), d["arenas"]["device"], d["peak"]["device_allocated"], device))
        steps = len(d["timeline"])
        for b in d["buffers"]:
            size = d["arenas"][b["arena"]]
            if b["offset"] < 0 or b["offset"] + b["bytes"] > max(size, 0) + 64:
                fail("%s: buffer %s [%d, %d) outside its %s arena of %d"
                     % (" ".join(flags), b["name"], b["offset"], b["offset"] + b["bytes"],
                        b["arena"], size))
            if "first" in b and not (0 <= b["first"] <= b["last"] < steps):
                fail("%s: buffer %s lives %s-%s of %d" % (" ".join(flags), b["name"], b["first"],
                                                          b["last"], steps))
        for t in d["timeline"]:
            if t["live"] > t["high_water"] or sum(t["by_kind"].values()) < t["live"]:
                fail("%s: %s:%d live %d, high-water %d" % (" ".join(flags), t["program"],
                                                           t["index"], t["live"], t["high_water"]))
        if sum(b["bytes"] for b in d["peak"]["live"]) < d["timeline"][d["peak"]["position"]]["live"]:
            fail("%s: the buffers listed at the peak miss some of its bytes" % " ".join(flags))
        kinds = sorted({b["kind"] for b in d["peak"]["live"]})
        print("plan %d (%s): peak %d = report, device arena %d, %d instructions, live at the "
              "peak: %s" % (n, " ".join(flags), peak, device, steps, ", ".join(kinds)))


if __name__ == "__main__":
    main()
