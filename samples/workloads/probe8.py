"""Probes of HF transformers' memory and attention options that the other probes do not run
(probe.py holds the helpers). Each runs its measured calls between cudaProfilerStart/Stop after
warm-up, no NVTX, and prints a `FACTS {json}` line with what it did: the oracle its steps are
checked against.

- `kvoffload`: `generate()` with `cache_implementation="offloaded"`: the KV cache lives in host
  memory, each layer's keys and values copied in (prefetched a layer ahead on a side stream)
  and out again in every pass, as memory-bound servers offload their caches.
- `flex`: `generate()` with `attn_implementation="flex_attention"`: attention in Triton
  kernels that torch.compile generates (names such as `triton_tem_fused_...`, not a library's
  attention kernel).
"""

import argparse

import torch
from probe import add_modes, generate_kw, llama_model, measured_generate, report


def run_kvoffload(a):
    model, cfg = llama_model(a.layers)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt_len), device="cuda")
    kw = {**generate_kw(a, sample=False), "cache_implementation": "offloaded"}
    facts = measured_generate(a, model, ids, kw)
    report({"workload": "kvoffload", **facts})


def run_flex(a):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=a.layers, num_attention_heads=16,
                      num_key_value_heads=4, vocab_size=32000, max_position_embeddings=4096)
    cfg._attn_implementation = "flex_attention"
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg)
    model = model.to(dtype=torch.bfloat16).eval()
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt_len), device="cuda")
    facts = measured_generate(a, model, ids, generate_kw(a, sample=False), warmups=2)
    report({"workload": "flex", "attn": model.config._attn_implementation, **facts})


def run_chunked(a):
    model, cfg = llama_model(a.layers)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt_len), device="cuda")
    kw = {**generate_kw(a, sample=False), "prefill_chunk_size": a.chunk}
    facts = measured_generate(a, model, ids, kw)
    chunks = -(-a.prompt_len // a.chunk)
    report({"workload": "chunked", "chunk": a.chunk, "prefill_passes_per_call": chunks,
            "decode_passes_per_call": a.new_tokens - 1, **facts})


def run_lookup(a):
    model, cfg = llama_model(a.layers)
    # (a prompt that repeats itself, so that its n-grams predict some of the next tokens)
    base = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt_len // 4), device="cuda")
    ids = base.repeat(1, 4)
    kw = {**generate_kw(a, sample=False), "prompt_lookup_num_tokens": a.lookup_tokens}
    facts = measured_generate(a, model, ids, kw)
    report({"workload": "lookup", "lookup_tokens": a.lookup_tokens, **facts})


MODES = {
    "kvoffload": {"calls": 2, "batch": 4, "prompt_len": 256, "new_tokens": 32, "layers": 8},
    "flex": {"calls": 2, "batch": 4, "prompt_len": 128, "new_tokens": 32, "layers": 8},
    "chunked": {"calls": 2, "batch": 1, "prompt_len": 4096, "chunk": 512, "new_tokens": 32, "layers": 8},
    "lookup": {"calls": 2, "batch": 1, "prompt_len": 512, "lookup_tokens": 4, "new_tokens": 64, "layers": 8},
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_modes(p.add_subparsers(dest="cmd", required=True), MODES)
    a = p.parse_args(argv)
    {"kvoffload": run_kvoffload, "flex": run_flex, "chunked": run_chunked, "lookup": run_lookup}[a.cmd](a)


if __name__ == "__main__":
    main()
