"""Tensor-parallel decode loop: the decoder of decode.py split across GPUs (Megatron style).

One process per GPU (NCCL through torch.distributed). Each layer's QKV and gate/up
projections are column-parallel, its output and down projections row-parallel, so each
layer ends its attention and its MLP with an all-reduce of the hidden state.

Variants (--variant):
- exposed: the all-reduce runs in line, so every GPU waits for it (the usual eager TP);
- overlap: the batch is split in two micro-batches, and the all-reduce of one runs while
  the other computes (async all-reduce, waited on only when its result is needed);
- straggler: as exposed, but rank 1 does extra work in each layer, so rank 0 waits for
  it inside every all-reduce.

Run: python3 tp_decode.py --world 2 --variant exposed   (spawns one process per GPU)
The profiled region is bracketed by cudaProfilerStart/Stop; each step is an NVTX range
named `decode_step`. On a CPU machine, --device cpu runs the same code over gloo.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

# NVLink multicast stays off on shared hosts (see the device tool's KINDS.md).
for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
               ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[_k] = _v


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--variant", choices=["exposed", "overlap", "straggler"], default="exposed")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--d-model", type=int, default=4096)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--ffn", type=int, default=11008)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--device", default="cuda")
    p.add_argument("--port", default="29511")
    return p.parse_args(argv)


class ShardedDecoder:
    def __init__(self, a, rank, world, dev, dtype):
        assert a.heads % world == 0 and a.ffn % world == 0
        g = torch.Generator(device=dev).manual_seed(rank)

        def w(*shape):
            return torch.randn(*shape, device=dev, dtype=dtype, generator=g) * 0.02

        self.a, self.rank, self.world = a, rank, world
        self.heads = a.heads // world  # heads on this rank
        self.head_dim = a.d_model // a.heads
        self.ffn = a.ffn // world
        self.max_len = a.context + a.warmup + a.steps + 1
        self.embed = w(a.vocab, a.d_model)
        self.lm_head = w(a.vocab, a.d_model)
        self.layers = []
        for _ in range(a.layers):
            self.layers.append(dict(
                qkv=w(3 * self.heads * self.head_dim, a.d_model),
                o=w(a.d_model, self.heads * self.head_dim),
                gate_up=w(2 * self.ffn, a.d_model),
                down=w(a.d_model, self.ffn),
                k=w(a.batch, self.heads, self.max_len, self.head_dim),
                v=w(a.batch, self.heads, self.max_len, self.head_dim),
            ))
        self.mask = torch.full((1, 1, 1, self.max_len), float("-inf"), device=dev, dtype=dtype)
        self.mask[..., : a.context] = 0
        # Work that only the straggler rank does: a GEMM the size of its MLP.
        self.extra = w(self.ffn, a.d_model) if (a.variant == "straggler" and rank == 1) else None

    @staticmethod
    def rms_norm(x, eps=1e-6):
        var = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(var + eps)).to(x.dtype)

    def attn_part(self, L, x, rows, pos):
        b = x.shape[0]
        h = self.rms_norm(x)
        q, k, v = F.linear(h, L["qkv"]).view(b, 3, self.heads, self.head_dim).unbind(1)
        L["k"][rows].index_copy_(2, pos, k.unsqueeze(2))
        L["v"][rows].index_copy_(2, pos, v.unsqueeze(2))
        o = F.scaled_dot_product_attention(q.unsqueeze(2), L["k"][rows], L["v"][rows],
                                           attn_mask=self.mask)
        return F.linear(o.reshape(b, -1), L["o"])  # partial sum: all-reduce needed

    def mlp_part(self, L, x):
        gate, up = F.linear(self.rms_norm(x), L["gate_up"]).chunk(2, dim=-1)
        out = F.linear(F.silu(gate) * up, L["down"])  # partial sum: all-reduce needed
        if self.extra is not None:
            out = out + 0 * F.linear(x, self.extra).sum()
        return out

    def step(self, tokens, pos):
        x = self.embed[tokens]
        self.mask.index_fill_(-1, pos, 0)
        if self.a.variant == "overlap":
            return self.step_overlapped(x, pos)
        rows = slice(None)
        for L in self.layers:
            y = self.attn_part(L, x, rows, pos)
            dist.all_reduce(y)
            x = x + y
            y = self.mlp_part(L, x)
            dist.all_reduce(y)
            x = x + y
        return F.linear(self.rms_norm(x), self.lm_head).argmax(-1)

    def step_overlapped(self, x, pos):
        # Two micro-batches: while one's all-reduce is in flight, the other computes.
        half = x.shape[0] // 2
        parts = [x[:half], x[half:]]
        rows = [slice(0, half), slice(half, None)]
        pending = [None, None]
        for L in self.layers:
            for stage in ("attn", "mlp"):
                for i in (0, 1):
                    if pending[i] is not None:
                        work, y = pending[i]
                        work.wait()
                        parts[i] = parts[i] + y
                    if stage == "attn":
                        y = self.attn_part(L, parts[i], rows[i], pos)
                    else:
                        y = self.mlp_part(L, parts[i])
                    pending[i] = (dist.all_reduce(y, async_op=True), y)
        for i in (0, 1):
            work, y = pending[i]
            work.wait()
            parts[i] = parts[i] + y
        x = torch.cat(parts)
        return F.linear(self.rms_norm(x), self.lm_head).argmax(-1)


def worker(rank, a):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", a.port)
    cuda = a.device == "cuda"
    if cuda:
        torch.cuda.set_device(rank)
        dev = torch.device("cuda", rank)
    else:
        dev = torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=a.world,
                            device_id=dev if cuda else None)
    dtype = torch.bfloat16 if cuda else torch.float32
    model = ShardedDecoder(a, rank, a.world, dev, dtype)
    tokens = torch.zeros(a.batch, dtype=torch.long, device=dev)
    pos = a.context
    t0 = None
    for i in range(a.warmup + a.steps):
        if i == a.warmup:
            dist.barrier()
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.profiler.start()
            t0 = time.perf_counter()
        if cuda:
            torch.cuda.nvtx.range_push("decode_step")
        tokens = model.step(tokens, torch.tensor([pos], device=dev))
        pos += 1
        finished = bool((tokens == a.vocab).all().item())  # per-token host sync
        if cuda:
            torch.cuda.nvtx.range_pop()
        if finished:
            break
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    dt = time.perf_counter() - t0
    if rank == 0:
        print(f"tp={a.world} variant={a.variant} batch={a.batch} "
              f"{dt / a.steps * 1e3:.3f} ms/step")
    dist.barrier()
    dist.destroy_process_group()


def main(argv=None):
    a = parse_args(argv)
    mp.spawn(worker, args=(a,), nprocs=a.world, join=True)


if __name__ == "__main__":
    main()
