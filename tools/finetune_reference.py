"""The PyTorch side of the fine-tuning round trip (issue 19; docs/finetune.md).
Runs on the GPU machine (PyTorch, transformers, onnx, onnxruntime).

    finetune_reference.py save DIR TOKENS_PREFIX
        A small Llama (random init, tied embeddings) saved with save_pretrained
        to DIR/hf; tools/zcc-export writes DIR/export/model.onnx (+ record);
        onnxruntime's logits of the export against the model's; and the
        reference: PyTorch fine-tuning DIR/hf for 20 AdamW steps on the packed
        stream TOKENS_PREFIX.bin (EOS 2, prompt mask TOKENS_PREFIX.prompt.bin)
        exactly as zrun feeds it to 2 ranks of 2 sequences -> DIR/reference.json.
    finetune_reference.py save-large DIR SEQ
        The Llama-3.2-1B shape (random init, seed 0) saved with save_pretrained
        to DIR/Llama-3.2-1B-shape: docs/finetune.md's model.
    finetune_reference.py reload HF_DIR LOGITS.npy TOKENS_PREFIX [HF_DIR2 ...]
        from_pretrained(HF_DIR) (what zrun export --hf wrote): its logits on the
        first 2 sequences against zrun's (LOGITS.npy); more folders (bf16,
        sharded) load too and are compared with the first.
"""
import json, os, subprocess, sys
import numpy as np
import torch
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "test", "e2e", "Inputs"))
sys.path.insert(0, here)
from packed_tokens import pack  # noqa: E402

SEQ, MICRO, WORLD, STEPS, LR, WD, EOS = 32, 2, 2, 20, 1e-3, 0.01, 2


def batches(prefix):
    t = np.fromfile(prefix + ".bin", np.uint16)
    p = np.fromfile(prefix + ".prompt.bin", np.uint8)
    return lambda first, count: [torch.from_numpy(a) for a in pack(t, p, SEQ, first, count, EOS)]


def save(d, prefix):
    from transformers import LlamaConfig, LlamaForCausalLM
    import transformers
    print("torch", torch.__version__, "transformers", transformers.__version__)
    torch.manual_seed(0)
    c = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                    max_position_embeddings=64, rms_norm_eps=1e-6, tie_word_embeddings=True,
                    attention_dropout=0.0, bos_token_id=1, eos_token_id=EOS)
    m = LlamaForCausalLM(c)
    m.save_pretrained(os.path.join(d, "hf"))
    print("saved", sorted(os.listdir(os.path.join(d, "hf"))))
    os.makedirs(os.path.join(d, "export"), exist_ok=True)
    onnx_path = os.path.join(d, "export", "model.onnx")
    r = subprocess.run([sys.executable, os.path.join(here, "zcc-export"), os.path.join(d, "hf"),
                        "-o", onnx_path, "--seq", str(SEQ), "--batch", str(MICRO)],
                       capture_output=True, text=True)
    print(r.stdout[-3000:], r.stderr[-3000:])
    if r.returncode:
        sys.exit("zcc-export failed")
    import onnx, onnxruntime as ort
    g = onnx.load(onnx_path, load_external_data=False)
    record = {p.key: p.value[:300] for p in g.metadata_props}
    print("record", json.dumps(record, indent=1))
    get = batches(prefix)
    x, _ = get(0, 3)  # batch 3: the dynamic batch
    hf = LlamaForCausalLM.from_pretrained(os.path.join(d, "hf")).float().eval()
    with torch.no_grad():
        want = hf(input_ids=x, use_cache=False).logits.numpy()
    s = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    got = s.run(None, {s.get_inputs()[0].name: x.numpy()})[0]
    print("onnxruntime vs PyTorch logits: max abs diff %.3g" % np.abs(got - want).max())
    # The reference trajectory: the same global batches zrun's ranks take
    # (rank r of step k: micro-batch (k * WORLD + r), MICRO sequences), each
    # rank's loss the mean over its unmasked labels, the gradient the ranks'
    # mean (DeepSpeed's data parallelism).
    torch.manual_seed(0)
    model = LlamaForCausalLM.from_pretrained(os.path.join(d, "hf"),
                                             attn_implementation="eager").float()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=WD)
    losses, norms = [], []
    for k in range(STEPS):
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for r in range(WORLD):
            xb, yb = get((k * WORLD + r) * MICRO, MICRO)
            logits = model(input_ids=xb, use_cache=False).logits
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), yb.reshape(-1),
                                   ignore_index=-100) / WORLD
            loss.backward()
            total += loss.item()
        norms.append(torch.sqrt(sum((p.grad.double() ** 2).sum()
                                    for p in model.parameters())).item())
        opt.step()
        losses.append(total)
    print("reference losses", ["%.6f" % v for v in losses[:3]], "...", "%.6f" % losses[-1])
    # The layout of test/Inputs/check_trajectory.py's references.
    json.dump({"models": {"finetune-llama": {
        "trajectories": {"zero3-2ranks": {"loss": losses, "grad_norm": norms}},
        "seq": SEQ, "micro": MICRO, "world": WORLD, "lr": LR, "weight_decay": WD, "eos": EOS}}},
        open(os.path.join(d, "reference.json"), "w"), indent=1)


def save_large(d, seq):
    """The guide's model (docs/finetune.md): the Llama-3.2-1B shape, random
    init with seed 0 (the GPU machine has no network to fetch the real
    weights), saved as save_pretrained does into DIR/Llama-3.2-1B-shape."""
    import time
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    c = LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                    num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                    tie_word_embeddings=True, max_position_embeddings=seq, rope_theta=500000.0,
                    rms_norm_eps=1e-5, attention_dropout=0.0, bos_token_id=128000,
                    eos_token_id=128001)
    t0 = time.time()
    LlamaForCausalLM(c).save_pretrained(os.path.join(d, "Llama-3.2-1B-shape"))
    print("saved %s in %.1f s" % (os.path.join(d, "Llama-3.2-1B-shape"), time.time() - t0))


def reload(dirs, logits_path, prefix):
    from transformers import AutoModelForCausalLM
    want = np.load(logits_path)
    x, _ = batches(prefix)(0, want.shape[0])
    first = None
    for d in dirs:
        for attn in ("sdpa", "eager"):
            m = AutoModelForCausalLM.from_pretrained(d, attn_implementation=attn).float().eval()
            with torch.no_grad():
                got = m(input_ids=x, use_cache=False).logits.numpy()
            print("%s (%s): %s; logits vs zrun's: max abs diff %.3g (max |logit| %.3g)" % (
                d, attn, sorted(os.listdir(d)), np.abs(got - want).max(), np.abs(want).max()))
        if first is None:
            first = got
        else:
            print("  vs the first folder's: max abs diff %.3g" % np.abs(got - first).max())


if __name__ == "__main__":
    if sys.argv[1] == "save":
        save(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "save-large":
        save_large(sys.argv[2], int(sys.argv[3]))
    else:
        reload([sys.argv[2]] + sys.argv[5:], sys.argv[3], sys.argv[4])
