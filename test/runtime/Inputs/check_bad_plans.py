"""Runs `zrun eval` on every plan of a corpus and checks the error.

    check_bad_plans.py ZRUN CORPUS_DIR
Every plan must be rejected with exit code 1 and an error containing the text
that CORPUS_DIR/expected-errors.txt gives for it; a crash, a hang (60 s) or a
success is a failure. Prints 'N malformed plans rejected' or the failures.
"""
import os, subprocess, sys

zrun, corpus = sys.argv[1], sys.argv[2]
failures = 0
lines = [l.split(": ", 1) for l in open(os.path.join(corpus, "expected-errors.txt")) if l.strip()]
for name, text in lines:
    text = text.strip()
    path = os.path.join(corpus, name + ".zplan")
    p = subprocess.run([zrun, "eval", path, "--data", "x=/dev/null"], capture_output=True,
                       text=True, timeout=60)
    if p.returncode != 1 or text not in p.stderr or "Sanitizer" in p.stderr:
        failures += 1
        print(f"FAIL {name}: rc={p.returncode}, expected '{text}', got: {p.stderr.strip()[:400]}")
print(f"{len(lines) - failures} of {len(lines)} malformed plans rejected with the expected error")
sys.exit(1 if failures else 0)
