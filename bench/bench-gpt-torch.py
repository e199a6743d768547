"""The same step as bench-gpt.c in PyTorch: a GPT of the same shape (pre-norm blocks,
causal attention, GELU tanh MLP of 4x width), AdamW. Prints ms/step (best of rounds) and
peak RSS in MiB. Run with Debian's /usr/bin/python3 and OPENBLAS_NUM_THREADS set; the
third argument is the context (64 by default). GPT_SHAPE=LAYERS,HEADS,WIDTH,BATCH sets
another shape; AMP=bf16 or fp16 runs the step under torch.autocast in that type (timing
only: no GradScaler)."""
import math
import os
import sys
import torch

from torch_step_timing import DEVICE, time_steps
from torch import nn

VOCAB = 65
LAYERS, HEADS, WIDTH, BATCH = (int(v) for v in os.environ.get("GPT_SHAPE", "4,4,128,16").split(","))
AMP = os.environ.get("AMP", "off")
CONTEXT = int(sys.argv[3]) if len(sys.argv) > 3 else 64
WARMUP, STEPS, ROUNDS = 2, 5, 3


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.qkv, self.proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
        self.fc, self.out = nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)
        self.register_buffer("mask", torch.tril(torch.ones(CONTEXT, CONTEXT)) == 0)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // HEADS)
        att = att.masked_fill(self.mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.out(nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, WIDTH), nn.Embedding(CONTEXT, WIDTH)
        self.blocks = nn.Sequential(*[Block() for _ in range(LAYERS)])
        self.ln_f, self.head = nn.LayerNorm(WIDTH), nn.Linear(WIDTH, VOCAB)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(CONTEXT, device=idx.device))
        return self.head(self.ln_f(self.blocks(x)))


torch.manual_seed(1)
model = GPT().to(DEVICE)
adamw = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
tokens = torch.randint(0, VOCAB, (BATCH, CONTEXT)).to(DEVICE)
targets = torch.randint(0, VOCAB, (BATCH, CONTEXT)).to(DEVICE)


def step():
    adamw.zero_grad()
    half = torch.float16 if AMP == "fp16" else torch.bfloat16
    with torch.autocast(DEVICE.type, dtype=half, enabled=AMP in ("bf16", "fp16")):
        logits = model(tokens)
        loss = nn.functional.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
    loss.backward()
    adamw.step()


time_steps(step, WARMUP, STEPS, ROUNDS)
