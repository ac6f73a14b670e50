#!/usr/bin/env python3
"""Renders zcc/zrun HTML pages in headless Chromium and checks what it drew.

  render_page.py PAGE.html OUT.png [--min-colored FRACTION] [--fragment F]
                 [--dom DOM.html] [--size WxH]

- Loads the page twice from file:// in Debian's chromium --headless (no
  network: the pages inline everything): once dumping the DOM after its
  scripts ran, once taking a 1280x2000 screenshot to OUT.png.
- Fails on any console message (the pages log nothing; a script error is
  one), on <body data-error>, and unless the page set <body data-drawn="yes">
  (its last statement, after every chart).
- --fragment opens PAGE.html#F (the trace page's #from=A&to=B window);
  --dom saves the DOM after the scripts ran (for checks of the page's
  tables); --size sets the window (default 1280x2000).
- Fails unless the PNG holds drawn content: at least FRACTION (default 2%)
  of its pixels neither white nor gray (chart fills, lines, boxes).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

from PIL import Image


def fail(msg):
    print("render_page: " + msg, file=sys.stderr)
    sys.exit(1)


def chromium(args, profile):
    exe = shutil.which("chromium") or fail("chromium not found (apt install chromium)")
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--no-first-run", "--user-data-dir=" + profile, "--enable-logging=stderr", "--v=0",
           "--virtual-time-budget=10000"] + args
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    console = [l for l in p.stderr.splitlines() if ":CONSOLE" in l]
    if console:
        fail("console output from the page:\n  " + "\n  ".join(console))
    if p.returncode:
        fail("chromium exited %d: %s" % (p.returncode, p.stderr[-2000:]))
    return p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("page")
    ap.add_argument("png")
    ap.add_argument("--min-colored", type=float, default=0.02)
    ap.add_argument("--fragment", default="")
    ap.add_argument("--dom", default="")
    ap.add_argument("--size", default="1280x2000")
    a = ap.parse_args()
    url = "file://" + os.path.abspath(a.page) + ("#" + a.fragment if a.fragment else "")
    with tempfile.TemporaryDirectory() as profile:
        dom = chromium(["--dump-dom", url], profile)
        if a.dom:
            with open(a.dom, "w") as f:
                f.write(dom)
        body = re.search(r"<body([^>]*)>", dom)
        if not body:
            fail("no <body> in the rendered DOM")
        if "data-error" in body.group(1):
            fail("the page reported an error: " + body.group(1))
        if 'data-drawn="yes"' not in body.group(1):
            fail("the page did not finish drawing (no data-drawn on <body>)")
        chromium(["--window-size=" + a.size.replace("x", ","), "--screenshot=" + os.path.abspath(a.png), url],
                 profile)
    img = Image.open(a.png).convert("RGB")
    w, h = img.size
    px = img.getdata()
    colored = sum(1 for r, g, b in px if max(r, g, b) - min(r, g, b) > 40)
    frac = colored / float(w * h)
    if frac < a.min_colored:
        fail("%s: %.2f%% of the pixels drawn in color, expected at least %.2f%%"
             % (a.png, 100 * frac, 100 * a.min_colored))
    print("render_page: %s drawn, %dx%d, %.1f%% colored pixels, no console output"
          % (os.path.basename(a.page), w, h, 100 * frac))


if __name__ == "__main__":
    main()
