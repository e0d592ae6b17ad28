"""Held-out check: a GPT-2-shaped training loop (random weights), no NVTX, whole process traced."""
import time, torch
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(0)
cfg = GPT2Config(n_layer=6, n_embd=512, n_head=8, vocab_size=32000, n_positions=512)
model = GPT2LMHeadModel(cfg).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randint(0, 32000, (8, 256), device="cuda")
t0 = time.time()
for it in range(40):
    out = model(input_ids=x, labels=x)
    out.loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if it % 10 == 0:
        print(it, float(out.loss), flush=True)  # a sync every 10 iterations, as a logger does
torch.cuda.synchronize()
print("done", time.time() - t0)
