"""Workloads for the timeline model: steps that are hard to find, and time after a sync that the
CPU spends running code.

Each subcommand is one sample in samples/ (captured by `capture.sh ... timeline`). No weights
are downloaded (random weights), and none of them adds NVTX ranges unless `--nvtx` is given.
Each run prints a `FACTS {json}` line measured by the workload itself (forward passes, wall
time, GPU time per step by CUDA events, CPU time per step by the host clock) and writes the
same JSON to `--json` when given: the oracle the tests compare the tool's steps against.

- `requests`: HF transformers `generate()` of a Llama-shaped model, batch 4, several requests
  one after another (`--requests`) after one warm-up request. Each request's prompt is longer
  than the last one's end, so every decode step meets a KV length that no earlier step had:
  cuDNN's SDPA builds a new execution plan inside every step, and the steps are irregular.
- `stream`: a streaming decode loop. Each step replays one CUDA graph (the forward pass of the
  naive decoder in decode.py), reads the new token back with `.tolist()` (blocks until the
  graph finishes), then runs pure Python: `--work python` detokenizes and checks stop strings
  (`detokenize`, `match_stop_strings` below), `--work sleep` sleeps `--cpu-ms` instead.
- `sweep`: a kernel benchmark sweep: a Triton row-softmax kernel timed over a series of
  shapes, a few iterations each; each new shape is a new `tl.constexpr` block size, so Triton
  compiles the kernel again on its first launch. No LLM work at all.
- `prefill`: prefill passes (batch x prompt tokens, bf16) of the Llama-shaped model with
  SDPA forced onto one backend (`--backend math|flash|cudnn|efficient`): the math path runs
  QK^T and PV as separate GEMMs with the softmax between them.
"""

import argparse
import json
import time

import torch


def report(a, facts):
    line = json.dumps(facts, sort_keys=True)
    print("FACTS", line, flush=True)
    if a.json:
        with open(a.json, "w") as f:
            f.write(line + "\n")


def llama(a, attn="sdpa"):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=a.hidden, intermediate_size=a.intermediate, num_hidden_layers=a.layers,
                      num_attention_heads=a.heads, num_key_value_heads=a.kv_heads, vocab_size=a.vocab,
                      max_position_embeddings=8192, attn_implementation=attn)
    dtype = torch.bfloat16 if a.device == "cuda" else torch.float32
    return LlamaForCausalLM(cfg).to(device=a.device, dtype=dtype).eval()


def count_forwards(model):
    counter = {"n": 0}

    def hook(module, args, kwargs):
        counter["n"] += 1

    model.register_forward_pre_hook(hook, with_kwargs=True)
    return counter


def sync(a):
    if a.device == "cuda":
        torch.cuda.synchronize()


def profiler(a, start):
    if a.device != "cuda":
        return
    torch.cuda.synchronize()
    (torch.cuda.profiler.start if start else torch.cuda.profiler.stop)()


def run_requests(a):
    model = llama(a)
    forwards = count_forwards(model)
    kw = dict(max_new_tokens=a.new_tokens, min_new_tokens=a.new_tokens, do_sample=False, pad_token_id=0,
              eos_token_id=None)
    # Request r's prompt starts past the last KV length of request r - 1 (and of the warm-up):
    # every decode step of every request meets a new KV length.
    prompts = [a.prompt_len + r * (a.new_tokens + a.prompt_gap) for r in range(a.requests + 1)]
    gen = torch.Generator(device=a.device).manual_seed(0)

    def ids(n):
        return torch.randint(0, a.vocab, (a.batch, n), device=a.device, generator=gen)

    per_request = []
    with torch.no_grad():
        model.generate(ids(prompts[0]), **kw)  # warm-up: library set-up, the first lengths' plans
        sync(a)
        forwards["n"] = 0
        profiler(a, True)
        t0 = time.perf_counter()
        for n in prompts[1:]:
            t = time.perf_counter()
            model.generate(ids(n), **kw)
            sync(a)
            per_request.append(round((time.perf_counter() - t) * 1e3, 3))
        wall = time.perf_counter() - t0
        profiler(a, False)
    report(a, dict(workload="requests", batch=a.batch, requests=a.requests, prompt_lengths=prompts[1:],
                   warmup_prompt=prompts[0], new_tokens=a.new_tokens, layers=a.layers, forwards=forwards["n"],
                   request_ms=per_request, wall_ms=round(wall * 1e3, 3),
                   ms_per_forward=round(wall * 1e3 / max(forwards["n"], 1), 3)))


VOCAB_WORDS = [f"tok{i:05d}" for i in range(32000)]
STOP_STRINGS = [f"<|stop{i}|>" for i in range(48)] + ["\n\nUser:", "</s>", "###"]


