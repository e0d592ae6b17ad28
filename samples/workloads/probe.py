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

The next three run their calls between cudaProfilerStart/Stop (after warm-up), no NVTX:

- `compiled`: generate() with a static KV cache and the forward compiled by torch.compile
  `mode="reduce-overhead"` (Inductor's Triton kernels, replayed as CUDA graphs).
- `bigbatch`: generate() of a 3 B-parameter Llama shape (multi-head KV) at batch 64 and 1,024-token
  prompts: each decode step reads about 17 GB of KV cache, so the GPU, not the launches, sets the pace.
- `t5`: generate() of an encoder-decoder (T5-shaped): the encoder once per call, then one decoder
  pass per token.
- `beam`: generate() with beam search (`--beams` beams per prompt): one forward pass of
  batch x beams rows per token, then the beams' scores ranked and the KV cache reordered.
- `ngram`: generate() with `no_repeat_ngram_size=3`: each step reads every sequence back and
  builds its n-grams in Python (transformers' NoRepeatNGramLogitsProcessor).
- `assisted`: assisted generation (speculative decoding): a 2-layer draft model proposes
  `--draft-tokens` tokens, one pass of the model checks them, batch 1 (`--hf-defaults`:
  transformers' own drafting settings instead).
- `server`: batch-1 requests one after another, each after a think time (a lightly loaded
  server waiting for its next request, asleep in the OS).
- `compiled --mode default`: the `compiled` probe with Inductor's kernels launched one by one
  (no CUDA graphs).
- `loader`: the `cnn` network trained on images that a DataLoader's worker processes make on
  the CPU (`--item-ms` of work per image), too slowly for the GPU; pinned memory, the loss read
  back each iteration. Warm-up iterations, then `--iters` in the capture range; no NVTX.
- `trainer`: HF `Trainer` fine-tuning a small Llama shape from a dataset whose items cost
  `--item-ms` of CPU each, `dataloader_num_workers` workers; a callback brackets `--iters`
  steps with cudaProfilerStart/Stop.
"""

import argparse
import json
import time

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


def llama_model(layers, hidden=1024, inter=2816, heads=16, kv_heads=4):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=kv_heads, vocab_size=32000, max_position_embeddings=4096)
    with torch.device("cuda"):  # random init on the GPU: seconds, not a minute on the CPU
        model = LlamaForCausalLM(cfg)
    return model.to(dtype=torch.bfloat16).eval(), cfg


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


def nvtx_hooks(module, name):
    """An NVTX range named `name` around each forward call of `module`, from module hooks."""

    def push(mod, args):
        torch.cuda.nvtx.range_push(name)  # (a hook that returns a value replaces the module's inputs)

    def pop(mod, args, out):
        torch.cuda.nvtx.range_pop()

    module.register_forward_pre_hook(push)
    module.register_forward_hook(pop)


def run_nested(a):
    model, cfg = llama_model(a.layers)
    forwards = count_forwards(model)
    nvtx = torch.cuda.nvtx
    nvtx_hooks(model, "forward")
    for layer in model.model.layers:
        nvtx_hooks(layer, "layer")
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


def profiled(run, warmups, calls, counter=None):
    """run() warmups times, then calls times between cudaProfilerStart/Stop (the capture range),
    the GPU drained before each edge; counter's count after the warm-up (0 without one)."""
    for _ in range(warmups):
        run()
    torch.cuda.synchronize()
    warm = counter["n"] if counter else 0
    torch.cuda.profiler.start()
    for _ in range(calls):
        run()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return warm


def measured_generate(a, model, ids, kw, warmups=1, before=lambda: None):
    """warmups calls, then a.calls calls inside cudaProfilerStart/Stop (before() ahead of each);
    FACTS counts."""
    forwards = count_forwards(model)

    def call():
        before()
        model.generate(ids, **kw)

    with torch.no_grad():
        warm = profiled(call, warmups, a.calls, forwards)
    return {"warmup_forwards": warm, "forwards": forwards["n"] - warm, "calls": a.calls, "batch": a.batch,
            "new_tokens": a.new_tokens, "layers": a.layers, "prompt_len": a.prompt_len}


def run_compiled(a):
    """generate() with a static cache and a forward compiled with a.mode ("reduce-overhead": Triton
    kernels replayed as CUDA graphs), two warm-up calls, then a.calls calls in the capture range.
    The cache is made once and filled by an eager call first: allocated inside the compiled
    forward, its tensors would be the CUDA graphs' outputs, overwritten by the next replay."""
    from transformers import StaticCache

    model, cfg = llama_model(a.layers)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt_len), device="cuda")
    cache = StaticCache(config=cfg, max_cache_len=a.prompt_len + a.new_tokens)
    # generate()'s own compile of a static cache's forward is off: the one below is the only one.
    kw = dict(generate_kw(a, sample=False), past_key_values=cache, disable_compile=True)
    with torch.no_grad():
        model.generate(ids, **kw)
    model.forward = torch.compile(model.forward, mode=a.mode)
    facts = measured_generate(a, model, ids, kw, warmups=2, before=cache.reset)
    from torch._dynamo.utils import counters

    facts["dynamo_unique_graphs"] = counters["stats"]["unique_graphs"]
    report({"workload": "compiled", "mode": a.mode, **facts})


def run_bigbatch(a):
    """generate() at a large batch and long prompts: the GPU is busy most of each step."""
    model, cfg = llama_model(a.layers, hidden=4096, inter=11008, heads=32, kv_heads=32)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt_len), device="cuda")
    facts = measured_generate(a, model, ids, generate_kw(a, sample=False))
    report({"workload": "bigbatch", **facts})


