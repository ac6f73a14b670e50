"""Export more reference models with exactly the method of ../shared/tools/make_references.py.

Runs on the GPU machine (PyTorch, transformers, onnx, onnxruntime):
    python3 tools/export_reference_models.py MAKE_REFERENCES_PY OUTDIR llama-tiny[,bert-tiny]
It loads the helpers of make_references.py (export, train_ref, lm_case: the same export
settings, data, AdamW trajectories and references.json layout as the shared models) and adds
model shapes that the shared file does not have. Nothing in the method is changed; models with
several inputs (T5) or outputs (Mixtral's aux_loss) are exported the same way with every input's
batch dimension dynamic (export_multi).
"""
import os, sys, json

mr_path, out, which = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
src = open(mr_path).read()
# Keep the helper definitions; drop the driver at the bottom of the file.
src = src.split("which = sys.argv[2]")[0]
sys.argv = [mr_path, out, ""]
ns = {"__name__": "make_references"}
exec(compile(src, mr_path, "exec"), ns)
torch, nn, F, np = ns["torch"], ns["nn"], ns["F"], ns["np"]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import moe_dense  # noqa: E402  (the dense dispatch that the MoE exports use)


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


def qwen2(n_layer, hidden, n_head, n_kv, inter, vocab, npos=64):
    """Qwen2 shape: Llama's with biases on q/k/v (a regression case for the decoder lineage)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    def mk():
        torch.manual_seed(0)
        c = Qwen2Config(num_hidden_layers=n_layer, hidden_size=hidden, num_attention_heads=n_head,
                        num_key_value_heads=n_kv, intermediate_size=inter, vocab_size=vocab,
                        max_position_embeddings=npos, rms_norm_eps=1e-6, tie_word_embeddings=False,
                        use_sliding_window=False, attention_dropout=0.0)
        c._attn_implementation = "eager"
        return LogitsOnly(Qwen2ForCausalLM(c))
    return mk


def gemma(n_layer, hidden, n_head, n_kv, head_dim, inter, vocab, npos=64, attn="eager"):
    """Gemma shape: embeddings scaled by sqrt(hidden), (1 + w) RMSNorm, GeGLU (tanh GELU), tied
    embeddings, multi-query attention."""
    from transformers import GemmaConfig, GemmaForCausalLM

    def mk():
        torch.manual_seed(0)
        c = GemmaConfig(num_hidden_layers=n_layer, hidden_size=hidden, num_attention_heads=n_head,
                        num_key_value_heads=n_kv, head_dim=head_dim, intermediate_size=inter,
                        vocab_size=vocab, max_position_embeddings=npos, rms_norm_eps=1e-6,
                        hidden_activation="gelu_pytorch_tanh", attention_dropout=0.0,
                        pad_token_id=0, bos_token_id=1, eos_token_id=2)
        c._attn_implementation = attn
        return LogitsOnly(GemmaForCausalLM(c))
    return mk


def gemma2(n_layer, hidden, n_head, n_kv, head_dim, inter, vocab, npos=64, softcap=50.0, window=4096):
    """Gemma 2 shape: Gemma's, plus logit soft-capping of the attention scores
    (attn_logit_softcapping) and of the final logits, sliding-window attention on every other
    layer, and four norms a layer. Eager attention (transformers' SDPA takes no soft-capping)."""
    from transformers import Gemma2Config, Gemma2ForCausalLM

    def mk():
        torch.manual_seed(0)
        c = Gemma2Config(num_hidden_layers=n_layer, hidden_size=hidden, num_attention_heads=n_head,
                         num_key_value_heads=n_kv, head_dim=head_dim, intermediate_size=inter,
                         vocab_size=vocab, max_position_embeddings=npos, rms_norm_eps=1e-6,
                         hidden_activation="gelu_pytorch_tanh", attention_dropout=0.0,
                         attn_logit_softcapping=softcap, final_logit_softcapping=30.0,
                         sliding_window=window, query_pre_attn_scalar=head_dim,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2)
        c._attn_implementation = "eager"
        return LogitsOnly(Gemma2ForCausalLM(c))
    return mk


def phi3(n_layer, hidden, n_head, n_kv, inter, vocab, npos=64):
    """Phi-3 shape: one fused qkv projection and one fused gate/up projection, sliced in the
    graph; SDPA attention (transformers' default), here with 96-wide heads as Phi-3-mini's."""
    from transformers import Phi3Config, Phi3ForCausalLM

    def mk():
        torch.manual_seed(0)
        c = Phi3Config(num_hidden_layers=n_layer, hidden_size=hidden, num_attention_heads=n_head,
                       num_key_value_heads=n_kv, intermediate_size=inter, vocab_size=vocab,
                       max_position_embeddings=npos, attention_dropout=0.0, resid_pdrop=0.0,
                       embd_pdrop=0.0, tie_word_embeddings=False, pad_token_id=0,
                       bos_token_id=1, eos_token_id=2)
        c._attn_implementation = "sdpa"
        return LogitsOnly(Phi3ForCausalLM(c))
    return mk


def export_multi(model, args, names_in, names_out, path):
    """make_references.export's method (dynamo, opset 18, optimize=False, no external data; the
    TorchScript exporter as the fallback) for a model with several inputs, each batch-dynamic."""
    model.eval()
    errs = []
    batch = torch.export.Dim("batch", min=1, max=1024)
    dyn = tuple({0: batch} for _ in args)
    axes = {n: {0: "batch"} for n in names_in + names_out}
    onnx = ns["onnx"]
    for kw in (dict(dynamo=True, external_data=False, opset_version=18, optimize=False,
                    dynamic_shapes=dyn),
               dict(dynamo=False, opset_version=17, do_constant_folding=False, dynamic_axes=axes,
                    training=torch.onnx.TrainingMode.TRAINING)):
        try:
            torch.onnx.export(model, args, path, input_names=names_in, output_names=names_out, **kw)
            m = onnx.load(path)
            inits = {i.name for i in m.graph.initializer}
            trainable, missing = [], []
            groups = {}
            for n, p in model.named_parameters(remove_duplicate=False):
                groups.setdefault(id(p), []).append(n)
            for names in groups.values():
                hit = [n for n in names if n in inits]
                (trainable.append(hit[0]) if hit else missing.append(names))
            pn = set(n for names in groups.values() for n in names)
            ins = [(i.name, [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim])
                   for i in m.graph.input]
            return dict(graph_inputs=ins, trainable=trainable, missing_params=missing,
                        initializers=len(inits),
                        float_inits_not_params=[i.name for i in m.graph.initializer
                                                if i.data_type == 1 and i.name not in pn][:20],
                        kw=str(kw), opset=[(o.domain, o.version) for o in m.opset_import],
                        ops=sorted(set(n.op_type for n in m.graph.node)),
                        nodes=len(m.graph.node), size=os.path.getsize(path))
        except Exception as e:
            errs.append(repr(e)[:800])
    return dict(errors=errs)


def generic_case(name, make_model, make_export_model, data, label, loss_fn, names_out, kind,
                 loss_desc, extra_refs=(), B=4):
    """data: {input name: tensor [batches, B, ...]} in the model's argument order; label: the
    labels [batches, B, ...]. The trajectories train make_model (PyTorch's own module); the export
    is of make_export_model (the same parameters; for MoE, the dense dispatch)."""
    names = list(data)
    nb = label.shape[0]
    batches = [tuple(data[n][i] for n in names) + (label[i],) for i in range(nb)]
    torch.manual_seed(0)
    model = make_export_model()
    rec = {"kind": kind, "batch": B, "loss": loss_desc, "inputs": names,
           "params": sum(p.numel() for p in model.parameters())}
    path = os.path.join(ns["OUT"], name + ".onnx")
    args = tuple(data[n][0] for n in names)
    with torch.no_grad():
        out = model.eval()(*args)
        ref = (out[0] if isinstance(out, tuple) else out).numpy()
        pt = make_model().eval()(*args)
        pt = pt[0] if isinstance(pt, tuple) else pt
        rec["export_vs_module_max_abs_diff"] = float((pt - torch.from_numpy(ref)).abs().max())
    rec["export"] = export_multi(model, args, names, names_out, path)
    try:
        rec["ort_max_abs_diff"] = ns["check_ort"](path, {n: data[n][0].numpy() for n in names}, ref)
    except Exception as e:
        rec["ort_error"] = repr(e)[:500]
    for n in names:
        a = data[n].numpy()
        np.save(os.path.join(ns["OUT"], "%s.%s.npy" % (name, n)), a.reshape((-1,) + a.shape[2:]))
    a = label.numpy().astype(np.int64)
    np.save(os.path.join(ns["OUT"], name + ".labels.npy"), a.reshape((-1,) + a.shape[2:]))
    rec["trajectories"] = {}
    for vn, v in ns["VARIANTS"].items():
        losses, gn, lrs = ns["train_ref"](make_model, batches, loss_fn, v)
        rec["trajectories"][vn] = dict(hyper=v, loss=losses, grad_norm=gn, lr=lrs)
    for vn, v, fn in extra_refs:
        losses, gn, lrs = ns["train_ref"](make_model, batches, fn, v)
        rec["trajectories"][vn] = dict(hyper=v, loss=losses, grad_norm=gn, lr=lrs)
    ns["report"][name] = rec


def ce(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1),
                           ignore_index=-100)


