"""Loads a `ksdist export --torch` file into a PyTorch module of the same shape with
load_state_dict(strict=True) and prints the module's logits for the rows on standard
input, one line a row, as `ksdist infer` prints them: an MLP's rows are its inputs, a
GPT's rows are `context` token ids (positions 0, 1, ...). The file is read as plain
safetensors (an 8-byte length, a JSON header, the data); the shapes come from its
metadata (`config`, and a GPT's `model.*` and `vocab_hex`).
Usage: python3 tests/torch-load.py FILE.safetensors < rows"""
import json
import math
import struct
import sys

import torch
from torch import nn


def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n :]
    state = {}
    for name, t in header.items():
        assert t["dtype"] == "F32", name
        begin, end = t["data_offsets"]
        state[name] = torch.frombuffer(bytearray(data[begin:end]), dtype=torch.float32).reshape(t["shape"])
    return state, meta


def settings(meta):
    out = {}
    for line in meta.get("config", "").splitlines():
        key, _, value = line.partition(" = ")
        out[key] = value
    return out


class MLP(nn.Module):
    """fc_0 .. fc_{n-1} with the activation, then out."""

    def __init__(self, sizes, classes, activation):
        super().__init__()
        self.hidden = len(sizes) - 1
        for i in range(self.hidden):
            setattr(self, f"fc_{i}", nn.Linear(sizes[i], sizes[i + 1]))
        self.out = nn.Linear(sizes[-1], classes)
        self.act = {"tanh": torch.tanh, "relu": torch.relu, "sigmoid": torch.sigmoid,
                    "gelu": lambda x: nn.functional.gelu(x, approximate="tanh")}[activation]

    def forward(self, x):
        for i in range(self.hidden):
            x = self.act(getattr(self, f"fc_{i}")(x))
        return self.out(x)


class Attention(nn.Module):
    def __init__(self, width, heads, context):
        super().__init__()
        self.heads = heads
        self.c_attn, self.c_proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.register_buffer("mask", torch.tril(torch.ones(context, context)) == 0, persistent=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        att = att.masked_fill(self.mask[:t, :t], float("-inf")).softmax(dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).reshape(b, t, c))


class MLPBlock(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.c_fc, self.c_proj = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        return self.c_proj(nn.functional.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, width, heads, context):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn, self.mlp = Attention(width, heads, context), MLPBlock(width)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """nanoGPT's names; the head has a bias; with `skip` the embeddings join the last block's output."""

    def __init__(self, vocab, context, layers, heads, width, skip):
        super().__init__()
        self.skip = skip
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, width), wpe=nn.Embedding(context, width),
            h=nn.ModuleList([Block(width, heads, context) for _ in range(layers)]),
            ln_f=nn.LayerNorm(width)))
        self.lm_head = nn.Linear(width, vocab)

    def forward(self, idx):
        tr = self.transformer
        e = tr.wte(idx) + tr.wpe(torch.arange(idx.shape[1]))
        x = e
        for block in tr.h:
            x = block(x)
        return self.lm_head(tr.ln_f(x + e if self.skip else x))


def main():
    state, meta = read_safetensors(sys.argv[1])
    rows = [line.split() for line in sys.stdin if line.strip()]
    if meta.get("model.type") == "gpt":
        m = lambda key: int(meta["model." + key])
        model = GPT(len(meta["vocab_hex"]) // 2, m("context"), m("layers"), m("heads"), m("width"),
                    meta.get("model.skip") == "true")
        x = torch.tensor([[int(v) for v in r] for r in rows])
    else:
        s = settings(meta)
        hidden = [int(h) for h in s["model.hidden"].split(",")]
        classes = state["out.bias"].shape[0]
        model = MLP([state["fc_0.weight"].shape[1]] + hidden, classes, s["model.activation"])
        x = torch.tensor([[float(v) for v in r] for r in rows])
    model.load_state_dict(state, strict=True)
    model.eval()
    with torch.no_grad():
        logits = model(x).reshape(len(rows), -1)
    for row in logits.tolist():
        print(" ".join("%.9g" % v for v in row))


main()
