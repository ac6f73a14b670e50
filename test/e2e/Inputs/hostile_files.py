"""Writes the hostile inputs of hostile-inputs.test (issue 49), each a file a red team handed to
zcc or zrun:

    hostile_files.py deep-safetensors OUT          a header whose shape nests 100,000 arrays deep
    hostile_files.py deep-index DIR                an index whose weight_map value nests 200,000
    hostile_files.py deep-trace OUT                a Chrome trace whose args nest 100,000 deep
    hostile_files.py deep-metadata MODEL OUT       MODEL with zcc.config nested 100,000 deep
    hostile_files.py tamper IN OUT overlap|gap|duplicate|size
        IN (a safetensors file) with its header changed: two tensors' ranges overlapping, a
        tensor's range shifted past a gap, a key given twice, a range one element short.
    hostile_files.py manifest-version MANIFEST V   MANIFEST's version field set to V in place
    hostile_files.py external MODEL OUT.onnx LOCATION [OFFSET]
        MODEL (external data beside it) with its first float initializer's external data
        location (and offset) replaced: '../secret.bin', an absolute path, a huge offset.
"""
import json, struct, sys


def deep(n):
    return "[" * n + "]" * n


def write_safetensors_header(path, header_text, data=b""):
    h = header_text.encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)


def tamper(src, dst, how):
    b = open(src, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    meta = header.pop("__metadata__", None)
    names = sorted(header, key=lambda k: header[k]["data_offsets"][0])
    data = b[8 + n:]
    first, second = header[names[0]], header[names[1]]
    if how == "overlap":  # the second tensor starts 4 bytes early (and ends 4 early)
        second["data_offsets"] = [x - 4 for x in second["data_offsets"]]
        for k in names[2:]:
            header[k]["data_offsets"] = [x - 4 for x in header[k]["data_offsets"]]
        data = data[:-4]
    elif how == "gap":  # every tensor after the first moves 8 bytes on (8 bytes of nothing)
        for k in names[1:]:
            header[k]["data_offsets"] = [x + 8 for x in header[k]["data_offsets"]]
        lo = first["data_offsets"][1]
        data = data[:lo] + b"\0" * 8 + data[lo:]
    elif how == "size":  # the first tensor's range one element short, the rest as they were
        first["data_offsets"][1] -= 4
        for k in names[1:]:
            header[k]["data_offsets"] = [x - 4 for x in header[k]["data_offsets"]]
        lo = first["data_offsets"][1]
        data = data[:lo] + data[lo + 4:]
    if meta is not None:
        header = {"__metadata__": meta, **header}
    text = json.dumps(header)
    if how == "duplicate":  # the first key again, with the second tensor's entry
        text = text[:-1] + ", " + json.dumps(names[0]) + ": " + json.dumps(second) + "}"
    write_safetensors_header(dst, text, data)


def main():
    what = sys.argv[1]
    if what == "deep-safetensors":
        write_safetensors_header(sys.argv[2], '{"w": {"dtype": "F32", "shape": ' + deep(100000) +
                                 ', "data_offsets": [0, 4]}}', b"\0" * 4)
    elif what == "deep-index":
        import os
        os.makedirs(sys.argv[2], exist_ok=True)
        with open(os.path.join(sys.argv[2], "model.safetensors.index.json"), "w") as f:
            f.write('{"metadata": {}, "weight_map": {"w": ' + deep(200000) + "}}")
    elif what == "deep-trace":
        with open(sys.argv[2], "w") as f:
            f.write('{"traceEvents": [{"name": "x", "ph": "X", "ts": 0, "dur": 1, "pid": 0, '
                    '"tid": 0, "args": {"a": ' + deep(100000) + "}}]}")
    elif what == "deep-metadata":
        import onnx
        m = onnx.load(sys.argv[2])
        p = m.metadata_props.add()
        p.key, p.value = "zcc.config", '{"a": ' + deep(100000) + "}"
        onnx.save(m, sys.argv[3])
    elif what == "tamper":
        tamper(sys.argv[2], sys.argv[3], sys.argv[4])
    elif what == "manifest-version":
        # Field 1 (version, varint) comes first in what zrun writes: tag 0x08, then the value.
        b = bytearray(open(sys.argv[2], "rb").read())
        assert b[0] == 0x08 and b[1] < 0x80, "the manifest does not start with its version"
        b[1] = int(sys.argv[3])
        open(sys.argv[2], "wb").write(bytes(b))
    elif what == "external":
        import onnx
        from onnx import TensorProto
        m = onnx.load(sys.argv[2], load_external_data=False)
        t = next(t for t in m.graph.initializer if t.data_type == TensorProto.FLOAT and
                 t.data_location == TensorProto.EXTERNAL)
        for kv in t.external_data:
            if kv.key == "location":
                kv.value = sys.argv[4]
            if kv.key == "offset" and len(sys.argv) > 5:
                kv.value = sys.argv[5]
        if len(sys.argv) > 5 and not any(kv.key == "offset" for kv in t.external_data):
            e = t.external_data.add()
            e.key, e.value = "offset", sys.argv[5]
        onnx.save(m, sys.argv[3])
    else:
        raise SystemExit(__doc__)


main()
