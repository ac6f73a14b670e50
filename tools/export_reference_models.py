"""Export more reference models with exactly the method of ../shared/tools/make_references.py.

Runs on the GPU machine (PyTorch, transformers, onnx, onnxruntime):
    python3 tools/export_reference_models.py MAKE_REFERENCES_PY OUTDIR llama-tiny[,bert-tiny]
It loads the helpers of make_references.py (export, train_ref, lm_case: the same export
settings, data, AdamW trajectories and references.json layout as the shared models) and adds
model shapes that the shared file does not have. Nothing in the method is changed.
"""
import os, sys, json

mr_path, out, which = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
src = open(mr_path).read()
# Keep the helper definitions; drop the driver at the bottom of the file.
src = src.split("which = sys.argv[2]")[0]
sys.argv = [mr_path, out, ""]
ns = {"__name__": "make_references"}
exec(compile(src, mr_path, "exec"), ns)
torch, nn = ns["torch"], ns["nn"]


class LogitsOnly(nn.Module):
    def __init__(s, m):
        super().__init__(); s.m = m

    def forward(s, ids):
        return s.m(input_ids=ids, use_cache=False).logits


def llama(n_layer, hidden, n_head, n_kv, inter, vocab, npos=64):
    """Llama shape: RoPE (Cos/Sin), RMSNorm, SwiGLU, grouped-query attention (n_kv < n_head)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    def mk():
        torch.manual_seed(0)
        c = LlamaConfig(num_hidden_layers=n_layer, hidden_size=hidden, num_attention_heads=n_head,
                        num_key_value_heads=n_kv, intermediate_size=inter, vocab_size=vocab,
                        max_position_embeddings=npos, rms_norm_eps=1e-6, tie_word_embeddings=False,
                        attention_dropout=0.0)
        c._attn_implementation = "eager"
        return LogitsOnly(LlamaForCausalLM(c))
    return mk


def bert(n_layer, hidden, n_head, inter, vocab, npos=64):
    """BERT-style encoder with an MLM head (bidirectional attention, post-LN, GELU-erf)."""
    from transformers import BertConfig, BertForMaskedLM

    def mk():
        torch.manual_seed(0)
        c = BertConfig(num_hidden_layers=n_layer, hidden_size=hidden, num_attention_heads=n_head,
                       intermediate_size=inter, vocab_size=vocab, max_position_embeddings=npos,
                       hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        c._attn_implementation = "eager"
        return LogitsOnly(BertForMaskedLM(c))
    return mk


cases = {
    "llama-tiny": lambda: ns["lm_case"]("llama-tiny", llama(2, 64, 4, 2, 128, 256), 256),
    "bert-tiny": lambda: ns["lm_case"]("bert-tiny", bert(2, 64, 4, 128, 256), 256),
}
import traceback
for w in which:
    try:
        cases[w]()
    except Exception:
        ns["report"][w] = {"error": traceback.format_exc()[-2000:]}
json.dump(ns["report"], open(os.path.join(out, "references.json"), "w"), indent=1)
for k, v in ns["report"].items():
    print(k, json.dumps({kk: vv for kk, vv in v.items() if kk != "trajectories"})[:3000])
    for vn, t in v.get("trajectories", {}).items():
        print(k, vn, ["%.4f" % x for x in t["loss"][:3]], "...", "%.4f" % t["loss"][-1])
