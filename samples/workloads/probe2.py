"""More probes of the timeline model (probe.py holds the first ones and the helpers these share).
Each runs its measured calls between cudaProfilerStart/Stop after warm-up, no NVTX, and prints a
`FACTS {json}` line with what it did: the oracle its steps are checked against.

- `diffusion`: image generation as in a latent-diffusion pipeline, not an LLM: per image a text
  encoder pass (a token embedding and 2 transformer layers), then `--steps` denoising steps, each
  one pass of a small UNet (ResNet blocks at 3 resolutions, self-attention at the lowest) over
  the conditional and unconditional halves of a batch (classifier-free guidance) and a DDIM
  update, then a decoder (convolutions and upsampling) and the image copied to the host.
- `accum`: training a small Llama (transformers) with gradient accumulation: `--accum`
  micro-batches (forward and backward each) per optimizer step (gradient clipping, AdamW), bf16
  autocast; the loss read back once per optimizer step.
- `offload`: generate() of a Llama shape whose later half of layers lives in host memory
  (Accelerate's `dispatch_model` with those layers on "cpu"): their weights are copied to the GPU
  in every forward pass, from pageable memory.
- `emit_nvtx`: generate() under `torch.autograd.profiler.emit_nvtx()`, as PyTorch's docs suggest
  for Nsight Systems: an NVTX range around every operator PyTorch runs (`aten::linear`,
  `aten::add`...), thousands per forward pass, none of them a step.
- `shared`: two processes on one GPU at once (captured whole, both traced): a server's
  generate() calls (batch 4) and, beside it, another process's generate() of a smaller model
  (batch 1): the GPU's work is two programs' steps, interleaved.
"""

import argparse
import json
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from probe import add_modes, count_forwards, generate_kw, llama_model, measured_generate, profiled, report


class ResBlock(nn.Module):
    def __init__(self, cin, cout, temb):
        super().__init__()
        self.n1, self.c1 = nn.GroupNorm(32, cin), nn.Conv2d(cin, cout, 3, 1, 1)
        self.t = nn.Linear(temb, cout)
        self.n2, self.c2 = nn.GroupNorm(32, cout), nn.Conv2d(cout, cout, 3, 1, 1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, t):
        h = self.c1(F.silu(self.n1(x))) + self.t(t)[:, :, None, None]
        return self.skip(x) + self.c2(F.silu(self.n2(h)))


class CrossAttention(nn.Module):
    """Self-attention over the pixels, then attention to the text encoder's states."""

    def __init__(self, ch, ctx, heads=8):
        super().__init__()
        self.heads, self.norm = heads, nn.GroupNorm(32, ch)
        self.qkv, self.q2, self.kv2 = nn.Linear(ch, 3 * ch), nn.Linear(ch, ch), nn.Linear(ctx, 2 * ch)
        self.out = nn.Linear(ch, ch)

    def split(self, x):
        return x.unflatten(-1, (self.heads, -1)).transpose(1, 2)

    def forward(self, x, ctx):
        b, c, hh, ww = x.shape
        h = self.norm(x).flatten(2).transpose(1, 2)
        q, k, v = (self.split(t) for t in self.qkv(h).chunk(3, -1))
        h = h + F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2)
        k2, v2 = (self.split(t) for t in self.kv2(ctx).chunk(2, -1))
        h = h + F.scaled_dot_product_attention(self.split(self.q2(h)), k2, v2).transpose(1, 2).flatten(2)
        return x + self.out(h).transpose(1, 2).reshape(b, c, hh, ww)


