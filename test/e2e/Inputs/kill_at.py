"""Runs a command and kills it (SIGKILL) as soon as it prints a line that
starts with PREFIX; prints the lines it got and how it ended.

    kill_at.py PREFIX COMMAND...
"""
import signal
import subprocess
import sys

prefix, cmd = sys.argv[1], sys.argv[2:]
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
for line in p.stdout:
    print(line, end="")
    if line.startswith(prefix):
        p.send_signal(signal.SIGKILL)
        break
p.wait()
print("exit:", "SIGKILL" if p.returncode == -signal.SIGKILL else p.returncode)
