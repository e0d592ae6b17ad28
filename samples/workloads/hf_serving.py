"""LLM-serving workloads of HF transformers on a Llama-shaped model with random weights.

Each subcommand is one sample in samples/ (captured by `capture.sh ... llm`). No weights are
downloaded: every model is a LlamaForCausalLM built from a LlamaConfig with random
initialisation, in bf16 on the GPU. None of them adds NVTX ranges.

- `generate`: one `model.generate()` call (greedy, fixed length) after one warm-up call,
  bracketed by cudaProfilerStart/Stop. `--attn eager|sdpa` picks the attention kernels
  (eager: batched GEMM, softmax, batched GEMM), `--cache dynamic|static` the KV cache
  (DynamicCache grows with torch.cat every step; the static cache is preallocated and
  written with index_copy_; its automatic torch.compile is switched off).
- `startup`: no capture range (profile the whole process): build a ~1.3 B-parameter model
  on the CPU, move it to the GPU with `.to("cuda")` (pageable copies, each followed by a
  sync), then run back-to-back prefill forward passes under torch.no_grad and exit.
- `moe`: one `generate()` call of a Mixtral-shaped mixture-of-experts model (8 experts, top-2)
  with `--experts eager` (transformers' reference loop: one_hot, `nonzero` and, per expert hit,
  `torch.where`, two GEMMs and `index_add_`; each `nonzero`/`where` reads a size back to the
  host) or `--experts grouped_mm` (sort by expert, histc, one grouped GEMM per projection).
- `sample`: a hand-written decode loop (DynamicCache, no `generate()`) that samples with
  temperature and top-p either on the host (`--where host`: the logits of the last position
  are copied to pageable host memory every step and sampled with NumPy; the chosen ids are
  copied back) or on the GPU (`--where gpu`: softmax, sort, cumsum, multinomial; no copy).
- `cb`: continuous batching, `model.generate_batch()` with `attn_implementation="paged|sdpa"`
  and CUDA graphs, for requests of varying prompt lengths; one warm-up call, then the
  measured call between cudaProfilerStart/Stop.

Each run prints a `FACTS {json}` line (wall time of the measured region, forward steps) and
writes the same JSON to `--json` when given.
"""

import argparse
import json
import random
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM, MixtralConfig, MixtralForCausalLM


def add_model_args(p, layers, hidden, heads, kv_heads, inter):
    p.add_argument("--layers", type=int, default=layers)
    p.add_argument("--hidden", type=int, default=hidden)
    p.add_argument("--heads", type=int, default=heads)
    p.add_argument("--kv-heads", type=int, default=kv_heads)
    p.add_argument("--intermediate", type=int, default=inter)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--device", default="cuda")
    p.add_argument("--json", help="also write the facts to this file")


def add_decode_args(p, batch, prompt_len, new_tokens):
    p.add_argument("--batch", type=int, default=batch)
    p.add_argument("--prompt-len", type=int, default=prompt_len)
    p.add_argument("--new-tokens", type=int, default=new_tokens)


def make_config(a, attn):
    return LlamaConfig(hidden_size=a.hidden, intermediate_size=a.intermediate,
                       num_hidden_layers=a.layers, num_attention_heads=a.heads,
                       num_key_value_heads=a.kv_heads, vocab_size=a.vocab,
                       max_position_embeddings=4096, attn_implementation=attn)


def build(a, attn):
    """The model, built on the target device, in bf16 (fp32 on the CPU)."""
    torch.manual_seed(0)
    dtype = torch.bfloat16 if a.device == "cuda" else torch.float32
    model = LlamaForCausalLM(make_config(a, attn)).to(device=a.device, dtype=dtype).eval()
    return model


def count_forwards(model):
    counter = {"n": 0}

    def hook(module, args, kwargs):
        counter["n"] += 1

    model.register_forward_pre_hook(hook, with_kwargs=True)
    return counter


def _counted(fn, counts, name):
    def wrapper(*args, **kwargs):
        counts[name] = counts.get(name, 0) + 1
        return fn(*args, **kwargs)
    return wrapper


