"""HF transformers generate() of a small Llama-shaped model with random weights.

The serving path of many users: `model.generate()` in eager PyTorch. The profiled region is
one generate() call of --new-tokens tokens for a batch of --batch prompts, bracketed by
cudaProfilerStart/Stop and an NVTX range `generate`, after one warm-up call. No weights are
downloaded: the model is built from a LlamaConfig with random initialisation.
"""

import argparse

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--device", default="cuda")
    a = p.parse_args(argv)
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=a.layers,
                      num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                      max_position_embeddings=4096)
    dtype = torch.bfloat16 if a.device == "cuda" else torch.float32
    model = LlamaForCausalLM(cfg).to(device=a.device, dtype=dtype).eval()
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt_len), device=a.device)
    kw = dict(max_new_tokens=a.new_tokens, min_new_tokens=a.new_tokens, do_sample=False,
              pad_token_id=0, eos_token_id=None)
    with torch.no_grad():
        model.generate(ids, **kw)  # warm-up
        if a.device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            torch.cuda.nvtx.range_push("generate")
        out = model.generate(ids, **kw)
        if a.device == "cuda":
            torch.cuda.nvtx.range_pop()
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
    print("generated", tuple(out.shape))


if __name__ == "__main__":
    main()