class UNet(nn.Module):
    def __init__(self, chans=(128, 256, 512), ctx=512, temb=512):
        super().__init__()
        self.temb = nn.Sequential(nn.Linear(chans[0], temb), nn.SiLU(), nn.Linear(temb, temb))
        self.inp = nn.Conv2d(4, chans[0], 3, 1, 1)
        self.down, self.up, skips = nn.ModuleList(), nn.ModuleList(), [chans[0]]
        c = chans[0]
        for i, co in enumerate(chans):
            for _ in range(2):
                self.down.append(ResBlock(c, co, temb))
                c = co
                skips.append(c)
            if i < len(chans) - 1:
                self.down.append(nn.Conv2d(c, c, 3, 2, 1))
                skips.append(c)
        self.mid1, self.attn, self.mid2 = ResBlock(c, c, temb), CrossAttention(c, ctx), ResBlock(c, c, temb)
        for i, co in reversed(list(enumerate(chans))):
            for _ in range(3):
                self.up.append(ResBlock(c + skips.pop(), co, temb))
                c = co
            if i > 0:
                self.up.append(nn.Upsample(scale_factor=2))
        self.out = nn.Sequential(nn.GroupNorm(32, c), nn.SiLU(), nn.Conv2d(c, 4, 3, 1, 1))
        self.base = chans[0]

    def timestep(self, t, n):
        half = self.base // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, device=t.device) / half)
        args = t.float()[None] * freqs
        return torch.cat([args.cos(), args.sin()]).to(self.inp.weight.dtype).expand(n, -1)

    def forward(self, x, t, ctx):
        te = self.temb(self.timestep(t, x.shape[0]))
        h = self.inp(x)
        hs = [h]
        for m in self.down:
            h = m(h, te) if isinstance(m, ResBlock) else m(h)
            hs.append(h)
        h = self.mid2(self.attn(self.mid1(h, te), ctx), te)
        for m in self.up:
            h = m(torch.cat([h, hs.pop()], 1), te) if isinstance(m, ResBlock) else m(h)
        return self.out(h)


def diffusion_images(a, denoiser):
    """a.calls images (batch a.batch) of a.steps denoising steps each of the model denoiser()
    makes (a UNet, a DiT), after one warm-up image; its passes measured and in the warm-up."""
    torch.manual_seed(0)
    with torch.device("cuda"):
        enc_layer = nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True, norm_first=True)
        embed, encoder = nn.Embedding(49408, 512), nn.TransformerEncoder(enc_layer, 2, enable_nested_tensor=False)
        net = denoiser()
        decoder = nn.Sequential(nn.Conv2d(4, 256, 3, 1, 1), nn.SiLU(), nn.Upsample(scale_factor=2),
                                nn.Conv2d(256, 128, 3, 1, 1), nn.SiLU(), nn.Upsample(scale_factor=2),
                                nn.Conv2d(128, 64, 3, 1, 1), nn.SiLU(), nn.Conv2d(64, 3, 3, 1, 1))
    for m in (embed, encoder, net, decoder):
        m.to(torch.bfloat16).eval()
    passes = count_forwards(net)
    # DDIM over a.steps of 1,000 training timesteps, the schedule's floats kept on the host
    betas = torch.linspace(0.00085**0.5, 0.012**0.5, 1000, dtype=torch.float64) ** 2
    abar = torch.cumprod(1 - betas, 0).tolist()
    ts = list(range(999, -1, -1000 // a.steps))[: a.steps]
    prompt = torch.randint(0, 49408, (2 * a.batch, 77), device="cuda")

    def image():
        ctx = encoder(embed(prompt))
        x = torch.randn(a.batch, 4, a.size, a.size, device="cuda", dtype=torch.bfloat16)
        for i, t in enumerate(ts):
            eps_c, eps_u = net(torch.cat([x, x]), torch.tensor(t, device="cuda"), ctx).chunk(2)
            eps = eps_u + a.guidance * (eps_c - eps_u)
            ab, ab_prev = abar[t], abar[ts[i + 1]] if i + 1 < len(ts) else 1.0
            x0 = (x - (1 - ab) ** 0.5 * eps) / ab**0.5
            x = ab_prev**0.5 * x0 + (1 - ab_prev) ** 0.5 * eps
        return decoder(x).float().clamp(-1, 1).cpu()

    with torch.no_grad():
        warm = profiled(image, 1, a.calls, passes)
    return passes["n"] - warm, warm


def run_diffusion(a):
    """Latent diffusion with a UNet (diffusion_images)."""
    passes, warm = diffusion_images(a, UNet)
    report({"workload": "diffusion", "images": a.calls, "steps_per_image": a.steps, "unet_passes": passes,
            "warmup_unet_passes": warm, "batch": a.batch, "latent": a.size})


def run_accum(a):
    """a.iters optimizer steps of a.accum micro-batches each, after a.warmup steps."""
    model, cfg = llama_model(a.layers)
    model = model.float().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    passes = count_forwards(model)
    g = torch.Generator(device="cuda").manual_seed(0)

    def step():
        total = torch.zeros((), device="cuda")
        for _ in range(a.accum):
            ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq_len), device="cuda", generator=g)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss / a.accum
            loss.backward()
            total += loss.detach()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return total.item()  # the loop logs its loss: a sync per optimizer step

    warm = profiled(step, a.warmup, a.iters, passes)
    report({"workload": "accum", "optimizer_steps": a.iters, "micro_batches": passes["n"] - warm,
            "accum": a.accum, "warmup": a.warmup, "batch": a.batch, "seq_len": a.seq_len, "layers": a.layers})


