"""Disturbs a zrun run while it trains, for hostile-inputs.test:

    shrink_during_run.py FILE -- zrun train ... --metrics M.jsonl
        once M.jsonl has a step record, truncates FILE (the run's token file) to 1000 bytes
    shrink_during_run.py --signal -- zrun train ... --metrics M.jsonl
        two seconds after M.jsonl appears (the run is past its start), sends SIGTERM

then waits for the run (at most 120 s, then kills it) and prints 'exit N' (with 'within 30 s of
the signal' when it ended that soon after it) and the run's output.
"""
import os, signal, subprocess, sys, time

sep = sys.argv.index("--")
what, cmd = sys.argv[1:sep], sys.argv[sep + 1:]
metrics = cmd[cmd.index("--metrics") + 1]
run = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
deadline = time.time() + 60


def has_record():
    try:
        return any(line.startswith('{"step"') for line in open(metrics))
    except OSError:
        return False


sent = None
while time.time() < deadline and run.poll() is None:
    if what == ["--signal"] and os.path.exists(metrics):
        time.sleep(2)
        run.send_signal(signal.SIGTERM)
        sent = time.time()
        break
    if what != ["--signal"] and has_record():
        os.truncate(what[0], 1000)
        break
    time.sleep(0.02)
try:
    out, _ = run.communicate(timeout=120)
except subprocess.TimeoutExpired:
    run.kill()
    out, _ = run.communicate()
rc = run.returncode if run.returncode >= 0 else 128 - run.returncode
line = "exit %d" % rc
if sent is not None and time.time() - sent < 30:
    line += " within 30 s of the signal"
print(line)
print(out)
