"""Probes of decode loops that use the GPU's memory and graphs in ways the other probes do not
(probe.py holds the helpers these share). Each runs its measured calls between
cudaProfilerStart/Stop after warm-up, no NVTX, and prints a `FACTS {json}` line with what it did:
the oracle its steps are checked against.

- `specgraph`: speculative decoding written by hand with CUDA graphs, as servers run it: a
  2-layer draft model and a 16-layer target (Llama-shaped, random weights, batch 1), each pass
  captured as a CUDA graph. A round replays the draft's graph `--draft-tokens` times (each
  proposal fed to the next on the GPU), then the target's graph once over the last token and
  the proposals, then a few eager kernels compare the target's choices with the proposals and
  the number accepted is read back (the round's one sync). Random weights accept almost
  nothing, so a round yields about one token.
- `prefillgraph`: a gpt-fast style loop with both passes in CUDA graphs: per request, one
  replay of a prefill graph over the prompt, then `--new-tokens` - 1 replays of a decode graph,
  each token fed to the next on the GPU, and one read of the request's tokens at its end (no
  read per token). Speculative decoding's shape from afar: a long graph, then a run of a short
  one, as many every time.
- `splitgraph`: a decode loop whose pass is captured as two CUDA graphs replayed back to back,
  as torch.compile's CUDA graphs replay a forward split by a graph break that launches no GPU
  work: the first half of the layers, then the rest with the head and the argmax; each step's
  token is fed to the next on the GPU and read back (`.item()`, the step's one sync).
- `specgraph --draft-tokens 1`: speculative decoding with one draft pass a round (as DeepSeek's
  multi-token prediction runs it).
- `nocache`: generate() of a small Llama shape under `PYTORCH_NO_CUDA_MEMORY_CACHING=1` (set
  by the caller, checked here), as one runs to debug memory: PyTorch's caching allocator is
  off, so every tensor of every pass is a `cudaMalloc` and a `cudaFree`, and a free waits for
  the GPU.
"""

import argparse
import os

import torch
import torch.nn.functional as F
from probe import add_modes, generate_kw, llama_model, measured_generate, profiled, report


