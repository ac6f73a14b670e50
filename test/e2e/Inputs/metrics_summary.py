"""Summarizes a zrun --metrics file: every line must be complete JSON.

Prints 'steps N (first A, last B)' for the step records and, if the file ends
with an event record, 'event EVENT after S steps: REASON'.
"""
import json
import sys

steps, event = [], None
with open(sys.argv[1]) as f:
    for n, line in enumerate(f, 1):
        record = json.loads(line)  # a line cut mid-record fails here
        if event is not None:
            sys.exit(f"line {n}: a record after the event record")
        if "event" in record:
            event = record
        else:
            steps.append(record["step"])
print(f"steps {len(steps)}" + (f" (first {steps[0]}, last {steps[-1]})" if steps else ""))
if event is not None:
    print(f"event {event['event']} after {event['steps_done']} steps: {event['reason']}")
