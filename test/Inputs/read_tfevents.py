#!/usr/bin/env python3
"""Reads TensorBoard event files as TensorBoard would, independently of zrun.

  read_tfevents.py DIR [METRICS.jsonl]

- Every file named *tfevents* in DIR: TFRecord framing (uint64 length,
  masked CRC32C of it, data, masked CRC32C of the data), the CRCs checked
  with python3-crc32c (not zrun's ISA-L);
- each record decoded as tensorflow.Event by TensorFlow's field numbers
  (wall_time 1 double, step 2 int64, file_version 3, summary 5; Summary.value
  1; Value.tag 1, simple_value 2 float), with a hand-written wire-format
  reader, not the .proto zrun compiled;
- the first record's file_version is "brain.Event:2"; with METRICS, each
  step's train/loss, train/grad_norm and train/learning_rate equal the
  metrics file's (float32 rounding).
Prints a summary line; exits non-zero on any mismatch.
"""
import glob
import json
import os
import struct
import sys

import crc32c


def fail(msg):
    print("read_tfevents: " + msg, file=sys.stderr)
    sys.exit(1)


def masked(data):
    c = crc32c.crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, i


def fields(buf):
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(buf, i)
        elif wire == 1:
            v, i = buf[i:i + 8], i + 8
        elif wire == 2:
            n, i = varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wire == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            fail("unexpected wire type %d" % wire)
        yield num, wire, v


def event(buf):
    e = {"values": {}}
    for num, wire, v in fields(buf):
        if num == 1 and wire == 1:
            e["wall_time"] = struct.unpack("<d", v)[0]
        elif num == 2 and wire == 0:
            e["step"] = v
        elif num == 3 and wire == 2:
            e["file_version"] = v.decode()
        elif num == 5 and wire == 2:
            for snum, _, value in fields(v):
                if snum != 1:
                    continue
                tag, simple = None, None
                for vnum, vwire, x in fields(value):
                    if vnum == 1 and vwire == 2:
                        tag = x.decode()
                    elif vnum == 2 and vwire == 5:
                        simple = struct.unpack("<f", x)[0]
                e["values"][tag] = simple
    return e


def records(path):
    data = open(path, "rb").read()
    i = 0
    while i < len(data):
        if i + 12 > len(data):
            fail("%s: a truncated record header at byte %d" % (path, i))
        header = data[i:i + 8]
        (n,) = struct.unpack("<Q", header)
        (hcrc,) = struct.unpack("<I", data[i + 8:i + 12])
        if hcrc != masked(header):
            fail("%s: bad length CRC at byte %d" % (path, i))
        body = data[i + 12:i + 12 + n]
        (dcrc,) = struct.unpack("<I", data[i + 12 + n:i + 16 + n])
        if len(body) != n or dcrc != masked(body):
            fail("%s: bad data CRC at byte %d" % (path, i))
        yield body
        i += 16 + n


def main():
    files = sorted(glob.glob(os.path.join(sys.argv[1], "*tfevents*")))
    if not files:
        fail("no event files in " + sys.argv[1])
    steps = []
    for f in files:
        evs = [event(r) for r in records(f)]
        if not evs or evs[0].get("file_version") != "brain.Event:2":
            fail("%s: the first record is not the file version" % f)
        steps += [e for e in evs[1:]]
    tags = sorted({t for e in steps for t in e["values"]})
    if len(sys.argv) > 2:
        metrics = [json.loads(l) for l in open(sys.argv[2]) if l.strip() and '"step"' in l]
        if len(metrics) != len(steps):
            fail("%d step events, %d metrics lines" % (len(steps), len(metrics)))
        for e, m in zip(steps, metrics):
            if e["step"] != m["step"] + 1:
                fail("event step %d for metrics step %d" % (e["step"], m["step"]))
            for tag, key in (("train/loss", "loss"), ("train/grad_norm", "grad_norm"),
                             ("train/learning_rate", "lr")):
                want = struct.unpack("<f", struct.pack("<f", m[key]))[0]
                if e["values"].get(tag) != want:
                    fail("step %d: %s %r, metrics %r" % (e["step"], tag, e["values"].get(tag), m[key]))
    print("read_tfevents: %d files, %d step events, CRCs good, tags: %s%s"
          % (len(files), len(steps), " ".join(tags),
             "; loss, grad norm and lr equal the metrics" if len(sys.argv) > 2 else ""))


if __name__ == "__main__":
    main()
