"""Dense dispatch of a Hugging Face mixture-of-experts block, for export to a static graph.

Hugging Face's Mixtral block dispatches tokens with data-dependent shapes (the tokens routed to
each expert); a static plan cannot hold those. dense_moe_forward runs every expert on every token
and weights its output by the token's renormalized top-k routing weight for it (0 for the experts
not chosen): the same function of the same parameters, with shapes that do not depend on the
routing, at E/k times the experts' FLOPs. patch(model) installs it on every Mixtral block
(block_sparse_moe or mlp) and checks it against the block's own output.
Used by tools/export_reference_models.py and bench/torch_moe_baseline.py (docs/models.md).
"""
import types

import torch
import torch.nn as nn
import torch.nn.functional as F


def expert_output(block, e, x):
    """Expert e of a Mixtral block on x, for either layout Hugging Face has used: a ModuleList of
    MLPs (w1 gate, w3 up, w2 down) or fused 3-D gate_up_proj/down_proj parameters. Read through
    the module (not captured), so that the exporter sees parameters, not constants."""
    if isinstance(block.experts, nn.ModuleList):
        return block.experts[e](x)
    H = x.shape[-1]
    w = block.experts.gate_up_proj[e]
    h = F.linear(x, w) if w.shape[-1] == H else x @ w
    g, u = h.chunk(2, dim=-1)
    h = block.experts.act_fn(g) * u
    d = block.experts.down_proj[e]
    return F.linear(h, d) if d.shape[0] == H else h @ d


def dense_moe_forward(self, hidden_states):
    """A Mixtral sparse block's forward as dense dispatch: every expert runs on every token and
    its output is weighted by the token's (renormalized top-k) routing weight for it, zero for the
    experts not chosen. The same function of the parameters as the sparse dispatch, with shapes
    that do not depend on the routing (what a static plan needs)."""
    B, T, H = hidden_states.shape
    x = hidden_states.reshape(-1, H)
    r = self.gate(x)  # through the module, so that Hugging Face's output hooks see the logits
    if isinstance(r, tuple) and len(r) == 3:  # a router module: (logits, top-k weights, indices)
        logits, topw, topi = r
        topw = topw.to(x.dtype)
    else:
        logits = r[0] if isinstance(r, tuple) else r
        probs = F.softmax(logits, dim=1, dtype=torch.float)
        k = getattr(self, "top_k", None) or self.gate.top_k
        topw, topi = torch.topk(probs, k, dim=-1)
        # Mixtral renormalizes the k weights; Qwen2-MoE only with norm_topk_prob.
        norm = getattr(self, "norm_topk_prob", getattr(self.gate, "norm_topk_prob", True))
        if norm:
            topw = topw / topw.sum(dim=-1, keepdim=True)
        topw = topw.to(x.dtype)
    E = logits.shape[-1]
    dense = (F.one_hot(topi, E).to(x.dtype) * topw.unsqueeze(-1)).sum(1)
    out = None
    for e in range(E):
        y = expert_output(self, e, x) * dense[:, e:e + 1]
        out = y if out is None else out + y
    # Shared experts, which every token goes through: Qwen2-MoE's one (with its sigmoid gate),
    # DeepSeek's (one MLP n_shared_experts wide).
    if getattr(self, "shared_expert", None) is not None:
        shared = self.shared_expert(x)
        gate = getattr(self, "shared_expert_gate", None)
        out = out + (torch.sigmoid(gate(x)) * shared if gate is not None else shared)
    if getattr(self, "shared_experts", None) is not None:
        out = out + self.shared_experts(x)
    out = out.reshape(B, T, H)
    return (out, logits) if self._zcc_tuple else out


def patch(model, hidden):
    """Installs dense_moe_forward on every MoE block of a Mixtral-style model; checks each against
    the block's own forward on a random input (max abs difference below 1e-5)."""
    n = 0
    for layer in model.model.layers:
        blk = getattr(layer, "block_sparse_moe", None) or getattr(layer, "mlp")
        p = next(blk.parameters())
        x = torch.randn(1, 3, hidden, dtype=p.dtype, device=p.device)
        with torch.no_grad():
            ref = blk(x)
        blk._zcc_tuple = isinstance(ref, tuple)
        blk.forward = types.MethodType(dense_moe_forward, blk)
        with torch.no_grad():
            got = blk(x)
        a = ref[0] if blk._zcc_tuple else ref
        b = got[0] if blk._zcc_tuple else got
        assert float((a - b).abs().max()) < 1e-5, "dense dispatch differs from the block"
        n += 1
    return n
