"""Probes of transformers that are not language models (probe.py holds the helpers these share).
Each runs its measured calls between cudaProfilerStart/Stop after warm-up, no NVTX, and prints a
`FACTS {json}` line with what it did: the oracle its steps are checked against.

- `dit`: image generation with a diffusion transformer (as PixArt or DiT): per image a text
  encoder pass (a token embedding and 2 transformer layers), then `--steps` denoising steps,
  each one pass of a transformer over the latent's patches (a patchify convolution, `--layers`
  blocks of self-attention, cross-attention to the text and an MLP, each modulated by the
  timestep: adaLN) over the conditional and unconditional halves of a batch
  (classifier-free guidance) and a DDIM update, then a decoder (convolutions and upsampling)
  and the image copied to the host.
- `vit`: image classification serving (transformers' ViT, random weights): per batch, images
  copied from pinned host memory, one forward pass, and the predicted classes (argmax over
  1,000 logits) read back to the host.
- `empty_cache`: generate() of a small Llama shape in a server that calls
  `torch.cuda.empty_cache()` before every forward pass (a forward pre-hook), as some do to keep
  memory low: the allocator frees its cached blocks (`cudaFree`, which waits for the GPU) and
  allocates them again in the pass.
- `piecewise`: generate() with a static cache and a forward compiled in pieces, as vLLM's
  piecewise CUDA graphs: each decoder layer's attention runs eagerly
  (`torch.compiler.disable`), and the code between attentions (norms, MLPs, projections) is
  compiled with `mode="reduce-overhead"`, each piece replayed as a CUDA graph: a forward pass is
  layers + 1 graph replays with eager attention kernels between them.
- `streamer`: generate() in a worker thread with a streamer, as a chat server streams tokens
  (transformers' TextIteratorStreamer pattern): the main thread takes each token from a queue
  and runs `--consume-ms` of Python on it (detokenising, stop-string checks), holding the GIL
  while the worker thread launches the next pass.
- `prefetch`: a well-pipelined inference loop: each step's input (pinned, `--mb` MB) is copied
  to the GPU on a side stream one step ahead, the compute (a stack of large GEMMs) waits for it
  by an event, and the step's results are copied back without blocking; the host waits only
  for the results of the step before last. The GPU should be busy throughout.
"""

import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from probe import add_modes, count_forwards, generate_kw, llama_model, measured_generate, profiled, report
from probe2 import diffusion_images


class Block(nn.Module):
    """A DiT block: self-attention, cross-attention and an MLP, scaled and shifted by the
    timestep's modulation (adaLN-single, as PixArt)."""

    def __init__(self, d, heads, ctx):
        super().__init__()
        self.heads = heads
        self.n1, self.n2, self.n3 = (nn.LayerNorm(d, elementwise_affine=False) for _ in range(3))
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.q2, self.kv2, self.proj2 = nn.Linear(d, d), nn.Linear(ctx, 2 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))
        self.table = nn.Parameter(torch.randn(6, d) / d**0.5)

    def split(self, x):
        return x.unflatten(-1, (self.heads, -1)).transpose(1, 2)

    def forward(self, x, mod, ctx):
        s1, b1, g1, s2, b2, g2 = (self.table[None] + mod).chunk(6, 1)
        h = self.n1(x) * (1 + s1) + b1
        q, k, v = (self.split(t) for t in self.qkv(h).chunk(3, -1))
        x = x + g1 * self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2))
        k2, v2 = (self.split(t) for t in self.kv2(ctx).chunk(2, -1))
        a2 = F.scaled_dot_product_attention(self.split(self.q2(self.n2(x))), k2, v2)
        x = x + self.proj2(a2.transpose(1, 2).flatten(2))
        return x + g2 * self.mlp(self.n3(x) * (1 + s2) + b2)