def sync(a):
    if a.device == "cuda":
        torch.cuda.synchronize()


def profiler(a, start):
    if a.device != "cuda":
        return
    torch.cuda.synchronize()
    if start:
        torch.cuda.profiler.start()
    else:
        torch.cuda.profiler.stop()


def profiled(a, fn):
    """Runs fn() inside the capture range (cudaProfilerStart/Stop), waiting for the GPU at the
    end: (its result, wall seconds)."""
    profiler(a, True)
    t0 = time.perf_counter()
    out = fn()
    sync(a)
    wall = time.perf_counter() - t0
    profiler(a, False)
    return out, wall


def greedy(a):
    """generate() arguments: greedy, exactly --new-tokens, no end-of-sequence stop."""
    return dict(max_new_tokens=a.new_tokens, min_new_tokens=a.new_tokens, do_sample=False,
                pad_token_id=0, eos_token_id=None)


def report(a, facts):
    line = json.dumps(facts, sort_keys=True)
    print("FACTS", line, flush=True)
    if a.json:
        with open(a.json, "w") as f:
            f.write(line + "\n")


def run_generate(a):
    model = build(a, a.attn)
    forwards = count_forwards(model)
    ids = torch.randint(0, a.vocab, (a.batch, a.prompt_len), device=a.device)
    kw = greedy(a)
    if a.cache == "static":
        # generate() would torch.compile the forward of a static cache on CUDA: keep it eager,
        # so that the only difference from the dynamic-cache run is the cache.
        kw.update(cache_implementation="static", disable_compile=True)
    # Which KV-cache layer class the measured call writes to (DynamicLayer: torch.cat).
    from transformers import cache_utils
    updates = {}
    for name in ("DynamicLayer", "StaticLayer"):
        cls = getattr(cache_utils, name, None)
        if cls is not None:
            cls.update = _counted(cls.update, updates, name)
    with torch.no_grad():
        model.generate(ids, **kw)  # warm-up
        sync(a)
        forwards["n"] = 0
        updates.clear()
        out, wall = profiled(a, lambda: model.generate(ids, **kw))
    report(a, dict(workload="generate", attn=a.attn, cache=a.cache, batch=a.batch,
                   prompt_len=a.prompt_len, new_tokens=a.new_tokens, layers=a.layers,
                   out_shape=list(out.shape), forwards=forwards["n"], wall_ms=round(wall * 1e3, 3),
                   ms_per_forward=round(wall * 1e3 / max(forwards["n"], 1), 3),
                   cache_layer_updates=dict(updates)))


def run_startup(a):
    t_start = time.perf_counter()
    torch.manual_seed(0)
    cfg = make_config(a, "sdpa")
    # Built on the CPU in bf16, as a checkpoint read into host memory would be: no random
    # initialisation (slow on the CPU); the matrices are filled from a pool of random values.
    from transformers.initialization import no_init_weights
    torch.set_default_dtype(torch.bfloat16 if a.device == "cuda" else torch.float32)
    with no_init_weights():
        model = LlamaForCausalLM(cfg).eval()
    pool = torch.randn(1 << 24) * 0.02
    pool = pool.to(torch.get_default_dtype())
    with torch.no_grad():
        for name, p in model.named_parameters():
            flat = p.view(-1)
            if "norm" in name:
                flat.fill_(1.0)
                continue
            for off in range(0, flat.numel(), pool.numel()):
                k = min(pool.numel(), flat.numel() - off)
                flat[off:off + k].copy_(pool[:k])
    torch.set_default_dtype(torch.float32)
    nparams = sum(p.numel() for p in model.parameters())
    t_built = time.perf_counter()
    # Pageable host memory to the GPU, tensor by tensor (each copy is followed by a sync).
    model.to(a.device)
    sync(a)
    t_moved = time.perf_counter()
    forwards = count_forwards(model)
    ids = torch.randint(0, a.vocab, (a.batch, a.seq), device=a.device)
    pass_ends = []
    with torch.no_grad():
        for i in range(a.passes):
            model(ids, use_cache=False)
            if i == 0:
                sync(a)  # first pass: cuBLAS/cuDNN initialisation and allocator growth
                pass_ends.append(time.perf_counter())
        sync(a)
    t_end = time.perf_counter()
    steady = (t_end - pass_ends[0]) / max(a.passes - 1, 1)
    tokens = a.batch * a.seq
    report(a, dict(workload="startup", params=nparams, param_bytes=nparams * (2 if a.device == "cuda" else 4),
                   layers=a.layers, hidden=a.hidden, batch=a.batch, seq=a.seq, forwards=forwards["n"],
                   build_s=round(t_built - t_start, 3), to_device_s=round(t_moved - t_built, 3),
                   first_pass_s=round(pass_ends[0] - t_moved, 3),
                   steady_ms_per_pass=round(steady * 1e3, 3),
                   steady_tokens_per_s=round(tokens / steady),
                   steady_tflops=round(2 * nparams * tokens / steady / 1e12, 1),
                   total_s=round(t_end - t_start, 3)))


