"""Probes of serving loops the other probes do not run (probe.py holds the helpers these share,
probe4.py the decoder). Each runs its measured calls between cudaProfilerStart/Stop after
warm-up, no NVTX, and prints a `FACTS {json}` line with what it did: the oracle its steps are
checked against.

- `overlap`: a decode loop with asynchronous scheduling, as vLLM's `--async-scheduling` and
  SGLang's overlap scheduler run it: each step launches its pass (eager, 8 layers, batch 1, the
  token fed from the last pass on the GPU), copies its token into pinned host memory without
  blocking and records an event; only then does the CPU wait for the previous step's event and
  process that step's token in Python (`detokenize`, about `--host-ms` of CPU). The host's
  work overlaps the GPU's next pass, and the wait is one step late.
- `buckets`: batched decoding with CUDA graphs captured per batch-size bucket (1, 2, 4, 8), as
  vLLM and SGLang capture them: 8 requests of different lengths start together, each step
  replays the graph of the smallest bucket that holds the running requests (padded), reads
  the tokens back (`.tolist()`, the step's one sync) and drops the finished requests, so the
  replayed graph changes as the batch shrinks.
- `rag`: a retrieval-augmented request loop: per request an encoder pass over the query
  (BERT-shaped, probe5.py's), its embedding read back, a search over 20,000 document vectors
  on the CPU (NumPy), then eager greedy decoding of `--new-tokens` tokens by a decoder (its
  token read back each step). Two models in one loop, one pass of one per request and many of
  the other.
"""

import argparse
import time

import numpy as np
import torch
from probe import add_modes, profiled, report
from probe4 import Decoder, graphed
from probe5 import Encoder


def detokenize(token, ms):
    """A stand-in for detokenizing and stop checks: about ms of Python per token."""
    end, text = time.perf_counter() + ms / 1000, []
    while time.perf_counter() < end:
        text.append(str(token * 31 % 97))
    return len(text)