def vit_case(name="vit-tiny", B=4, nb=4, image=16, patch=4, labels=10):
    """ViT: Conv patch embedding, [CLS] token, learned positions, pre-LN encoder, classifier on
    the [CLS] output, cross-entropy over image labels."""
    from transformers import ViTConfig, ViTForImageClassification

    class Logits(nn.Module):
        def __init__(s, m):
            super().__init__(); s.m = m

        def forward(s, pixel_values):
            return s.m(pixel_values=pixel_values).logits

    def mk():
        torch.manual_seed(0)
        c = ViTConfig(image_size=image, patch_size=patch, num_channels=3, hidden_size=64,
                      num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=labels)
        c._attn_implementation = "eager"
        return Logits(ViTForImageClassification(c))
    g = torch.Generator().manual_seed(4321)
    x = torch.randn(nb, B, 3, image, image, generator=g)
    y = torch.randint(0, labels, (nb, B), generator=g)
    generic_case(name, mk, mk, {"pixel_values": x}, y, lambda m, b: ce(m(b[0]), b[1]),
                 ["logits"], "image-classifier", "mean cross-entropy over image labels", B=B)


class ImageLogits(nn.Module):
    """A Hugging Face classifier's logits from one named input (pixel_values, input_features)."""
    def __init__(s, m, input_name="pixel_values"):
        super().__init__(); s.m = m; s.input_name = input_name

    def forward(s, x):
        return s.m(**{s.input_name: x}).logits


