#!/usr/bin/env python3
"""Reads the data a zrun page embeds and summarizes it for FileCheck.

  page_data.py DASHBOARD.html METRICS.jsonl   the dashboard against --metrics
  page_data.py MEMORY.html                    a memory page's peak and measured
"""
import json
import re
import sys


def data(path):
    html = open(path).read()
    m = re.search(r'<script id="data" type="application/json">(.*?)</script>', html, re.S)
    if not m:
        sys.exit("page_data: %s has no data" % path)
    return json.loads(m.group(1).replace("<\\/", "</"))


d = data(sys.argv[1])
if len(sys.argv) > 2:
    metrics = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
    recs = d["records"]
    same = len(recs) == len(metrics) and all(
        r["step"] == m["step"] and r["loss"] == m["loss"] and r["grad_norm"] == m["grad_norm"]
        for r, m in zip(recs, metrics))
    print("dashboard: %s, %d records, losses and grad norms %s the metrics file, tflops %s, "
          "mfu %s, memory: %s" % (
              d["state"], len(recs), "equal" if same else "DIFFER from",
              "> 0" if all(r.get("tflops", 0) > 0 for r in recs) else "missing",
              "> 0" if all(r.get("mfu", 0) > 0 for r in recs) else "missing",
              ", ".join(m["label"] for m in recs[-1]["memory"]) if recs else "none"))
else:
    print("memory page: peak %d, measured: %s" % (
        d["peak_bytes"], ", ".join("%s %d" % (m["label"], m["bytes"]) for m in d["measured"])))