def run_t5(a):
    """generate() of an encoder-decoder (T5-shaped): the encoder once per call, then a decoder
    pass per token."""
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    cfg = T5Config(d_model=768, d_ff=2048, num_layers=a.layers, num_decoder_layers=a.layers, num_heads=12,
                   vocab_size=32128, decoder_start_token_id=0)
    model = T5ForConditionalGeneration(cfg).to(device="cuda", dtype=torch.bfloat16).eval()
    encoder = count_forwards(model.encoder)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt_len), device="cuda")
    facts = measured_generate(a, model, ids, generate_kw(a, sample=False))
    report({"workload": "t5", "encoder_calls": encoder["n"], **facts})


def run_beam(a):
    """generate() with beam search: each forward pass runs batch x beams rows."""
    model, cfg = llama_model(a.layers)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt_len), device="cuda")
    kw = dict(generate_kw(a, sample=False), num_beams=a.beams, early_stopping=False)
    facts = measured_generate(a, model, ids, kw)
    report({"workload": "beam", "beams": a.beams, **facts})


def run_ngram(a):
    """generate() with n-gram blocking: CPU work after a read-back, every step."""
    model, cfg = llama_model(a.layers)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt_len), device="cuda")
    kw = dict(generate_kw(a, sample=False), no_repeat_ngram_size=3)
    facts = measured_generate(a, model, ids, kw)
    report({"workload": "ngram", "no_repeat_ngram_size": 3, **facts})


