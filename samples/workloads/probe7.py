"""Probes of waits and NVTX ranges the other probes do not make (probe.py holds the helpers these
share, probe4.py the decoder, probe6.py the batched decoder). Each runs its measured calls
between cudaProfilerStart/Stop after warm-up and prints a `FACTS {json}` line with what it did:
the oracle its steps are checked against.

- `spin`: a decode loop (one CUDA graph a step, 16 layers, batch 1) that waits for each step by
  polling an event (`while not event.query(): pass`), as event-loop servers do instead of a
  blocking sync, then processes the token in Python (`detokenize`, about `--host-ms` of CPU).
  With `--sleep-us N` the poll sleeps N microseconds between queries (the CPU is asleep in the
  OS while it waits, not spinning).
- `layers`: HF `generate()` (batch 4, 32 tokens, three calls) with an NVTX range around each
  decoder layer (`LlamaDecoderLayer`), and `attention` and `mlp` ranges inside it, from module
  hooks; no range around a forward pass or a request.
- `requests`: continuous batching by hand, eager: requests join a running batch (one every
  `--arrive-every` steps while a slot is free, up to 8 at once), each step decodes a token for
  every running request and reads the tokens back, and each request is an NVTX start/end range
  named `request` from its arrival to its last token: ranges that overlap one another.
"""

import argparse
import time

import torch
from probe import add_modes, count_forwards, generate_kw, llama_model, nvtx_hooks, profiled, report
from probe4 import Decoder, graphed
from probe6 import BatchDecoder, detokenize


def run_spin(a):
    max_len = 64 + (a.steps + a.warmup) + 8
    model = Decoder(a.layers, 2048, 16, 5632, 32000, max_len, seed=0)
    tok = torch.zeros(1, dtype=torch.long, device="cuda")
    pos = torch.full((1,), 64, device="cuda")
    step_fn = graphed(model.forward, tok, pos)
    host = torch.empty(1, dtype=torch.long, pin_memory=True)
    state = {"tok": tok, "pos": pos, "steps": 0, "polls": 0}

    def step():
        out = step_fn(state["tok"], state["pos"])
        host.copy_(out, non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        while not done.query():  # (the wait: a poll, not a blocking call)
            state["polls"] += 1
            if a.sleep_us:
                time.sleep(a.sleep_us / 1e6)
        detokenize(int(host[0]), a.host_ms)
        state["tok"] = out.clone()
        state["pos"] = state["pos"] + 1
        state["steps"] += 1

    with torch.no_grad():
        for _ in range(a.warmup):
            step()
        torch.cuda.synchronize()
        warm_steps, warm_polls = state["steps"], state["polls"]
        torch.cuda.profiler.start()
        for _ in range(a.steps):
            step()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    steps = state["steps"] - warm_steps
    report({"workload": "spin", "steps": steps, "forwards": steps, "layers": a.layers, "host_ms": a.host_ms,
            "sleep_us": a.sleep_us, "polls": state["polls"] - warm_polls, "graph_replays": steps})


def run_layers(a):
    model, cfg = llama_model(a.layers)
    for layer in model.model.layers:
        for module, name in ((layer, "LlamaDecoderLayer"), (layer.self_attn, "attention"), (layer.mlp, "mlp")):
            nvtx_hooks(module, name)
    forwards = count_forwards(model)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt_len), device="cuda")
    kw = generate_kw(a, sample=False)
    with torch.no_grad():
        warm = profiled(lambda: model.generate(ids, **kw), 1, a.calls, forwards)
    report({"workload": "layers", "warmup_forwards": warm, "forwards": forwards["n"] - warm, "calls": a.calls,
            "batch": a.batch, "new_tokens": a.new_tokens, "layers": a.layers, "prompt_len": a.prompt_len,
            "layer_ranges_per_forward": a.layers})


def run_requests(a):
    lengths = [int(x) for x in a.lengths.split(",")]
    slots = 8
    model = BatchDecoder(a.layers, 2048, 16, 5632, 32000, 64 + 2 * sum(lengths) + 8, slots)
    nvtx = torch.cuda.nvtx
    counts = {"steps": 0, "requests": 0, "max_live": 0, "rounds": 0}

    def one_round():
        waiting = list(range(len(lengths)))
        live = {}  # request -> [tokens left, NVTX range id]
        pos = torch.full((1,), 64, device="cuda")
        tokens = torch.zeros(slots, dtype=torch.long, device="cuda")
        i = 0
        while waiting or live:
            if waiting and len(live) < slots and (i % a.arrive_every == 0 or not live):
                r = waiting.pop(0)
                live[r] = [lengths[r], nvtx.range_start("request")]
            b = len(live)
            out = model.forward(tokens[:b], pos)
            toks = out.tolist()  # (the step's one sync)
            for r in list(live):
                live[r][0] -= 1
                if live[r][0] == 0:
                    nvtx.range_end(live.pop(r)[1])
                    counts["requests"] += 1
            tokens = torch.tensor(toks[:len(live)] + [0] * (slots - len(live)), device="cuda")
            pos = pos + 1
            i += 1
            counts["steps"] += 1
            counts["max_live"] = max(counts["max_live"], b)
        counts["rounds"] += 1

    with torch.no_grad():
        one_round()  # (warm-up)
        torch.cuda.synchronize()
        warm = dict(counts)
        profiled(one_round, 0, a.rounds)
    report({"workload": "requests", "steps": counts["steps"] - warm["steps"],
            "forwards": counts["steps"] - warm["steps"], "requests": counts["requests"] - warm["requests"],
            "rounds": a.rounds, "max_live": counts["max_live"], "arrive_every": a.arrive_every,
            "lengths": lengths, "layers": a.layers})


MODES = {
    "spin": {"steps": 200, "warmup": 10, "layers": 16, "host_ms": 1.5, "sleep_us": 0},
    "layers": {"calls": 3, "batch": 4, "prompt_len": 128, "new_tokens": 32, "layers": 8},
    "requests": {"rounds": 2, "layers": 8, "arrive_every": 3,
                 "lengths": "24,40,16,32,28,12,36,20,24,16,40,8,30,18,26,22"},
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_modes(p.add_subparsers(dest="cmd", required=True), MODES)
    a = p.parse_args(argv)
    {"spin": run_spin, "layers": run_layers, "requests": run_requests}[a.cmd](a)


if __name__ == "__main__":
    main()