class DiT(nn.Module):
    def __init__(self, size, d=768, layers=12, heads=12, ctx=512, patch=2):
        super().__init__()
        self.patch, self.side, self.base = patch, size // patch, 256
        self.embed = nn.Conv2d(4, d, patch, patch)
        self.pos = nn.Parameter(torch.randn(1, self.side**2, d) * 0.02)
        self.temb = nn.Sequential(nn.Linear(self.base, d), nn.SiLU(), nn.Linear(d, d))
        self.mod = nn.Sequential(nn.SiLU(), nn.Linear(d, 6 * d))
        self.blocks = nn.ModuleList(Block(d, heads, ctx) for _ in range(layers))
        self.norm, self.out = nn.LayerNorm(d, elementwise_affine=False), nn.Linear(d, patch * patch * 4)

    def forward(self, x, t, ctx):
        b = x.shape[0]
        half = self.base // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, device=x.device) / half)
        args = t.float()[None] * freqs
        te = self.temb(torch.cat([args.cos(), args.sin()]).to(x.dtype).expand(b, -1))
        mod = self.mod(te).unflatten(1, (6, -1))
        h = self.embed(x).flatten(2).transpose(1, 2) + self.pos
        for blk in self.blocks:
            h = blk(h, mod, ctx)
        h = self.out(self.norm(h))  # (b, side*side, p*p*4) back to (b, 4, size, size)
        h = h.unflatten(1, (self.side, self.side)).unflatten(-1, (self.patch, self.patch, 4))
        return h.permute(0, 5, 1, 3, 2, 4).reshape(b, 4, self.side * self.patch, self.side * self.patch)


def run_dit(a):
    """Image generation with a diffusion transformer (probe2.diffusion_images)."""
    passes, warm = diffusion_images(a, lambda: DiT(a.size, layers=a.layers))
    report(
        {
            "workload": "dit",
            "images": a.calls,
            "steps_per_image": a.steps,
            "dit_passes": passes,
            "warmup_dit_passes": warm,
            "batch": a.batch,
            "latent": a.size,
            "layers": a.layers,
        }
    )


def run_vit(a):
    """a.batches batches of a.batch images after a.warmup batches: one forward pass each."""
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    cfg = ViTConfig(
        image_size=224,
        patch_size=16,
        hidden_size=768,
        num_hidden_layers=a.layers,
        num_attention_heads=12,
        intermediate_size=3072,
        num_labels=1000,
    )
    model = ViTForImageClassification(cfg).to("cuda", torch.bfloat16).eval()
    passes = count_forwards(model)
    images = torch.randn(a.batch, 3, 224, 224, dtype=torch.bfloat16).pin_memory()
    preds = []

    def batch():
        x = images.to("cuda", non_blocking=True)
        preds.append(model(pixel_values=x).logits.argmax(-1).cpu())

    with torch.no_grad():
        warm = profiled(batch, a.warmup, a.batches, passes)
    report(
        {
            "workload": "vit",
            "batches": a.batches,
            "forwards": passes["n"] - warm,
            "warmup": a.warmup,
            "batch": a.batch,
            "layers": a.layers,
            "attn": model.config._attn_implementation,
        }
    )


def run_empty_cache(a):
    """generate() with the allocator's cache emptied before every forward pass."""
    model, cfg = llama_model(a.layers)
    empties = {"n": 0}

    def empty(module, args, kwargs):
        torch.cuda.empty_cache()
        empties["n"] += 1

    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt_len), device="cuda")
    model.register_forward_pre_hook(empty, with_kwargs=True)
    facts = measured_generate(a, model, ids, generate_kw(a, sample=False))
    # (the warm-up call's passes emptied the cache too)
    report({"workload": "empty_cache", "empty_cache_calls": empties["n"] - facts["warmup_forwards"], **facts})


def run_piecewise(a):
    """generate() with the attention eager and the rest compiled and replayed as CUDA graphs."""
    from transformers import StaticCache

    model, cfg = llama_model(a.layers)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt_len), device="cuda")
    cache = StaticCache(config=cfg, max_cache_len=a.prompt_len + a.new_tokens)
    kw = dict(generate_kw(a, sample=False), past_key_values=cache, disable_compile=True)
    with torch.no_grad():
        model.generate(ids, **kw)  # (the cache's tensors made outside the graphs)
    for layer in model.model.layers:
        layer.self_attn.forward = torch.compiler.disable(layer.self_attn.forward)
    model.forward = torch.compile(model.forward, mode="reduce-overhead")
    facts = measured_generate(a, model, ids, kw, warmups=3, before=cache.reset)
    from torch._dynamo.utils import counters

    facts["dynamo_unique_graphs"] = counters["stats"]["unique_graphs"]
    report({"workload": "piecewise", **facts})