def run_assisted(a):
    """Assisted generation: a small draft model proposes a.draft_tokens tokens per round, one pass
    of the model verifies them (random weights: few are accepted)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    model, cfg = llama_model(a.layers)
    draft_cfg = LlamaConfig(hidden_size=512, intermediate_size=1408, num_hidden_layers=2, num_attention_heads=8,
                            num_key_value_heads=4, vocab_size=cfg.vocab_size, max_position_embeddings=4096)
    with torch.device("cuda"):
        draft = LlamaForCausalLM(draft_cfg)
    draft = draft.to(dtype=torch.bfloat16).eval()
    if not a.hf_defaults:  # (else transformers' own: up to 20 tokens, a round ends at a guess under 0.4)
        draft.generation_config.num_assistant_tokens = a.draft_tokens
        draft.generation_config.num_assistant_tokens_schedule = "constant"
        draft.generation_config.assistant_confidence_threshold = 0.0  # draft all a.draft_tokens every round
    drafts = count_forwards(draft)
    ids = torch.randint(0, cfg.vocab_size, (1, a.prompt_len), device="cuda")
    kw = dict(generate_kw(a, sample=False), assistant_model=draft)
    at_call = []  # the draft's passes before each call (the first is the warm-up's)
    facts = measured_generate(a, model, ids, kw, before=lambda: at_call.append(drafts["n"]))
    report({"workload": "assisted", "draft_tokens": None if a.hf_defaults else a.draft_tokens, "draft_forwards": drafts["n"] - at_call[1],
            "warmup_draft_forwards": at_call[1], **facts})


def run_server(a):
    """Batch-1 requests, each after a think time drawn between a.think_ms and twice that."""
    import random
    import time

    model, cfg = llama_model(a.layers)
    rng = random.Random(0)
    ids = torch.randint(0, cfg.vocab_size, (1, a.prompt_len), device="cuda")
    thinks = []

    def think():
        t = rng.uniform(a.think_ms, 2 * a.think_ms)
        thinks.append(round(t, 1))
        time.sleep(t / 1e3)

    facts = measured_generate(a, model, ids, generate_kw(a, sample=False), before=think)
    report({"workload": "server", "think_ms": thinks[1:], **facts})


def small_cnn():
    import torch.nn as nn

    torch.manual_seed(0)

    def block(cin, cout, stride):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                             nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    return nn.Sequential(block(3, 64, 1), block(64, 128, 2), block(128, 256, 2), block(256, 512, 2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 100)).cuda()


class SlowImages(torch.utils.data.Dataset):
    """64x64 images, each made with item_ms of CPU work (decoding and augmenting, in a real loader)."""

    def __init__(self, item_ms):
        self.item_ms = item_ms

    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        x = torch.rand(3, 64, 64, generator=torch.Generator().manual_seed(i))
        end = time.perf_counter() + self.item_ms / 1e3
        while time.perf_counter() < end:
            x = (x * 1.0001).clamp_(0, 1)
        return x, i % 100


def run_loader(a):
    import torch.nn as nn

    net = small_cnn()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    loader = torch.utils.data.DataLoader(SlowImages(a.item_ms), batch_size=a.batch, num_workers=a.workers,
                                         pin_memory=True)
    batches = iter(loader)

    def step():
        x, y = next(batches)
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        loss = loss_fn(net(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()  # the loop logs its loss: a sync per iteration

    profiled(step, a.warmup, a.iters)
    report({"workload": "loader", "iterations": a.iters, "warmup": a.warmup, "batch": a.batch,
            "workers": a.workers, "item_ms": a.item_ms})


class SlowTokens(torch.utils.data.Dataset):
    """Token sequences, each made with item_ms of CPU work (tokenizing on the fly, in a real loader)."""

    def __init__(self, item_ms, seq_len, vocab):
        self.item_ms, self.seq_len, self.vocab = item_ms, seq_len, vocab

    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        ids = torch.randint(0, self.vocab, (self.seq_len,), generator=torch.Generator().manual_seed(i))
        end = time.perf_counter() + self.item_ms / 1e3
        while time.perf_counter() < end:
            ids = ids.flip(0)
        return {"input_ids": ids, "labels": ids.clone()}


def run_trainer(a):
    """HF Trainer fine-tuning a small Llama (fp32 weights, bf16 autocast) from a dataset whose
    items cost a.item_ms of CPU each; the capture range is steps a.warmup to a.warmup + a.iters
    (a callback)."""
    from transformers import Trainer, TrainerCallback, TrainingArguments

    model, _ = llama_model(a.layers)
    model = model.float().train()

    class Range(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            if state.global_step == a.warmup:
                torch.cuda.synchronize()
                torch.cuda.profiler.start()

        def on_step_end(self, args, state, control, **kw):
            if state.global_step == a.warmup + a.iters:
                torch.cuda.synchronize()
                torch.cuda.profiler.stop()

    args = TrainingArguments(output_dir="/tmp/trainer_probe", per_device_train_batch_size=a.batch,
                             max_steps=a.warmup + a.iters + 2, bf16=True, logging_steps=10, save_strategy="no",
                             report_to=[], dataloader_num_workers=a.workers, disable_tqdm=True)
    Trainer(model=model, args=args, train_dataset=SlowTokens(a.item_ms, a.seq_len, 32000), callbacks=[Range()]).train()
    report({"workload": "trainer", "iterations": a.iters, "warmup": a.warmup, "batch": a.batch,
            "workers": a.workers, "item_ms": a.item_ms, "seq_len": a.seq_len, "layers": a.layers})


def run_cnn(a):
    import torch.nn as nn

    net = small_cnn()
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


GENERATE = {"batch": 8, "prompt_len": 96, "new_tokens": 40, "calls": 2, "layers": 8}
MODES = {
    **{name: GENERATE for name in ("qwen", "nested", "bigbatch", "t5", "ngram")},
    "compiled": {**GENERATE, "mode": ["reduce-overhead", "default"]},
    "beam": {**GENERATE, "beams": 4},
    "assisted": {**GENERATE, "draft_tokens": 4, "hf_defaults": False},  # (transformers' own drafting settings)
    "server": {**GENERATE, "think_ms": 40.0},
    "cnn": {"batch": 64, "iters": 40},
    "loader": {"batch": 64, "iters": 40, "warmup": 8, "workers": 2, "item_ms": 0.5},
    "trainer": {"batch": 8, "iters": 30, "warmup": 6, "workers": 2, "item_ms": 4.0, "seq_len": 256, "layers": 4},
}


def add_modes(sub, modes: dict) -> None:
    """A subcommand per mode and an option per default, of the default's type (False: a flag;
    a list: the choices, the first of them the default)."""
    for name, defaults in modes.items():
        s = sub.add_parser(name)
        for key, v in defaults.items():
            flag = "--" + key.replace("_", "-")
            if v is False:
                s.add_argument(flag, action="store_true")
            elif isinstance(v, list):
                s.add_argument(flag, default=v[0], choices=v)
            else:
                s.add_argument(flag, type=type(v), default=v)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_modes(p.add_subparsers(dest="cmd", required=True), MODES)
    a = p.parse_args(argv)
    runs = {"qwen": run_qwen, "nested": run_nested, "cnn": run_cnn, "compiled": run_compiled, "bigbatch": run_bigbatch,
            "t5": run_t5, "beam": run_beam, "ngram": run_ngram,
            "assisted": run_assisted, "server": run_server, "loader": run_loader,
            "trainer": run_trainer}
    runs[a.cmd](a)


if __name__ == "__main__":
    main()