def detokenize(ids, pieces):
    """Incremental detokenization as a streaming server does it in Python: the new ids to text,
    the text appended to each sequence's output."""
    for seq, i in enumerate(ids):
        word = VOCAB_WORDS[i % len(VOCAB_WORDS)]
        pieces[seq].append(word if not pieces[seq] or i % 7 else " " + word)
    return ["".join(p[-256:]) for p in pieces]


def match_stop_strings(texts, window):
    """Checks the tail of each sequence's text for every stop string, character by character
    (as a naive stop-string matcher does): pure Python, no CUDA call."""
    hits = 0
    for text in texts:
        tail = text[-window:]
        for stop in STOP_STRINGS:
            n = len(stop)
            for k in range(len(tail) - n + 1):
                if tail[k] == stop[0] and tail[k:k + n] == stop:
                    hits += 1
    return hits


def run_stream(a):
    import decode  # the naive decoder of decode.py, in this folder

    da = decode.parse_args(["--batch", str(a.batch), "--layers", str(a.layers), "--d-model", str(a.hidden),
                            "--heads", str(a.heads), "--ffn", str(a.intermediate), "--vocab", str(a.vocab),
                            "--context", "256", "--warmup", str(a.warmup), "--steps", str(a.steps),
                            "--device", a.device])
    dtype = torch.bfloat16 if a.device == "cuda" else torch.float32
    model = decode.Decoder(da, dtype)
    tokens = torch.zeros(a.batch, dtype=torch.long, device=a.device)
    pos = torch.tensor([256], device=a.device)
    graph = None
    if a.device == "cuda":
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                model.step(tokens, pos)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = model.step(tokens, pos)

    # Each sequence's text so far: a prompt of 256 words, so that every step scans a full window.
    pieces = [list(VOCAB_WORDS[:256]) for _ in range(a.batch)]
    gpu_ms, sync_ms, cpu_ms = [], [], []
    events = []

    def one_step(i):
        if a.nvtx:
            torch.cuda.nvtx.range_push("stream_step")
        if graph is not None:
            ev = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            ev[0].record()
            graph.replay()
            ev[1].record()
            events.append(ev)
            nxt = out
        else:
            nxt = model.step(tokens, pos)
        t = time.perf_counter()
        new = nxt.tolist()  # the new tokens to the host: waits for the forward pass
        t1 = time.perf_counter()
        if a.work == "python":
            texts = detokenize(new, pieces)
            match_stop_strings(texts, a.window)
        else:
            time.sleep(a.cpu_ms / 1e3)
        t2 = time.perf_counter()
        tokens.copy_(nxt)  # next step's input (device to device, inside the stream)
        pos.add_(1)
        if a.nvtx:
            torch.cuda.nvtx.range_pop()
        return t1 - t, t2 - t1

    with torch.no_grad():
        for i in range(a.warmup):
            one_step(i)
        sync(a)
        events.clear()
        profiler(a, True)
        t0 = time.perf_counter()
        for i in range(a.steps):
            s_, c_ = one_step(i)
            sync_ms.append(s_ * 1e3)
            cpu_ms.append(c_ * 1e3)
        sync(a)
        wall = time.perf_counter() - t0
        profiler(a, False)
    gpu_ms = [b.elapsed_time(e) for b, e in events] if events else []

    def mean(x):
        return round(sum(x) / len(x), 4) if x else None

    report(a, dict(workload="stream", work=a.work, batch=a.batch, layers=a.layers, steps=a.steps,
                   graph_replays_per_step=1 if graph is not None else 0, wall_ms=round(wall * 1e3, 3),
                   ms_per_step=round(wall * 1e3 / a.steps, 4), gpu_ms_per_step=mean(gpu_ms),
                   sync_ms_per_step=mean(sync_ms), cpu_ms_per_step=mean(cpu_ms),
                   cpu_ms_total=round(sum(cpu_ms), 3), sync_ms_total=round(sum(sync_ms), 3)))