def run_cb(a):
    from transformers import ContinuousBatchingConfig, GenerationConfig
    from transformers.generation.continuous_batching import continuous_api, model_runner

    model = build(a, "paged|sdpa")
    forwards = count_forwards(model)
    steps = {"n": 0, "captures": 0, "replays": 0}
    orig_step = continuous_api.ContinuousBatchProcessor._generation_step
    orig_capture = model_runner.ModelRunner._capture_graph

    def step(self, m):
        steps["n"] += 1
        return orig_step(self, m)

    def capture(self, *args):
        steps["captures"] += 1
        return orig_capture(self, *args)

    continuous_api.ContinuousBatchProcessor._generation_step = step
    model_runner.ModelRunner._capture_graph = capture
    if a.device == "cuda":
        orig_replay = torch.cuda.CUDAGraph.replay

        def replay(self):
            steps["replays"] += 1
            return orig_replay(self)

        torch.cuda.CUDAGraph.replay = replay

    rng = random.Random(0)
    lengths = [a.min_prompt + (a.max_prompt - a.min_prompt) * i // max(a.requests - 1, 1)
               for i in range(a.requests)]
    rng.shuffle(lengths)
    # Two sets of prompts of the same lengths: the measured call shares no prefix with the
    # warm-up call (the paged cache keeps the blocks of finished requests for prefix reuse).
    warm_inputs = [[rng.randrange(1, a.vocab) for _ in range(n)] for n in lengths]
    inputs = [[rng.randrange(1, a.vocab) for _ in range(n)] for n in lengths]
    gen = GenerationConfig(max_new_tokens=a.new_tokens, do_sample=False, eos_token_id=None)
    use_graphs = a.graphs and a.device == "cuda"
    cbc = dict(use_cuda_graph=use_graphs, max_batch_tokens=a.max_batch_tokens)
    if a.device == "cuda":
        cbc["max_memory_percent"] = a.max_memory_percent
    else:
        cbc["num_blocks"] = 64

    def call(inputs):
        return model.generate_batch(inputs=inputs, generation_config=gen,
                                    continuous_batching_config=ContinuousBatchingConfig(**cbc),
                                    persistent_manager=True)

    t0 = time.perf_counter()
    call(warm_inputs)  # warm-up: creates the paged cache, captures the CUDA graphs
    sync(a)
    warm = time.perf_counter() - t0
    warm_steps = dict(steps)
    for k in steps:
        steps[k] = 0
    forwards["n"] = 0
    out, wall = profiled(a, lambda: call(inputs))
    gen_tokens = sum(len(r.generated_tokens) for r in out.values())
    errors = sum(1 for r in out.values() if getattr(r, "error", None) is not None)
    mgr = getattr(model, "_cached_continuous_batching_manager", None)
    resolved = {}
    if mgr is not None:
        c = mgr.continuous_batching_config
        for k in ("use_cuda_graph", "use_async_batching", "max_batch_tokens", "num_blocks",
                  "block_size", "max_requests_per_batch", "max_blocks_per_request"):
            v = getattr(c, k, None)
            resolved[k] = list(v) if isinstance(v, tuple) else v
    report(a, dict(workload="cb", graphs=use_graphs, requests=a.requests, prompt_lengths=sorted(lengths),
                   prompt_tokens=sum(lengths), new_tokens=a.new_tokens, results=len(out),
                   generated_tokens=gen_tokens, errors=errors, warmup_call_s=round(warm, 3),
                   warmup_call_steps=warm_steps, steps=steps["n"], graph_captures=steps["captures"],
                   graph_replays=steps["replays"], model_forward_calls=forwards["n"],
                   wall_ms=round(wall * 1e3, 3), ms_per_step=round(wall * 1e3 / max(steps["n"], 1), 3),
                   resolved_config=resolved))
    if mgr is not None:
        model.destroy_cached_continuous_batching_manager()


