"""Token-by-token decode loop of a small Llama-shaped transformer with random weights.

This is the workload behind the nsys and ncu samples in samples/. It is written the way a
naive serving loop is written (HF-style eager PyTorch), so that the profiles show the
problems nsight-doctor must diagnose:

- every decode step launches a few hundred small kernels one by one (launch-bound at
  small batch);
- every step copies the new position to the GPU from pageable memory and reads back an
  "all finished?" flag with `.item()`, which blocks the CPU (host synchronisation);
- `--graphs` captures one decode step into a CUDA graph and replays it instead.

The KV cache is pre-filled with random values for a context of --context tokens (no
prefill is run; weights are random, so no download is needed). The profiled region is
bracketed by cudaProfilerStart/Stop, so capture it with
`nsys profile --capture-range=cudaProfilerApi` or `ncu --profile-from-start off`.
Each step is an NVTX range named `decode_step`.
"""

import argparse
import time

import torch
import torch.nn.functional as F


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--d-model", type=int, default=2048)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--ffn", type=int, default=5632)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--context", type=int, default=256, help="tokens already in the KV cache")
    p.add_argument("--warmup", type=int, default=4, help="steps before the profiled region")
    p.add_argument("--steps", type=int, default=32, help="steps inside the profiled region")
    p.add_argument("--graphs", action="store_true", help="replay each step as a CUDA graph")
    p.add_argument("--device", default="cuda")
    return p.parse_args(argv)


class Decoder:
    """Weights and KV cache of a Llama-shaped decoder (RMSNorm, fused QKV, SwiGLU)."""

    def __init__(self, a, dtype):
        dev = a.device
        g = torch.Generator(device=dev).manual_seed(0)

        def w(*shape):
            return torch.randn(*shape, device=dev, dtype=dtype, generator=g) * 0.02

        self.a = a
        self.head_dim = a.d_model // a.heads
        self.max_len = a.context + a.warmup + a.steps + 1
        self.embed = w(a.vocab, a.d_model)
        self.lm_head = w(a.vocab, a.d_model)
        self.final_norm = torch.ones(a.d_model, device=dev, dtype=dtype)
        self.layers = []
        for _ in range(a.layers):
            self.layers.append(
                dict(
                    norm1=torch.ones(a.d_model, device=dev, dtype=dtype),
                    qkv=w(3 * a.d_model, a.d_model),
                    o=w(a.d_model, a.d_model),
                    norm2=torch.ones(a.d_model, device=dev, dtype=dtype),
                    gate_up=w(2 * a.ffn, a.d_model),
                    down=w(a.d_model, a.ffn),
                    # KV cache: [batch, heads, max_len, head_dim], context pre-filled.
                    k=w(a.batch, a.heads, self.max_len, self.head_dim),
                    v=w(a.batch, a.heads, self.max_len, self.head_dim),
                )
            )
        # Additive attention mask over the whole cache: 0 where a position is filled.
        self.mask = torch.full((1, 1, 1, self.max_len), float("-inf"), device=dev, dtype=dtype)
        self.mask[..., : a.context] = 0

    @staticmethod
    def rms_norm(x, weight, eps=1e-6):
        # Written out as eager PyTorch does it: several elementwise kernels.
        var = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(var + eps)).to(x.dtype) * weight

    def step(self, tokens, pos):
        """One decode step: tokens [batch] (device), pos [1] (device) -> next tokens."""
        a = self.a
        b = tokens.shape[0]
        x = self.embed[tokens]  # [b, d]
        self.mask.index_fill_(-1, pos, 0)
        for L in self.layers:
            h = self.rms_norm(x, L["norm1"])
            q, k, v = F.linear(h, L["qkv"]).view(b, 3, a.heads, self.head_dim).unbind(1)
            L["k"].index_copy_(2, pos, k.unsqueeze(2))
            L["v"].index_copy_(2, pos, v.unsqueeze(2))
            attn = F.scaled_dot_product_attention(
                q.unsqueeze(2), L["k"], L["v"], attn_mask=self.mask
            )
            x = x + F.linear(attn.reshape(b, a.d_model), L["o"])
            h = self.rms_norm(x, L["norm2"])
            gate, up = F.linear(h, L["gate_up"]).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, L["down"])
        logits = F.linear(self.rms_norm(x, self.final_norm), self.lm_head)
        return logits.argmax(-1)


def main(argv=None):
    a = parse_args(argv)
    torch.backends.cuda.matmul.allow_tf32 = True
    dtype = torch.bfloat16 if a.device == "cuda" else torch.float32
    model = Decoder(a, dtype)
    eos = a.vocab  # never produced: the loop runs all its steps
    tokens = torch.zeros(a.batch, dtype=torch.long, device=a.device)
    pos = a.context

    graph = None
    if a.graphs:
        static_tokens = tokens.clone()
        static_pos = torch.tensor([pos], device=a.device)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm up on a side stream, as graph capture requires
            for _ in range(2):
                model.step(static_tokens, static_pos)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_next = model.step(static_tokens, static_pos)

    def decode_step(tokens, pos):
        if graph is None:
            # Naive loop: the position goes to the GPU from pageable host memory.
            return model.step(tokens, torch.tensor([pos], device=a.device))
        static_tokens.copy_(tokens)
        static_pos.fill_(pos)
        graph.replay()
        return static_next.clone()

    total = a.warmup + a.steps
    t0 = None
    for i in range(total):
        if i == a.warmup and a.device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            t0 = time.perf_counter()
        if a.device == "cuda":
            torch.cuda.nvtx.range_push("decode_step")
        tokens = decode_step(tokens, pos)
        pos += 1
        # The per-token host sync of a naive loop: stop when every sequence hit EOS.
        finished = bool((tokens == eos).all().item())
        if a.device == "cuda":
            torch.cuda.nvtx.range_pop()
        if finished:
            break
    if a.device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    if t0 is not None:
        dt = time.perf_counter() - t0
        print(f"batch={a.batch} graphs={a.graphs} steps={a.steps} "
              f"{dt / a.steps * 1e3:.3f} ms/step {a.batch * a.steps / dt:.0f} tok/s")


if __name__ == "__main__":
    main()