def running_stats(m):
    """The running mean and variance of every BatchNorm of |m|, by buffer name."""
    return {k: v.detach().double().flatten().tolist() for k, v in m.named_buffers()
            if k.endswith("running_mean") or k.endswith("running_var")}


def image_case(name, make_model, x, y, input_name="pixel_values", kind="image-classifier", B=4):
    """A convolutional classifier (issue 53): generic_case's trajectories; "plain-w2", two
    data-parallel ranks that each normalize with their own half's batch statistics (BatchNorm
    without SyncBatchNorm) and average their losses; and, for models with BatchNorm, the running
    statistics after the 20 "plain" steps (model.train() throughout, as train_ref leaves it)."""
    made = []

    def mk():
        m = make_model()
        made.append(m)
        return m

    def loss(m, b):
        return ce(m(b[0]), b[1])

    def loss_w2(m, b):
        h = b[0].shape[0] // 2
        return 0.5 * (loss(m, (b[0][:h], b[1][:h])) + loss(m, (b[0][h:], b[1][h:])))
    generic_case(name, mk, make_model, {input_name: x}, y, loss, ["logits"], kind,
                 "mean cross-entropy over labels",
                 extra_refs=[("plain-w2", ns["VARIANTS"]["plain"], loss_w2)], B=B)
    # made: generic_case's comparison model, then one per trajectory: plain, sched, plain-w2.
    plain = made[-(len(ns["VARIANTS"]) + 1)]
    stats = running_stats(plain)
    if stats:
        ns["report"][name]["running_stats_after_plain"] = stats


def resnet_case(name="resnet-tiny", B=4, nb=4, image=32, labels=10):
    """ResNet (Hugging Face's): 7x7 stride-2 stem, BatchNorm, 3x3 max-pool, basic blocks with
    stride-2 shortcut convolutions, global average pool, classifier."""
    from transformers import ResNetConfig, ResNetForImageClassification

    def mk():
        torch.manual_seed(0)
        c = ResNetConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                         layer_type="basic", hidden_act="relu", downsample_in_first_stage=False,
                         num_labels=labels)
        return ImageLogits(ResNetForImageClassification(c))
    g = torch.Generator().manual_seed(5301)
    image_case(name, mk, torch.randn(nb, B, 3, image, image, generator=g),
               torch.randint(0, labels, (nb, B), generator=g), B=B)