def run_sweep(a):
    import triton
    import triton.language as tl

    @triton.jit
    def softmax_rows(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
        x = x - tl.max(x, axis=0)
        e = tl.exp(x)
        tl.store(y_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=mask)

    shapes = [(a.rows, n) for n in a.cols]
    timings = []
    profiler(a, True)
    t0 = time.perf_counter()
    for rows, cols in shapes:
        x = torch.randn(rows, cols, device=a.device)
        y = torch.empty_like(x)
        block = triton.next_power_of_2(cols)
        times = []
        for _ in range(a.iters):
            # A benchmark harness: time each launch with events, read the time on the host.
            b, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            b.record()
            softmax_rows[(rows,)](x, y, cols, BLOCK=block)
            e.record()
            e.synchronize()
            times.append(b.elapsed_time(e))
        timings.append(dict(rows=rows, cols=cols, block=block, first_ms=round(times[0], 4),
                            median_ms=round(sorted(times)[len(times) // 2], 4)))
    sync(a)
    wall = time.perf_counter() - t0
    profiler(a, False)
    report(a, dict(workload="sweep", shapes=len(shapes), iters=a.iters, launches=len(shapes) * a.iters,
                   blocks=sorted({t["block"] for t in timings}), timings=timings, wall_ms=round(wall * 1e3, 3)))


def run_prefill(a):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = {"math": SDPBackend.MATH, "flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
               "efficient": SDPBackend.EFFICIENT_ATTENTION}[a.backend]
    model = llama(a)
    forwards = count_forwards(model)
    gen = torch.Generator(device=a.device).manual_seed(0)
    ids = torch.randint(0, a.vocab, (a.batch, a.prompt_len), device=a.device, generator=gen)
    per_pass = []
    with torch.no_grad(), sdpa_kernel(backend):
        model(ids, use_cache=False, logits_to_keep=1)  # warm-up
        sync(a)
        forwards["n"] = 0
        profiler(a, True)
        t0 = time.perf_counter()
        for _ in range(a.passes):
            t = time.perf_counter()
            model(ids, use_cache=False, logits_to_keep=1)
            sync(a)
            per_pass.append(round((time.perf_counter() - t) * 1e3, 3))
        wall = time.perf_counter() - t0
        profiler(a, False)
    report(a, dict(workload="prefill", backend=a.backend, batch=a.batch, prompt_len=a.prompt_len, layers=a.layers,
                   heads=a.heads, hidden=a.hidden, passes=a.passes, forwards=forwards["n"], pass_ms=per_pass,
                   wall_ms=round(wall * 1e3, 3), ms_per_pass=round(wall * 1e3 / a.passes, 3)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    def model_args(s, layers, hidden, heads, kv_heads, inter):
        s.add_argument("--layers", type=int, default=layers)
        s.add_argument("--hidden", type=int, default=hidden)
        s.add_argument("--heads", type=int, default=heads)
        s.add_argument("--kv-heads", type=int, default=kv_heads)
        s.add_argument("--intermediate", type=int, default=inter)
        s.add_argument("--vocab", type=int, default=32000)
        s.add_argument("--device", default="cuda")
        s.add_argument("--json", help="also write the facts to this file")

    r = sub.add_parser("requests", help="generate() requests one after another, a new KV length every step")
    model_args(r, 12, 1024, 16, 4, 2816)
    r.add_argument("--batch", type=int, default=4)
    r.add_argument("--requests", type=int, default=3)
    r.add_argument("--prompt-len", type=int, default=64)
    r.add_argument("--prompt-gap", type=int, default=16, help="tokens between one request's end and the next prompt")
    r.add_argument("--new-tokens", type=int, default=48)
    s = sub.add_parser("stream", help="graph replay, .tolist(), then pure Python, every step")
    model_args(s, 8, 2048, 16, 16, 5632)
    s.add_argument("--batch", type=int, default=1)
    s.add_argument("--steps", type=int, default=200)
    s.add_argument("--warmup", type=int, default=20)
    s.add_argument("--work", choices=["python", "sleep"], default="python")
    s.add_argument("--window", type=int, default=1024, help="characters of text the stop-string check scans")
    s.add_argument("--cpu-ms", type=float, default=3.0, help="with --work sleep: the sleep per step")
    s.add_argument("--nvtx", action="store_true", help="an NVTX range per step")
    w = sub.add_parser("sweep", help="a Triton kernel timed over changing shapes (a compile per shape)")
    w.add_argument("--rows", type=int, default=4096)
    w.add_argument("--cols", type=int, nargs="+", default=[100, 300, 700, 1500, 3000, 6000, 12000])
    w.add_argument("--iters", type=int, default=20)
    w.add_argument("--device", default="cuda")
    w.add_argument("--json")
    f = sub.add_parser("prefill", help="prefill passes with SDPA on one backend")
    model_args(f, 8, 2048, 16, 16, 5632)
    f.add_argument("--backend", choices=["math", "flash", "cudnn", "efficient"], default="math")
    f.add_argument("--batch", type=int, default=4)
    f.add_argument("--prompt-len", type=int, default=4096)
    f.add_argument("--passes", type=int, default=3)
    a = p.parse_args(argv)
    {"requests": run_requests, "stream": run_stream, "sweep": run_sweep, "prefill": run_prefill}[a.cmd](a)


if __name__ == "__main__":
    main()
