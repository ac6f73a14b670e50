"""Writes a copy of an examples/models export with the export record that tools/zcc-export would
write for it (zcc.parameters from references.json's 'trainable', and the given zcc.padding_idx /
zcc.aux_loss), so that a test can compile it with no --frozen, --padding-idx or --aux-loss.

    with_record.py EXAMPLES MODEL OUT.onnx [padding_idx=JSON] [aux_loss=JSON]
"""
import json, os, sys

import onnx

examples, model, out = sys.argv[1:4]
m = onnx.load(os.path.join(examples, "models", model + ".onnx"))
refs = json.load(open(os.path.join(examples, "models", "references.json")))["models"][model]
record = {"zcc.parameters": json.dumps(refs["export"]["trainable"])}
for arg in sys.argv[4:]:
    key, _, value = arg.partition("=")
    record["zcc." + key] = value
for key, value in record.items():
    m.metadata_props.add(key=key, value=value)
onnx.save(m, out)