def convnext_case(name="convnext-tiny", B=4, nb=4, image=16, labels=10):
    """ConvNeXt (Hugging Face's): patchify stem, depthwise 7x7 convolutions, LayerNorm over
    channels (channels-first) and in channels-last, inverted bottleneck with GELU, layer scale."""
    from transformers import ConvNextConfig, ConvNextForImageClassification

    def mk():
        torch.manual_seed(0)
        c = ConvNextConfig(num_channels=3, patch_size=2, hidden_sizes=[8, 16], depths=[1, 1],
                           num_labels=labels, layer_scale_init_value=0.5, drop_path_rate=0.0,
                           image_size=image)
        return ImageLogits(ConvNextForImageClassification(c))
    g = torch.Generator().manual_seed(5302)
    image_case(name, mk, torch.randn(nb, B, 3, image, image, generator=g),
               torch.randint(0, labels, (nb, B), generator=g), B=B)


class UNetTiny(nn.Module):
    """A UNet block as diffusers builds them: GroupNorm and SiLU before each convolution, a
    stride-2 down convolution, a residual middle, nearest 2x upsampling then a convolution, the
    skip connection concatenated, and a classifier on the mean."""
    def __init__(s, c=8, labels=10):
        super().__init__()
        s.conv_in = nn.Conv2d(3, c, 3, padding=1)
        s.norm1, s.down = nn.GroupNorm(4, c), nn.Conv2d(c, 2 * c, 3, stride=2, padding=1)
        s.norm2, s.mid = nn.GroupNorm(4, 2 * c), nn.Conv2d(2 * c, 2 * c, 3, padding=1)
        s.up = nn.Conv2d(2 * c, c, 3, padding=1)
        s.norm3, s.conv_out = nn.GroupNorm(4, 2 * c), nn.Conv2d(2 * c, c, 3, padding=1)
        s.head = nn.Linear(c, labels)

    def forward(s, pixel_values):
        h0 = s.conv_in(pixel_values)
        h = s.down(F.silu(s.norm1(h0)))
        h = h + s.mid(F.silu(s.norm2(h)))
        h = s.up(F.interpolate(h, scale_factor=2.0, mode="nearest"))
        h = s.conv_out(F.silu(s.norm3(torch.cat([h, h0], 1))))
        return s.head(h.mean((2, 3)))


def unet_case(name="unet-tiny", B=4, nb=4, image=16, labels=10):
    def mk():
        torch.manual_seed(0)
        return UNetTiny(labels=labels)
    g = torch.Generator().manual_seed(5303)
    image_case(name, mk, torch.randn(nb, B, 3, image, image, generator=g),
               torch.randint(0, labels, (nb, B), generator=g), B=B)


def whisper_case(name="whisper-tiny", B=4, nb=4, mels=16, frames=32, labels=5):
    """Whisper's encoder (Hugging Face's WhisperForAudioClassification): two Conv1d + GELU (the
    second stride 2) over log-mel features, fixed sinusoidal positions (embed_positions does not
    train: compile with --frozen embed_positions), pre-LN transformer layers, a projection, the
    mean over time, a classifier."""
    from transformers import WhisperConfig, WhisperForAudioClassification

    def mk():
        torch.manual_seed(0)
        c = WhisperConfig(vocab_size=64, num_mel_bins=mels, encoder_layers=2,
                          encoder_attention_heads=4, decoder_layers=1, decoder_attention_heads=4,
                          d_model=64, encoder_ffn_dim=128, decoder_ffn_dim=64,
                          max_source_positions=frames // 2, max_target_positions=16,
                          num_labels=labels, classifier_proj_size=32, dropout=0.0,
                          attention_dropout=0.0, activation_dropout=0.0,
                          use_weighted_layer_sum=False)
        c._attn_implementation = "eager"
        return ImageLogits(WhisperForAudioClassification(c), "input_features")
    g = torch.Generator().manual_seed(5304)
    image_case(name, mk, torch.randn(nb, B, mels, frames, generator=g),
               torch.randint(0, labels, (nb, B), generator=g), input_name="input_features",
               kind="audio-classifier", B=B)


