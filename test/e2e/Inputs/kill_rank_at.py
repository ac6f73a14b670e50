"""Runs a command and, the first time it prints a line that starts with
PREFIX, kills (SIGKILL) those of its descendant processes whose environment
holds every VAR=VALUE of MATCH (zrun's ranks and node launchers carry RANK,
ZRUN_RANK_OFFSET, ...). With --touch FILE, creates FILE first (a stand-in
ssh can then refuse that host). Prints every line and how the command ended,
and exits with the command's status.

    kill_rank_at.py PREFIX MATCH [--touch FILE] COMMAND...
      MATCH: VAR=VALUE[,VAR=VALUE...]
"""
import os
import signal
import subprocess
import sys

prefix, match, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
touch = None
if cmd[:1] == ["--touch"]:
    touch, cmd = cmd[1], cmd[2:]
wanted = [kv.encode() for kv in match.split(",")]


def parent_of(pid):
    with open(f"/proc/{pid}/stat", "rb") as f:
        # pid (comm) state ppid ...: comm may hold spaces and parentheses
        return int(f.read().rsplit(b")", 1)[1].split()[1])


def descendants(root):
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            p = pid
            while p > 1 and p != root:
                p = parent_of(p)
            if p == root:
                found.append(pid)
        except OSError:
            pass
    return found


def environment(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
done = False
for line in p.stdout:
    print(line, end="", flush=True)
    if not done and line.startswith(prefix):
        done = True
        if touch:
            open(touch, "w").close()
        victims = [pid for pid in descendants(p.pid) if all(w in environment(pid) for w in wanted)]
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        print(f"killed {len(victims)} process(es) with {match}", flush=True)
p.wait()
print("exit:", p.returncode)
sys.exit(p.returncode if p.returncode >= 0 else 128 - p.returncode)
