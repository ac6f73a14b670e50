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


def pending(pid, signum):
    """Whether |signum| is still pending for |pid| (not yet taken by a handler)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("SigPnd:", "ShdPnd:")) and int(line.split()[1], 16) >> (signum - 1) & 1:
                    return True
    except OSError:
        pass
    return False


for k in range(count):
    p.send_signal(sig)
    # Two signals sent before the process runs merge into one: let the
    # handler take each before the next (on a loaded machine that is not a
    # matter of a millisecond).
    deadline = time.time() + 10
    while k + 1 < count and pending(p.pid, sig) and time.time() < deadline:
        time.sleep(0.0002)
out, err = p.communicate()
code = p.returncode if p.returncode >= 0 else 128 - p.returncode
print(f"exit {code}")
print(err, end="")