def t5_case(name="t5-tiny", B=4, nb=4, S=16, T=12, vocab=256):
    """T5 v1.1 (Flan-T5's form): encoder-decoder, relative position buckets, (unscaled) RMSNorm,
    gated-GELU feed-forward, an untied LM head; inputs input_ids and decoder_input_ids (the
    labels shifted right, start token 0), cross-entropy over the decoder's labels. (The original
    T5's ReLU feed-forward was tried first: a pre-activation within rounding of 0 flips its ReLU
    under another BLAS kernel, and AdamW turns the 0-or-not gradient into a full step, so its
    fp32 trajectory is not reproducible to 1e-4 across CPUs, PyTorch's included.)"""
    from transformers import T5Config, T5ForConditionalGeneration

    class Logits(nn.Module):
        def __init__(s, m):
            super().__init__(); s.m = m

        def forward(s, input_ids, decoder_input_ids):
            return s.m(input_ids=input_ids, decoder_input_ids=decoder_input_ids,
                       use_cache=False).logits

    def mk():
        torch.manual_seed(0)
        c = T5Config(vocab_size=vocab, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                     num_decoder_layers=2, num_heads=4, relative_attention_num_buckets=8,
                     relative_attention_max_distance=16, dropout_rate=0.0,
                     feed_forward_proj="gated-gelu", tie_word_embeddings=False,
                     decoder_start_token_id=0,
                     pad_token_id=0, eos_token_id=1)
        c._attn_implementation = "eager"
        return Logits(T5ForConditionalGeneration(c))
    g = torch.Generator().manual_seed(777)
    src = torch.randint(2, vocab, (nb, B, S), generator=g)
    tgt = torch.randint(2, vocab, (nb, B, T), generator=g)
    dec = torch.cat([torch.zeros(nb, B, 1, dtype=tgt.dtype), tgt[:, :, :-1]], dim=2)
    lab = tgt.clone()
    lab[:, :, -1] = -100
    generic_case(name, mk, mk, {"input_ids": src, "decoder_input_ids": dec}, lab,
                 lambda m, b: ce(m(b[0], b[1]), b[2]), ["logits"], "seq2seq-lm",
                 "mean cross-entropy over decoder labels != -100", B=B)


def moe_case(name, make_hf, coef, seed, B=4, T=32, nb=4, vocab=256):
    """A mixture-of-experts causal LM from |make_hf|(vocab) (a Hugging Face model, built after
    torch.manual_seed(0)): logits and the load-balancing aux loss, trained by its own (sparse)
    module for the trajectories, exported as the dense dispatch (tools/moe_dense.py), with a
    two-rank variant where each rank takes its own aux loss over its half."""
    class WithAux(nn.Module):
        def __init__(s, m):
            super().__init__(); s.m = m

        def forward(s, input_ids):
            o = s.m(input_ids=input_ids, use_cache=False, output_router_logits=True)
            return o.logits, o.aux_loss

    def mk(dense=False):
        torch.manual_seed(0)
        m = make_hf(vocab)
        if dense:
            moe_dense.patch(m, m.config.hidden_size)
        return WithAux(m)

    def loss(m, b):
        logits, aux = m(b[0])
        return ce(logits, b[1]) + coef * aux

    def loss_w2(m, b):  # two data-parallel ranks: each its own aux loss over its half
        h = b[0].shape[0] // 2
        return 0.5 * (loss(m, (b[0][:h], b[1][:h])) + loss(m, (b[0][h:], b[1][h:])))
    g = torch.Generator().manual_seed(seed)
    toks = torch.randint(0, vocab, (nb, B, T + 1), generator=g)
    ids = toks[:, :, :T].contiguous()
    lab = toks[:, :, 1:].contiguous().clone()
    lab[:, :, -1] = -100
    import transformers
    ns["report"].setdefault("_env", {})["transformers"] = transformers.__version__
    generic_case(name, mk, lambda: mk(True), {"input_ids": ids}, lab, loss, ["logits", "aux_loss"],
                 "causal-lm-moe", "mean cross-entropy + %g x load-balancing aux_loss" % coef,
                 extra_refs=[("plain-w2", ns["VARIANTS"]["plain"], loss_w2)], B=B)