def run_moe(a):
    torch.manual_seed(0)
    cfg = MixtralConfig(hidden_size=a.hidden, intermediate_size=a.intermediate, num_hidden_layers=a.layers,
                        num_attention_heads=a.heads, num_key_value_heads=a.kv_heads, vocab_size=a.vocab,
                        num_local_experts=a.num_experts, num_experts_per_tok=a.top_k,
                        max_position_embeddings=4096, attn_implementation="sdpa",
                        experts_implementation=a.experts)
    dtype = torch.bfloat16 if a.device == "cuda" else torch.float32
    model = MixtralForCausalLM(cfg).to(device=a.device, dtype=dtype).eval()
    forwards = count_forwards(model)
    ids = torch.randint(0, a.vocab, (a.batch, a.prompt_len), device=a.device)
    kw = greedy(a)
    with torch.no_grad():
        model.generate(ids, **kw)  # warm-up
        sync(a)
        forwards["n"] = 0
        out, wall = profiled(a, lambda: model.generate(ids, **kw))
    report(a, dict(workload="moe", experts=a.experts, resolved_experts=getattr(model.config, "_experts_implementation", None),
                   num_experts=a.num_experts, top_k=a.top_k, batch=a.batch, prompt_len=a.prompt_len,
                   new_tokens=a.new_tokens, layers=a.layers, out_shape=list(out.shape), forwards=forwards["n"],
                   wall_ms=round(wall * 1e3, 3), ms_per_forward=round(wall * 1e3 / max(forwards["n"], 1), 3)))


def sample_host(logits, temperature, top_p, rng):
    """Temperature and top-p sampling in NumPy, one row per sequence (the logits are on the host)."""
    import numpy as np
    x = logits.astype(np.float64) / temperature
    x -= x.max(axis=-1, keepdims=True)
    p = np.exp(x)
    p /= p.sum(axis=-1, keepdims=True)
    out = []
    for row in p:
        order = np.argsort(-row)
        cum = np.cumsum(row[order])
        keep = order[: int(np.searchsorted(cum, top_p)) + 1]
        q = row[keep] / row[keep].sum()
        out.append(int(rng.choice(keep, p=q)))
    return out


def sample_gpu(logits, temperature, top_p, gen):
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    sorted_p, order = torch.sort(probs, dim=-1, descending=True)
    cum = torch.cumsum(sorted_p, dim=-1)
    sorted_p = sorted_p.masked_fill(cum - sorted_p > top_p, 0.0)
    choice = torch.multinomial(sorted_p / sorted_p.sum(dim=-1, keepdim=True), 1, generator=gen)
    return order.gather(-1, choice)


