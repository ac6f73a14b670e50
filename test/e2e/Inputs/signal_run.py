"""Runs a command, sends it SIG (TERM, INT, HUP) COUNT times once it has
printed its first step, and prints its exit status (128 + signal for a
signal's exit) and standard error."""
import signal
import subprocess
import sys
import time

sig, count, cmd = getattr(signal, "SIG" + sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
p.stdout.readline()  # the first step's line: the run is training
for _ in range(count):
    p.send_signal(sig)
    time.sleep(0.001)
out, err = p.communicate()
code = p.returncode if p.returncode >= 0 else 128 - p.returncode
print(f"exit {code}")
print(err, end="")
