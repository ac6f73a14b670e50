"""Holds DIR/.lock (flock, as another zrun would, naming a holder) while the
command after '--' runs; prints its exit status and standard error."""
import fcntl
import os
import subprocess
import sys

d, cmd = sys.argv[1], sys.argv[sys.argv.index("--") + 1:]
os.makedirs(d, exist_ok=True)
with open(os.path.join(d, ".lock"), "w") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    f.write("pid 4242 on trainer-7 (zrun)\n")
    f.flush()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
print(f"exit {r.returncode}")
print(r.stderr, end="")