def run_sample(a):
    import numpy as np
    from transformers import DynamicCache
    model = build(a, "sdpa")
    forwards = count_forwards(model)
    ids = torch.randint(0, a.vocab, (a.batch, a.prompt_len), device=a.device)
    rng = np.random.default_rng(0)
    gen = torch.Generator(device=a.device).manual_seed(0)

    def decode(n):
        cache = DynamicCache()
        out = model(input_ids=ids, past_key_values=cache, use_cache=True)
        tokens = []
        for _ in range(n):
            logits = out.logits[:, -1, :]
            if a.where == "host":
                host = logits.float().cpu().numpy()  # pageable copy: waits for the forward pass
                nxt = torch.tensor(sample_host(host, a.temperature, a.top_p, rng), device=a.device)[:, None]
            else:
                nxt = sample_gpu(logits, a.temperature, a.top_p, gen)
            tokens.append(nxt)
            out = model(input_ids=nxt, past_key_values=cache, use_cache=True)
        return torch.cat(tokens, dim=1)

    with torch.no_grad():
        # Warm-up over the same lengths: cuDNN's SDPA builds (compiles and loads) an execution
        # plan for each new KV length, which would otherwise dominate the measured steps
        # (`--warmup-tokens 4` shows that).
        decode(a.new_tokens if a.warmup_tokens is None else a.warmup_tokens)
        sync(a)
        forwards["n"] = 0
        out, wall = profiled(a, lambda: decode(a.new_tokens))
    report(a, dict(workload="sample", where=a.where, batch=a.batch, prompt_len=a.prompt_len,
                   new_tokens=a.new_tokens, layers=a.layers, vocab=a.vocab, out_shape=list(out.shape),
                   forwards=forwards["n"], logits_bytes_per_step=a.batch * a.vocab * 4,
                   wall_ms=round(wall * 1e3, 3), ms_per_token=round(wall * 1e3 / max(a.new_tokens, 1), 3)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="one generate() call (eager/sdpa attention, dynamic/static cache)")
    add_model_args(g, layers=8, hidden=1024, heads=16, kv_heads=4, inter=2816)
    g.add_argument("--attn", choices=["eager", "sdpa"], default="sdpa")
    g.add_argument("--cache", choices=["dynamic", "static"], default="dynamic")
    add_decode_args(g, batch=8, prompt_len=512, new_tokens=16)
    s = sub.add_parser("startup", help="whole process: CPU build, .to(cuda), prefill loop")
    add_model_args(s, layers=24, hidden=2048, heads=16, kv_heads=16, inter=5632)
    s.add_argument("--batch", type=int, default=8)
    s.add_argument("--seq", type=int, default=1024)
    s.add_argument("--passes", type=int, default=20)
    m = sub.add_parser("moe", help="one generate() call of a Mixtral-shaped MoE model")
    add_model_args(m, layers=8, hidden=1024, heads=16, kv_heads=4, inter=1408)
    m.add_argument("--experts", choices=["eager", "grouped_mm"], default="eager")
    m.add_argument("--num-experts", type=int, default=8)
    m.add_argument("--top-k", type=int, default=2)
    add_decode_args(m, batch=8, prompt_len=128, new_tokens=32)
    d = sub.add_parser("sample", help="a decode loop sampling on the host or on the GPU")
    add_model_args(d, layers=8, hidden=1024, heads=16, kv_heads=4, inter=2816)
    d.add_argument("--where", choices=["host", "gpu"], default="host")
    add_decode_args(d, batch=8, prompt_len=128, new_tokens=32)
    d.add_argument("--temperature", type=float, default=0.8)
    d.add_argument("--top-p", type=float, default=0.9)
    d.add_argument("--warmup-tokens", type=int, help="tokens of the warm-up decode (default: --new-tokens)")
    c = sub.add_parser("cb", help="continuous batching generate_batch() with CUDA graphs")
    add_model_args(c, layers=8, hidden=1024, heads=16, kv_heads=4, inter=2816)
    c.add_argument("--requests", type=int, default=32)
    c.add_argument("--min-prompt", type=int, default=16)
    c.add_argument("--max-prompt", type=int, default=400)
    c.add_argument("--new-tokens", type=int, default=32)
    c.add_argument("--max-batch-tokens", type=int, default=1024)
    c.add_argument("--max-memory-percent", type=float, default=0.3)
    c.add_argument("--no-graphs", dest="graphs", action="store_false")
    a = p.parse_args(argv)
    {"generate": run_generate, "startup": run_startup, "cb": run_cb, "moe": run_moe,
     "sample": run_sample}[a.cmd](a)


if __name__ == "__main__":
    main()