def run_offload(a):
    """generate() with the later half of the layers kept in host memory by Accelerate."""
    from accelerate import dispatch_model

    model, cfg = llama_model(a.layers, hidden=2048, inter=5632, heads=16, kv_heads=8)
    model = model.cpu()
    device_map = {"model.embed_tokens": 0, "model.norm": 0, "model.rotary_emb": 0, "lm_head": 0}
    device_map.update({f"model.layers.{i}": 0 if i < a.layers // 2 else "cpu" for i in range(a.layers)})
    model = dispatch_model(model, device_map=device_map, main_device=0)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt_len), device="cuda")
    facts = measured_generate(a, model, ids, generate_kw(a, sample=False))
    offloaded = sum(p.numel() * 2 for i in range(a.layers // 2, a.layers) for p in model.model.layers[i].parameters())
    report({"workload": "offload", "offloaded_layers": a.layers - a.layers // 2, "offloaded_bytes": offloaded, **facts})


def run_emit_nvtx(a):
    """generate() with every operator in an NVTX range of its own (emit_nvtx)."""
    model, cfg = llama_model(a.layers)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt_len), device="cuda")
    with torch.autograd.profiler.emit_nvtx():
        facts = measured_generate(a, model, ids, generate_kw(a, sample=False))
    report({"workload": "emit_nvtx", **facts})


def run_shared(a):
    """The parent starts both processes and reports their counts; each child runs its calls."""
    import subprocess
    import sys

    if a.role:
        layers, batch = (8, 4) if a.role == "server" else (4, 1)
        model, cfg = llama_model(layers)
        ids = torch.randint(0, cfg.vocab_size, (batch, a.prompt_len), device="cuda")
        forwards = count_forwards(model)
        with torch.no_grad():
            for _ in range(a.calls):
                model.generate(ids, **generate_kw(a, sample=False))
        torch.cuda.synchronize()
        print("CHILD", json.dumps({"role": a.role, "batch": batch, "layers": layers, "forwards": forwards["n"]}), flush=True)
        return
    args = [sys.executable, __file__, "shared", "--calls", str(a.calls), "--new-tokens", str(a.new_tokens)]
    kids = [subprocess.Popen([*args, "--role", r], stdout=subprocess.PIPE, text=True) for r in ("server", "neighbour")]
    outs = [json.loads(line.split(" ", 1)[1]) for k in kids for line in k.communicate()[0].splitlines() if line.startswith("CHILD")]
    report({"workload": "shared", "calls": a.calls, "new_tokens": a.new_tokens, "processes": outs})


MODES = {
    "diffusion": {"batch": 2, "size": 64, "steps": 30, "calls": 2, "guidance": 7.5},  # (size: the latent's side)
    "accum": {"batch": 4, "seq_len": 512, "accum": 4, "iters": 12, "warmup": 2, "layers": 4},
    "offload": {"batch": 4, "prompt_len": 64, "new_tokens": 16, "calls": 2, "layers": 8},
    "emit_nvtx": {"batch": 4, "prompt_len": 128, "new_tokens": 24, "calls": 2, "layers": 8},
    "shared": {"calls": 3, "new_tokens": 48, "prompt_len": 64},
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    add_modes(sub, MODES)
    sub.choices["shared"].add_argument("--role", choices=["server", "neighbour"], help="(a child's)")
    a = p.parse_args(argv)
    runs = {
        "diffusion": run_diffusion,
        "accum": run_accum,
        "offload": run_offload,
        "emit_nvtx": run_emit_nvtx,
        "shared": run_shared,
    }
    runs[a.cmd](a)


if __name__ == "__main__":
    main()