class Decoder:
    """A Llama-shaped decoder over one sequence: a pass reads n tokens at positions pos..pos+n-1
    (pos a one-element tensor on the GPU, so that a graph can replay it) and writes their keys
    and values into its cache."""

    def __init__(self, layers, d, heads, ffn, vocab, max_len, seed):
        g = torch.Generator(device="cuda").manual_seed(seed)

        def w(*shape):
            return torch.randn(*shape, device="cuda", dtype=torch.bfloat16, generator=g) * 0.02

        self.heads, self.hd, self.max_len = heads, d // heads, max_len
        self.embed, self.lm_head = w(vocab, d), w(vocab, d)
        self.layers = [
            dict(qkv=w(3 * d, d), o=w(d, d), gate_up=w(2 * ffn, d), down=w(d, ffn),
                 k=w(1, heads, max_len, d // heads), v=w(1, heads, max_len, d // heads))
            for _ in range(layers)
        ]

    @staticmethod
    def norm(x):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype)

    def forward(self, tokens, pos, embed=True, head=True):
        n = tokens.shape[0]
        at = pos + torch.arange(n, device="cuda")
        mask = torch.arange(self.max_len, device="cuda")[None] <= at[:, None]
        x = self.embed[tokens] if embed else tokens
        for L in self.layers:
            q, k, v = F.linear(self.norm(x), L["qkv"]).view(n, 3, self.heads, self.hd).unbind(1)
            L["k"].index_copy_(2, at, k.transpose(0, 1)[None])
            L["v"].index_copy_(2, at, v.transpose(0, 1)[None])
            a = F.scaled_dot_product_attention(q.transpose(0, 1)[None], L["k"], L["v"], attn_mask=mask)
            x = x + F.linear(a[0].transpose(0, 1).reshape(n, -1), L["o"])
            gate, up = F.linear(self.norm(x), L["gate_up"]).chunk(2, -1)
            x = x + F.linear(F.silu(gate) * up, L["down"])
        return F.linear(self.norm(x), self.lm_head).argmax(-1) if head else x


    def halves(self, h):
        """The pass as two functions: tokens -> hidden states after the first h layers, and
        hidden states -> the argmax after the rest and the head."""
        first, rest = self.layers[:h], self.layers[h:]

        def one(tokens, pos):
            self.layers = first
            try:
                return self.forward(tokens, pos, head=False)
            finally:
                self.layers = first + rest

        def two(x, pos):
            self.layers = rest
            try:
                return self.forward(x, pos, embed=False)
            finally:
                self.layers = first + rest

        return one, two


def graphed(fn, *inputs):
    """fn over static copies of inputs, captured as a CUDA graph: a function that copies new
    inputs in, replays the graph and returns its (static) output."""
    static = [t.clone() for t in inputs]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # (warm-up on a side stream, as capture requires)
        for _ in range(2):
            fn(*static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(*static)

    def replay(*new):
        for s, t in zip(static, new):
            s.copy_(t)
        graph.replay()
        return out

    return replay


def run_specgraph(a):
    k, max_len = a.draft_tokens, 72 + (a.rounds + a.warmup) * (a.draft_tokens + 1)
    target = Decoder(a.layers, 2048, 16, 5632, 32000, max_len, seed=0)
    draft = Decoder(2, 1024, 8, 2816, 32000, max_len, seed=1)
    last, pos = torch.zeros(1, dtype=torch.long, device="cuda"), torch.full((1,), 64, device="cuda")
    draft_pass = graphed(draft.forward, last, pos)
    target_pass = graphed(target.forward, torch.zeros(k + 1, dtype=torch.long, device="cuda"), pos)
    state = {"last": last, "pos": pos, "accepted": 0, "rounds": 0}

    def one_round():
        tok, proposals = state["last"], []
        for j in range(k):
            tok = draft_pass(tok, state["pos"] + j).clone()
            proposals.append(tok)
        proposals = torch.cat(proposals)
        checked = target_pass(torch.cat([state["last"], proposals]), state["pos"])
        n = int((checked[:k] == proposals).int().cumprod(0).sum().item())  # (the round's one sync)
        state["last"] = checked[n : n + 1].clone()
        state["pos"] = state["pos"] + n + 1
        state["accepted"] += n
        state["rounds"] += 1

    with torch.no_grad():
        profiled(one_round, a.warmup, a.rounds)
    rounds, accepted = state["rounds"] - a.warmup, state["accepted"]
    report({"workload": "specgraph", "rounds": rounds, "draft_replays": rounds * k, "target_replays": rounds,
            "draft_tokens": k, "accepted_all_rounds": accepted, "layers": a.layers, "draft_layers": 2})


def run_prefillgraph(a):
    max_len = a.prompt_len + a.new_tokens + 8
    model = Decoder(a.layers, 2048, 16, 5632, 32000, max_len, seed=0)
    prompt = torch.randint(0, 32000, (a.prompt_len,), device="cuda")
    start = torch.zeros(1, dtype=torch.long, device="cuda")
    prefill = graphed(model.forward, prompt, start)
    decode = graphed(model.forward, prompt[:1], start + a.prompt_len)
    counts = {"requests": 0}

    def request():
        tok, toks = prefill(prompt, start)[-1:].clone(), []
        toks.append(tok)
        for j in range(a.new_tokens - 1):
            tok = decode(tok, start + a.prompt_len + j).clone()
            toks.append(tok)
        torch.cat(toks).tolist()  # (the request's one read)
        counts["requests"] += 1

    with torch.no_grad():
        profiled(request, a.warmup, a.requests)
    n = counts["requests"] - a.warmup
    report({"workload": "prefillgraph", "requests": n, "forwards": n * a.new_tokens, "prefill_replays": n,
            "decode_replays": n * (a.new_tokens - 1), "new_tokens": a.new_tokens, "prompt_len": a.prompt_len,
            "layers": a.layers})


def run_splitgraph(a):
    max_len = 64 + a.steps + a.warmup + 8
    model = Decoder(a.layers, 2048, 16, 5632, 32000, max_len, seed=0)
    one, two = model.halves(a.layers // 2)
    tok, pos = torch.zeros(1, dtype=torch.long, device="cuda"), torch.full((1,), 64, device="cuda")
    first = graphed(one, tok, pos)
    second = graphed(two, first(tok, pos).clone(), pos)
    state = {"tok": tok, "pos": pos, "steps": 0}

    def step():
        x = first(state["tok"], state["pos"])
        state["tok"] = second(x, state["pos"]).clone()
        int(state["tok"].item())  # (the step's one sync)
        state["pos"] = state["pos"] + 1
        state["steps"] += 1

    with torch.no_grad():
        profiled(step, a.warmup, a.steps)
    n = state["steps"] - a.warmup
    report({"workload": "splitgraph", "steps": n, "replays": 2 * n, "layers": a.layers, "layers_first_graph": a.layers // 2})


def run_nocache(a):
    assert os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1", "run with PYTORCH_NO_CUDA_MEMORY_CACHING=1"
    model, cfg = llama_model(a.layers)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt_len), device="cuda")
    report({"workload": "nocache", **measured_generate(a, model, ids, generate_kw(a, sample=False))})


MODES = {
    "specgraph": {"rounds": 48, "warmup": 4, "draft_tokens": 4, "layers": 16},
    "prefillgraph": {"requests": 12, "warmup": 2, "new_tokens": 32, "prompt_len": 64, "layers": 8},
    "splitgraph": {"steps": 48, "warmup": 4, "layers": 16},
    "nocache": {"batch": 4, "prompt_len": 128, "new_tokens": 24, "calls": 2, "layers": 8},
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_modes(p.add_subparsers(dest="cmd", required=True), MODES)
    a = p.parse_args(argv)
    {"specgraph": run_specgraph, "prefillgraph": run_prefillgraph, "splitgraph": run_splitgraph,
     "nocache": run_nocache}[a.cmd](a)


if __name__ == "__main__":
    main()