def run_streamer(a):
    """a.calls generate() calls in a worker thread; the main thread consumes the streamed tokens."""
    import queue
    import threading
    import time

    from transformers.generation.streamers import BaseStreamer

    class Streamer(BaseStreamer):
        def __init__(self):
            self.q = queue.Queue()

        def put(self, value):
            self.q.put(value.flatten().tolist())  # (the prompt first, then each new token)

        def end(self):
            self.q.put(None)

    def consume(tokens, text):
        """Python work per token, about a.consume_ms: the text grown and searched for stops."""
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < a.consume_ms / 1e3:
            text = (text + "".join(chr(97 + t % 26) for t in tokens))[-4096:]
            _ = any(stop in text for stop in ("</s>", "###", "User:"))
        return text

    model, cfg = llama_model(a.layers)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt_len), device="cuda")
    forwards = count_forwards(model)
    kw = generate_kw(a, sample=False)

    streamed = []  # the puts each call streamed, the warm-up call's first

    def call():
        s = Streamer()
        worker = threading.Thread(target=model.generate, args=(ids,), kwargs=dict(kw, streamer=s), name="generate")
        worker.start()  # (generate() runs under no_grad itself)
        text, n = "", 0
        while (tokens := s.q.get()) is not None:
            text, n = consume(tokens, text), n + 1
        worker.join()
        streamed.append(n)

    warm = profiled(call, 1, a.calls, forwards)
    report(
        {
            "workload": "streamer",
            "forwards": forwards["n"] - warm,
            "warmup_forwards": warm,
            "streamed_puts": streamed[1:],
            "consume_ms": a.consume_ms,
            "calls": a.calls,
            "batch": a.batch,
            "new_tokens": a.new_tokens,
        }
    )


def run_prefetch(a):
    """a.steps steps after a.warmup: input prefetched a step ahead on a side stream, results read
    back two steps late."""
    torch.manual_seed(0)
    rows = a.mb * 2**20 // (2 * a.width)
    layers = [
        torch.randn(a.width, a.width, device="cuda", dtype=torch.bfloat16) / a.width**0.5 for _ in range(a.layers)
    ]
    host = [torch.randn(rows, a.width, dtype=torch.bfloat16).pin_memory() for _ in range(2)]
    dev = [torch.empty(rows, a.width, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
    out = [torch.empty(rows, dtype=torch.int64).pin_memory() for _ in range(3)]
    copy, main = torch.cuda.Stream(), torch.cuda.current_stream()
    ready = [torch.cuda.Event() for _ in range(2)]
    done = [torch.cuda.Event() for _ in range(3)]
    free = [torch.cuda.Event() for _ in range(2)]

    def upload(i):
        with torch.cuda.stream(copy):
            copy.wait_event(free[i % 2])  # (the buffer's last reader is done)
            dev[i % 2].copy_(host[i % 2], non_blocking=True)
            ready[i % 2].record(copy)

    def run(n):
        upload(0)
        for i in range(n):
            if i + 1 < n:
                upload(i + 1)
            main.wait_event(ready[i % 2])
            x = dev[i % 2]
            for w in layers:
                x = torch.relu(x @ w)
            free[i % 2].record(main)
            out[i % 3].copy_(x.argmax(-1), non_blocking=True)
            done[i % 3].record(main)
            if i >= 2:
                done[(i - 2) % 3].synchronize()  # the host reads the results of the step before last
        torch.cuda.synchronize()

    with torch.no_grad():
        run(a.warmup)
        torch.cuda.profiler.start()
        run(a.steps)
        torch.cuda.profiler.stop()
    report(
        {
            "workload": "prefetch",
            "steps": a.steps,
            "warmup": a.warmup,
            "mb": a.mb,
            "rows": rows,
            "width": a.width,
            "layers": a.layers,
        }
    )


MODES = {
    "dit": {"batch": 2, "size": 64, "steps": 20, "calls": 2, "guidance": 4.5, "layers": 12},
    "vit": {"batch": 32, "batches": 40, "warmup": 5, "layers": 12},
    "empty_cache": {"batch": 4, "prompt_len": 128, "new_tokens": 24, "calls": 2, "layers": 8},
    "piecewise": {"batch": 4, "prompt_len": 64, "new_tokens": 32, "calls": 2, "layers": 4},
    "streamer": {"batch": 1, "prompt_len": 64, "new_tokens": 48, "calls": 2, "layers": 8, "consume_ms": 3.0},
    "prefetch": {"steps": 40, "warmup": 5, "mb": 64, "width": 4096, "layers": 8},
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_modes(p.add_subparsers(dest="cmd", required=True), MODES)
    a = p.parse_args(argv)
    {
        "dit": run_dit,
        "vit": run_vit,
        "empty_cache": run_empty_cache,
        "piecewise": run_piecewise,
        "streamer": run_streamer,
        "prefetch": run_prefetch,
    }[a.cmd](a)


if __name__ == "__main__":
    main()
