"""Probes of work that is not a decoder's token loop (probe.py holds the helpers these share).
Each runs its measured calls between cudaProfilerStart/Stop after warm-up, no NVTX, and prints
a `FACTS {json}` line with what it did: the oracle its steps are checked against.

- `jacobi`: a 2-D heat solver (Jacobi iterations on an n x n fp32 grid, written with tensor
  slices as one writes it in CuPy or PyTorch): each iteration averages the four neighbours
  (three adds and a multiply, then a copy into the interior), and every `--check-every`
  iterations the largest change is read back to test convergence (the loop's one sync). Not an
  LLM and not training.
- `embed`: an embedding server: an encoder (BERT-base shape, random weights, bf16) over batches
  of `--batch` texts of random length, padded to the batch's longest; each batch's texts are
  tokenized in Python first (`tokenize`, about `--tokenize-ms` of CPU), then one forward pass,
  mean pooling and normalization, and the embeddings are read back (`.cpu()`). A prefill-only
  server: no decode.
"""

import argparse
import random
import time

import torch
import torch.nn.functional as F
from probe import add_modes, profiled, report


def run_jacobi(a):
    n = a.n
    u = torch.zeros(n + 2, n + 2, device="cuda")
    u[0, :] = 100.0  # (a hot edge)
    new = u.clone()
    state = {"iters": 0, "checks": 0, "change": None}

    def block():
        nonlocal u, new
        for i in range(a.check_every):
            new[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
            u, new = new, u
            state["iters"] += 1
        state["change"] = float((u - new).abs().max().item())  # (the convergence test: the one sync)
        state["checks"] += 1

    warm = a.warmup
    profiled(block, warm, a.blocks)
    report({"workload": "jacobi", "iterations": a.blocks * a.check_every, "checks": a.blocks,
            "check_every": a.check_every, "grid": n, "warmup_iterations": warm * a.check_every,
            "last_change": state["change"]})


class Encoder:
    """A BERT-shaped encoder: token and position embeddings, post-norm layers with bidirectional
    attention (padding masked), GELU MLP."""

    def __init__(self, layers, d, heads, ffn, vocab, max_len):
        g = torch.Generator(device="cuda").manual_seed(0)

        def w(*shape):
            return torch.randn(*shape, device="cuda", dtype=torch.bfloat16, generator=g) * 0.02

        self.heads, self.hd = heads, d // heads
        self.tok, self.pos = w(vocab, d), w(max_len, d)
        self.layers = [dict(qkv=w(3 * d, d), o=w(d, d), up=w(ffn, d), down=w(d, ffn)) for _ in range(layers)]

    def forward(self, ids, keep):
        b, n = ids.shape
        x = F.embedding(ids, self.tok) + self.pos[:n]
        mask = keep[:, None, None, :]
        for L in self.layers:
            q, k, v = F.linear(x, L["qkv"]).view(b, n, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)
            att = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            x = F.layer_norm(x + F.linear(att.transpose(1, 2).reshape(b, n, -1), L["o"]), x.shape[-1:])
            x = F.layer_norm(x + F.linear(F.gelu(F.linear(x, L["up"])), L["down"]), x.shape[-1:])
        pooled = (x * keep[..., None]).sum(1) / keep.sum(1, keepdim=True)
        return F.normalize(pooled.float(), dim=-1)


def tokenize(texts, vocab, ms):
    """A stand-in for a Python tokenizer: hashes words for about ms of CPU per batch."""
    end, ids = time.perf_counter() + ms / 1000, []
    for t in texts:
        ids.append([hash(w) % (vocab - 1) + 1 for w in t.split()])
    while time.perf_counter() < end:
        sum(hash(str(i)) for i in range(200))
    return ids


def run_embed(a):
    vocab = 30522
    model = Encoder(a.layers, 768, 12, 3072, vocab, 512)
    rng = random.Random(0)
    words = [f"w{i}" for i in range(5000)]
    state = {"batches": 0, "tokens": 0, "lengths": []}

    def batch():
        texts = [" ".join(rng.choices(words, k=rng.randint(a.min_len, a.max_len))) for _ in range(a.batch)]
        ids = tokenize(texts, vocab, a.tokenize_ms)
        n = max(len(i) for i in ids)
        padded = torch.tensor([i + [0] * (n - len(i)) for i in ids]).cuda(non_blocking=False)
        keep = padded != 0
        out = model.forward(padded, keep).cpu()  # (the batch's read-back)
        assert out.shape == (a.batch, 768)
        state["batches"] += 1
        state["tokens"] += sum(len(i) for i in ids)
        state["lengths"].append(n)

    with torch.no_grad():
        profiled(batch, a.warmup, a.batches)
    m = a.batches
    report({"workload": "embed", "batches": m, "batch": a.batch, "layers": a.layers,
            "padded_lengths": state["lengths"][-m:], "tokenize_ms": a.tokenize_ms})


MODES = {
    "jacobi": {"blocks": 24, "warmup": 2, "check_every": 25, "n": 4096},
    "embed": {"batches": 40, "warmup": 3, "batch": 32, "min_len": 8, "max_len": 200, "layers": 12,
              "tokenize_ms": 4.0},
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_modes(p.add_subparsers(dest="cmd", required=True), MODES)
    a = p.parse_args(argv)
    {"jacobi": run_jacobi, "embed": run_embed}[a.cmd](a)


if __name__ == "__main__":
    main()
