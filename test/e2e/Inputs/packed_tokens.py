"""Packed token streams for zrun's token loader, and its NumPy reference.

    packed_tokens.py write PREFIX [--vocab V] [--tokens N] [--eos E] [--seed S] [--token-bytes 2|4]
        PREFIX.bin: uint16 (or uint32) documents separated by E;
        PREFIX.prompt.bin: one byte per token, 1 on each document's prompt
        (its first ~30%).
    packed_tokens.py expect PREFIX T FIRST COUNT OUT [--eos E] [--no-mask] [--token-bytes 2|4]
        OUT.input_ids.npy, OUT.labels.npy: sequences [FIRST, FIRST+COUNT) as
        zrun --tokens PREFIX.bin --eos E --prompt-mask PREFIX.prompt.bin feeds
        them (int64 [COUNT, T]).

The rule (docs/finetune.md): sequence i is tokens [i*T, (i+1)*T] of the
stream; input_ids the first T, labels the last T. A label is -100 (not
trained on) when its input token is the EOS (the next document's first token
is not predicted from another document) or when the label token is a prompt
token.
"""
import argparse
import numpy as np


def write(prefix, vocab=256, tokens=4000, eos=2, seed=0, width=2):
    g = np.random.default_rng(seed)
    stream, prompt = [], []
    while len(stream) < tokens:
        n = int(g.integers(4, 48))
        doc = g.integers(0, vocab, n)
        doc[doc == eos] = (eos + 1) % vocab  # documents hold no EOS of their own
        p = int(round(0.3 * n))
        stream += list(doc) + [eos]
        prompt += [1] * p + [0] * (n - p) + [0]
    np.array(stream[:tokens], np.uint16 if width == 2 else np.uint32).tofile(prefix + ".bin")
    np.array(prompt[:tokens], np.uint8).tofile(prefix + ".prompt.bin")


def pack(tokens, prompt, seq, first, count, eos=None):
    """input_ids and labels of sequences [first, first + count) (modulo the
    number of sequences, as zrun wraps around)."""
    n = (len(tokens) - 1) // seq
    xs, ys = [], []
    for i in range(first, first + count):
        i %= n
        w = tokens[i * seq: i * seq + seq + 1].astype(np.int64)
        x, y = w[:-1].copy(), w[1:].copy()
        if eos is not None:
            y[x == eos] = -100
        if prompt is not None:
            y[prompt[i * seq + 1: i * seq + seq + 1] != 0] = -100
        xs.append(x)
        ys.append(y)
    return np.stack(xs), np.stack(ys)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["write", "expect"])
    ap.add_argument("prefix")
    ap.add_argument("rest", nargs="*")
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--tokens", type=int, default=4000)
    ap.add_argument("--eos", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-mask", action="store_true")
    ap.add_argument("--token-bytes", type=int, default=2, choices=[2, 4])
    a = ap.parse_args()
    if a.mode == "write":
        write(a.prefix, a.vocab, a.tokens, 2 if a.eos is None else a.eos, a.seed, a.token_bytes)
    else:
        seq, first, count, out = int(a.rest[0]), int(a.rest[1]), int(a.rest[2]), a.rest[3]
        t = np.fromfile(a.prefix + ".bin", np.uint16 if a.token_bytes == 2 else np.uint32)
        p = None if a.no_mask else np.fromfile(a.prefix + ".prompt.bin", np.uint8)
        x, y = pack(t, p, seq, first, count, a.eos)
        np.save(out + ".input_ids.npy", x)
        np.save(out + ".labels.npy", y)
