"""Probes of the timeline model on workloads unlike the samples': captured whole (start-up, warm-up
and steady state in one report, no capture range), each printing a `FACTS {json}` line with what
it did (forward passes, iterations): the oracle a probe's steps are checked against.

- `qwen`: HF transformers `generate()` of a Qwen2-shaped model (biased QKV projections, tied
  embeddings) with sampling (temperature, top-k, top-p), batch 8: one warm-up call, then
  `--calls` calls. No NVTX.
- `nested`: the same generate() of a Llama-shaped model, with NVTX ranges that nest: `request`
  around each call, `forward` around each forward pass (a model hook), `layer` around each
  decoder layer. The steps are the `forward` ranges.
- `cnn`: a small convolutional network trained with SGD (not an LLM), an NVTX range `iter`
  per iteration holding `fwd`, `bwd` and `opt`.
"""

import argparse
import json

import torch


def report(facts):
    print("FACTS", json.dumps(facts, sort_keys=True), flush=True)


def count_forwards(model):
    counter = {"n": 0}

    def hook(module, args, kwargs):
        counter["n"] += 1

    model.register_forward_pre_hook(hook, with_kwargs=True)
    return counter


def generate_kw(a, sample):
    kw = dict(max_new_tokens=a.new_tokens, min_new_tokens=a.new_tokens, pad_token_id=0, eos_token_id=None)
    if sample:
        kw.update(do_sample=True, temperature=0.7, top_k=50, top_p=0.9)
    else:
        kw.update(do_sample=False)
    return kw


def run_qwen(a):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(hidden_size=1536, intermediate_size=4096, num_hidden_layers=a.layers, num_attention_heads=12,
                      num_key_value_heads=2, vocab_size=50000, max_position_embeddings=4096,
                      tie_word_embeddings=True)
    model = Qwen2ForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16).eval()
    forwards = count_forwards(model)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt_len), device="cuda")
    kw = generate_kw(a, sample=True)
    with torch.no_grad():
        model.generate(ids, **kw)
        torch.cuda.synchronize()
        warm = forwards["n"]
        for _ in range(a.calls):
            model.generate(ids, **kw)
        torch.cuda.synchronize()
    report({"workload": "qwen", "warmup_forwards": warm, "forwards": forwards["n"] - warm, "calls": a.calls,
            "batch": a.batch, "new_tokens": a.new_tokens, "layers": a.layers})


def run_nested(a):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=a.layers, num_attention_heads=16,
                      num_key_value_heads=4, vocab_size=32000, max_position_embeddings=4096)
    model = LlamaForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16).eval()
    forwards = count_forwards(model)
    nvtx = torch.cuda.nvtx

    def push(name):
        def hook(module, args):
            nvtx.range_push(name)  # (a hook that returns a value replaces the module's inputs)

        return hook

    def pop(module, args, out):
        nvtx.range_pop()

    model.register_forward_pre_hook(push("forward"))
    model.register_forward_hook(pop)
    for layer in model.model.layers:
        layer.register_forward_pre_hook(push("layer"))
        layer.register_forward_hook(pop)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt_len), device="cuda")
    kw = generate_kw(a, sample=False)
    with torch.no_grad():
        model.generate(ids, **kw)
        torch.cuda.synchronize()
        warm = forwards["n"]
        for _ in range(a.calls):
            nvtx.range_push("request")
            model.generate(ids, **kw)
            nvtx.range_pop()
        torch.cuda.synchronize()
    report({"workload": "nested", "warmup_forwards": warm, "forwards": forwards["n"] - warm, "calls": a.calls,
            "batch": a.batch, "new_tokens": a.new_tokens, "layers": a.layers})


def run_cnn(a):
    import torch.nn as nn

    torch.manual_seed(0)

    def block(cin, cout, stride):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                             nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    net = nn.Sequential(block(3, 64, 1), block(64, 128, 2), block(128, 256, 2), block(256, 512, 2),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 100)).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(a.batch, 3, 64, 64, device="cuda")
    y = torch.randint(0, 100, (a.batch,), device="cuda")
    nvtx = torch.cuda.nvtx
    for _ in range(a.iters):
        nvtx.range_push("iter")
        nvtx.range_push("fwd")
        loss = loss_fn(net(x), y)
        nvtx.range_pop()
        nvtx.range_push("bwd")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nvtx.range_pop()
        nvtx.range_push("opt")
        opt.step()
        nvtx.range_pop()
        loss.item()  # the loop logs its loss: a sync per iteration
        nvtx.range_pop()
    torch.cuda.synchronize()
    report({"workload": "cnn", "iterations": a.iters, "batch": a.batch})


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("qwen", "nested"):
        s = sub.add_parser(name)
        s.add_argument("--batch", type=int, default=8)
        s.add_argument("--prompt-len", type=int, default=96)
        s.add_argument("--new-tokens", type=int, default=40)
        s.add_argument("--calls", type=int, default=2)
        s.add_argument("--layers", type=int, default=8)
    c = sub.add_parser("cnn")
    c.add_argument("--batch", type=int, default=64)
    c.add_argument("--iters", type=int, default=40)
    a = p.parse_args(argv)
    {"qwen": run_qwen, "nested": run_nested, "cnn": run_cnn}[a.cmd](a)


if __name__ == "__main__":
    main()