def mixtral_case(name="mixtral-tiny", coef=0.02):
    """Mixtral: 4 experts, top-2 routing, the load-balancing auxiliary loss with its coefficient."""
    from transformers import MixtralConfig, MixtralForCausalLM

    def make(vocab):
        c = MixtralConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                          num_key_value_heads=2, intermediate_size=128, vocab_size=vocab,
                          max_position_embeddings=64, rms_norm_eps=1e-6, tie_word_embeddings=False,
                          num_local_experts=4, num_experts_per_tok=2, router_aux_loss_coef=coef,
                          output_router_logits=True, sliding_window=None, attention_dropout=0.0,
                          router_jitter_noise=0.0)
        c._attn_implementation = "eager"
        return MixtralForCausalLM(c)
    moe_case(name, make, coef, seed=1234)


def qwen_moe_case(name="qwen-moe-tiny", coef=0.001):
    """A fine-grained mixture of experts (issue 52), Qwen2-MoE's block: 32 experts, top-6 without
    renormalization, a shared expert twice an expert's width (DeepSeek's 2 shared experts as one
    MLP) behind its sigmoid gate, the load-balancing aux loss (zcc routes it dropless)."""
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

    def make(vocab):
        c = Qwen2MoeConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                           num_key_value_heads=2, intermediate_size=128, vocab_size=vocab,
                           max_position_embeddings=64, rms_norm_eps=1e-6,
                           tie_word_embeddings=False, num_experts=32, num_experts_per_tok=6,
                           moe_intermediate_size=32, shared_expert_intermediate_size=64,
                           norm_topk_prob=False, decoder_sparse_step=1, mlp_only_layers=[],
                           router_aux_loss_coef=coef, output_router_logits=True,
                           use_sliding_window=False, attention_dropout=0.0)
        c._attn_implementation = "eager"
        return Qwen2MoeForCausalLM(c)
    moe_case(name, make, coef, seed=4321)


def packed_case(name, make_model, vocab=256, B=4, T=32, nb=4, eos=2, seed=4242):
    """Packed documents (zcc --per-document, issue 48): a token stream of documents of 1 to 24
    tokens, each ending with |eos|, cut as zrun's loader cuts it (sequence i is tokens
    [i T, (i + 1) T], its labels the next tokens, -100 where the input token is the EOS). PyTorch
    runs each document of each sequence on its own (its positions from 0, seeing nothing of the
    others); the loss is the mean cross-entropy over every kept label of the batch. No export:
    the model is an existing one's (make_model with its seed), whose parameters' sums the record
    keeps (param_sums) so that the ONNX file it is trained from can be checked to be the same."""
    g = torch.Generator().manual_seed(seed)
    n = B * nb * T + 1
    stream = []
    while len(stream) < n:
        length = int(torch.randint(1, 25, (1,), generator=g))
        stream += [int(t) for t in torch.randint(3, vocab, (length - 1,), generator=g)] + [eos]
    stream = np.array(stream[:n], dtype=np.uint16)
    stream.tofile(os.path.join(ns["OUT"], name + ".tokens.bin"))
    t = torch.from_numpy(stream.astype(np.int64))
    x = torch.stack([t[i * T:(i + 1) * T] for i in range(B * nb)]).reshape(nb, B, T)
    y = torch.stack([t[i * T + 1:(i + 1) * T + 1] for i in range(B * nb)]).reshape(nb, B, T)
    y = torch.where(x == eos, torch.full_like(y, -100), y)
    batches = [(x[i], y[i]) for i in range(nb)]

    def loss_fn(model, b):
        total, count = 0.0, 0
        for r in range(b[0].shape[0]):
            xs, ys = b[0][r], b[1][r]
            starts = [0] + [k for k in range(1, T) if int(xs[k - 1]) == eos] + [T]
            for a, e in zip(starts[:-1], starts[1:]):
                logits = model(xs[a:e].unsqueeze(0))[0]
                total = total + F.cross_entropy(logits.float(), ys[a:e], ignore_index=-100,
                                                reduction="sum")
                count += int((ys[a:e] != -100).sum())
        return total / count
    torch.manual_seed(0)
    model = make_model()
    rec = {"kind": "causal-lm-packed", "batch": B, "seq": T, "vocab": vocab, "eos": eos,
           "loss": "mean cross-entropy over labels != -100, each document run on its own",
           "params": sum(p.numel() for p in model.parameters()),
           "param_sums": {k: float(v.double().sum()) for k, v in model.state_dict().items()},
           "documents_per_sequence": [len([0] + [k for k in range(1, T)
                                                 if int(x.reshape(-1, T)[i][k - 1]) == eos])
                                      for i in range(B * nb)]}
    rec["trajectories"] = {}
    for vn, v in ns["VARIANTS"].items():
        losses, gn, lrs = ns["train_ref"](make_model, batches, loss_fn, v)
        rec["trajectories"][vn] = dict(hyper=v, loss=losses, grad_norm=gn, lr=lrs)

    def loss_w2(m, b):  # two data-parallel ranks: each the mean over its own half's labels
        h = b[0].shape[0] // 2
        return 0.5 * (loss_fn(m, (b[0][:h], b[1][:h])) + loss_fn(m, (b[0][h:], b[1][h:])))
    v = ns["VARIANTS"]["plain"]
    losses, gn, lrs = ns["train_ref"](make_model, batches, loss_w2, v)
    rec["trajectories"]["plain-w2"] = dict(hyper=v, loss=losses, grad_norm=gn, lr=lrs)
    ns["report"][name] = rec