def run_overlap(a):
    max_len = 64 + (a.steps + a.warmup) * 2 + 8
    model = Decoder(a.layers, 2048, 16, 5632, 32000, max_len, seed=0)
    host = [torch.empty(1, dtype=torch.long, pin_memory=True) for _ in range(2)]
    state = {"tok": torch.zeros(1, dtype=torch.long, device="cuda"), "pos": torch.full((1,), 64, device="cuda"),
             "pending": None, "steps": 0, "processed": 0, "i": 0}

    def step():
        buf = host[state["i"] % 2]
        state["tok"] = model.forward(state["tok"], state["pos"])
        buf.copy_(state["tok"], non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        state["pos"] = state["pos"] + 1
        state["steps"] += 1
        state["i"] += 1
        # (the previous step's token: its pass ran while this one was being launched)
        if state["pending"] is not None:
            ev, prev = state["pending"]
            ev.synchronize()
            detokenize(int(prev[0]), a.host_ms)
            state["processed"] += 1
        state["pending"] = (done, buf)

    def drain():
        if state["pending"] is not None:
            ev, prev = state["pending"]
            ev.synchronize()
            detokenize(int(prev[0]), a.host_ms)
            state["processed"] += 1
            state["pending"] = None

    with torch.no_grad():
        for _ in range(a.warmup):
            step()
        drain()
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        for _ in range(a.steps):
            step()
        drain()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    report({"workload": "overlap", "steps": a.steps, "forwards": a.steps, "layers": a.layers,
            "host_ms": a.host_ms, "warmup_steps": a.warmup})


class BatchDecoder:
    """A Llama-shaped decoder over a batch of sequences, one token each per pass, all at the
    same position (a batch that started together): tokens (b,) and pos (1,) on the GPU."""

    def __init__(self, layers, d, heads, ffn, vocab, max_len, batch):
        g = torch.Generator(device="cuda").manual_seed(0)

        def w(*shape):
            return torch.randn(*shape, device="cuda", dtype=torch.bfloat16, generator=g) * 0.02

        self.heads, self.hd, self.max_len = heads, d // heads, max_len
        self.embed, self.lm_head = w(vocab, d), w(vocab, d)
        self.layers = [dict(qkv=w(3 * d, d), o=w(d, d), gate_up=w(2 * ffn, d), down=w(d, ffn),
                            k=w(batch, heads, max_len, d // heads), v=w(batch, heads, max_len, d // heads))
                       for _ in range(layers)]

    def forward(self, tokens, pos):
        b = tokens.shape[0]
        mask = torch.arange(self.max_len, device="cuda")[None, None, None] <= pos
        x = self.embed[tokens]
        for L in self.layers:
            q, k, v = torch.nn.functional.linear(Decoder.norm(x), L["qkv"]).view(b, 3, self.heads, self.hd).unbind(1)
            kc, vc = L["k"][:b], L["v"][:b]
            kc.index_copy_(2, pos, k[:, :, None])
            vc.index_copy_(2, pos, v[:, :, None])
            att = torch.nn.functional.scaled_dot_product_attention(q[:, :, None], kc, vc, attn_mask=mask)
            x = x + torch.nn.functional.linear(att.reshape(b, -1), L["o"])
            gate, up = torch.nn.functional.linear(Decoder.norm(x), L["gate_up"]).chunk(2, -1)
            x = x + torch.nn.functional.linear(torch.nn.functional.silu(gate) * up, L["down"])
        return torch.nn.functional.linear(Decoder.norm(x), self.lm_head).argmax(-1)


def run_buckets(a):
    sizes = [1, 2, 4, 8]
    lengths = [int(x) for x in a.lengths.split(",")]
    assert len(lengths) == 8
    max_len = 64 + max(lengths) * (a.rounds + a.warmup) + 8
    model = BatchDecoder(a.layers, 2048, 16, 5632, 32000, max_len, 8)
    pos = torch.full((1,), 64, device="cuda")
    graphs = {b: graphed(model.forward, torch.zeros(b, dtype=torch.long, device="cuda"), pos) for b in sizes}
    counts = {"steps": 0, "replays": {b: 0 for b in sizes}, "rounds": 0}

    def one_round():
        left = list(lengths)  # tokens each request still needs
        tokens = torch.zeros(8, dtype=torch.long, device="cuda")
        p = pos.clone()
        while any(n > 0 for n in left):
            live = [i for i, n in enumerate(left) if n > 0]
            b = next(s for s in sizes if s >= len(live))
            out = graphs[b](tokens[:b], p)
            toks = out.tolist()  # (the step's one sync)
            for j, i in enumerate(live):
                left[i] -= 1
            keep = [j for j, i in enumerate(live) if left[i] > 0]
            tokens = torch.tensor([toks[j] for j in keep] + [0] * (8 - len(keep)), device="cuda")
            p = p + 1
            counts["steps"] += 1
            counts["replays"][b] += 1
        counts["rounds"] += 1

    with torch.no_grad():
        profiled(one_round, a.warmup, a.rounds)
    per_round = {b: 0 for b in sizes}
    left = list(lengths)
    while any(n > 0 for n in left):
        live = [i for i, n in enumerate(left) if n > 0]
        per_round[next(s for s in sizes if s >= len(live))] += 1
        left = [n - 1 if n > 0 else 0 for n in left]
    steps = sum(per_round.values()) * a.rounds
    report({"workload": "buckets", "steps": steps, "forwards": steps, "rounds": a.rounds, "lengths": lengths,
            "replays_per_round": {str(b): n for b, n in per_round.items()}, "layers": a.layers})


def run_rag(a):
    enc = Encoder(6, 768, 12, 3072, 30522, 512)
    dec = Decoder(a.layers, 2048, 16, 5632, 32000, 64 + a.new_tokens + 8, seed=0)
    rng = np.random.default_rng(0)
    docs = rng.standard_normal((a.docs, 768), dtype=np.float32)
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    counts = {"requests": 0, "decoder_passes": 0, "encoder_passes": 0}

    def request():
        q = torch.randint(1, 30522, (1, a.query_len), device="cuda")
        emb = enc.forward(q, q != 0).cpu().numpy()[0]  # (the query's embedding read back)
        counts["encoder_passes"] += 1
        top = np.argsort(docs @ emb)[-4:]  # (the retrieval, on the CPU)
        prompt = torch.tensor([int(t) % 32000 for t in top] * 16, device="cuda")
        tok = dec.forward(prompt, torch.zeros(1, dtype=torch.long, device="cuda"))[-1:]
        counts["decoder_passes"] += 1
        for j in range(a.new_tokens - 1):
            tok = dec.forward(tok, torch.full((1,), 64 + j, device="cuda"))
            int(tok.item())  # (each token read back)
            counts["decoder_passes"] += 1
        counts["requests"] += 1

    with torch.no_grad():
        profiled(request, a.warmup, a.requests)
    n = a.requests
    report({"workload": "rag", "requests": n, "encoder_passes": n, "decoder_passes": n * a.new_tokens,
            "new_tokens": a.new_tokens, "prompt_len": 64, "docs": a.docs, "layers": a.layers})


MODES = {
    "overlap": {"steps": 200, "warmup": 10, "layers": 8, "host_ms": 1.5},
    "buckets": {"rounds": 4, "warmup": 1, "layers": 8, "lengths": "40,32,28,20,16,12,8,4"},
    "rag": {"requests": 8, "warmup": 2, "new_tokens": 24, "layers": 8, "docs": 20000, "query_len": 32},
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_modes(p.add_subparsers(dest="cmd", required=True), MODES)
    a = p.parse_args(argv)
    {"overlap": run_overlap, "buckets": run_buckets, "rag": run_rag}[a.cmd](a)


if __name__ == "__main__":
    main()