cases = {
    "llama-tiny": lambda: ns["lm_case"]("llama-tiny", llama(2, 64, 4, 2, 128, 256), 256),
    "bert-tiny": lambda: ns["lm_case"]("bert-tiny", bert(2, 64, 4, 128, 256), 256),
    "qwen2-tiny": lambda: ns["lm_case"]("qwen2-tiny", qwen2(2, 64, 4, 2, 128, 256), 256),
    "gemma-tiny": lambda: ns["lm_case"]("gemma-tiny", gemma(2, 64, 4, 1, 16, 128, 256), 256),
    # Attention at other head widths (issue 48): 96 (Phi-3's), 256 on one k/v head (Gemma's).
    "phi3-tiny": lambda: ns["lm_case"]("phi3-tiny", phi3(2, 192, 2, 2, 256, 256), 256),
    "gemma-d256-tiny": lambda: ns["lm_case"]("gemma-d256-tiny",
                                             gemma(2, 128, 2, 1, 256, 128, 256, attn="sdpa"), 256),
    # Gemma 2 (issue 48): soft-capped attention scores (a cap of 0.05, near the tiny model's
    # scores, so that tanh bends them; Gemma 2 itself uses 50), a 12-key sliding window on the
    # first layer of two (the 32 positions cross it), 32-wide heads in 2:1 groups.
    "gemma2-tiny": lambda: ns["lm_case"]("gemma2-tiny",
                                         gemma2(2, 64, 4, 2, 32, 128, 256, softcap=0.05,
                                                window=12), 256),
    # Packed documents with llama-tiny's and gpt2-tiny's parameters (RoPE, learned positions).
    "llama-tiny-packed": lambda: packed_case("llama-tiny-packed", llama(2, 64, 4, 2, 128, 256)),
    "gpt2-tiny-packed": lambda: packed_case("gpt2-tiny-packed", ns["gpt2"](2, 64, 4, 256)),
    "vit-tiny": vit_case,
    "resnet-tiny": resnet_case,
    "convnext-tiny": convnext_case,
    "unet-tiny": unet_case,
    "whisper-tiny": whisper_case,
    "t5-tiny": t5_case,
    "mixtral-tiny": mixtral_case,
    "qwen-moe-tiny": qwen_moe_case,
}
import traceback
for w in which:
    try:
        cases[w]()
    except Exception:
        ns["report"][w] = {"error": traceback.format_exc()[-2000:]}
# lm_case saves [batches, B, T]; examples/models keeps [samples, T] (references.json's note).
for w in which:
    if ns["report"].get(w, {}).get("kind") == "causal-lm":
        for part in ("input_ids", "labels"):
            f = os.path.join(out, "%s.%s.npy" % (w, part))
            a = np.load(f)
            np.save(f, a.reshape((-1,) + a.shape[2:]))
json.dump(ns["report"], open(os.path.join(out, "references.json"), "w"), indent=1)
for k, v in ns["report"].items():
    print(k, json.dumps({kk: vv for kk, vv in v.items() if kk != "trajectories"})[:3000])
    for vn, t in v.get("trajectories", {}).items():
        print(k, vn, ["%.4f" % x for x in t["loss"][:3]], "...", "%.4f" % t["loss"][-1])
