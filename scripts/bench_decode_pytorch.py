#!/usr/bin/python3
"""Per-token decoding of a GPT-2-shaped model written plainly in PyTorch: the baseline for hh_bench_decode.

The same shapes and the same set-up as `hh_bench_decode` (random weights, batch 1, fp32, a cache
as if `position` tokens had been read), decoded the way a PyTorch script usually does it:
  softmax: nn.Linear projections, a KV cache grown with torch.cat every token (the legacy
           Hugging Face cache), q @ K^T, softmax, @ V;
  hedgehog: the recurrent step with the state S [H, 2D, D] and z [H, 2D] updated by outer products.
Prints median and fastest ms per token at each position.

  python3 scripts/bench_decode_pytorch.py --shape gpt2-small --positions 512,2048,8192,32768
"""
import argparse
import math
import statistics
import time

import torch
import torch.nn.functional as F

SHAPES = {"demo": (4, 4, 128, 512), "gpt2-small": (12, 12, 768, 3072)}  # layers, heads, width, inner
VOCAB = 50257


class Block(torch.nn.Module):
    def __init__(self, c, h, inner):
        super().__init__()
        self.h, self.d = h, c // h
        self.ln1, self.ln2 = torch.nn.LayerNorm(c), torch.nn.LayerNorm(c)
        self.qkv, self.proj = torch.nn.Linear(c, 3 * c), torch.nn.Linear(c, c)
        self.fc, self.out = torch.nn.Linear(c, inner), torch.nn.Linear(inner, c)
        self.w = torch.nn.Parameter(torch.eye(self.d).repeat(h, 1, 1))  # Hedgehog MLP per head
        self.b = torch.nn.Parameter(torch.zeros(h, self.d))

    def features(self, x):  # x [H, D] -> [H, 2D]
        u = torch.einsum("hij,hj->hi", self.w, x) + self.b
        return torch.cat([u.exp(), (-u).exp()], -1)

    def forward(self, x, cache, hedgehog):  # x [1, 1, C]
        a = self.ln1(x)
        q, k, v = self.qkv(a).view(3, self.h, self.d).unbind(0)  # each [H, D]
        if hedgehog:
            s, z = cache
            fq, fk = self.features(q), self.features(k)
            s += fk.unsqueeze(-1) * v.unsqueeze(-2)  # [H, 2D, D]
            z += fk
            y = torch.einsum("hf,hfd->hd", fq, s) / ((fq * z).sum(-1, keepdim=True) + 1e-6)
        else:
            keys, values = cache
            keys = torch.cat([keys, k.unsqueeze(1)], 1)  # [H, N+1, D]
            values = torch.cat([values, v.unsqueeze(1)], 1)
            cache[0], cache[1] = keys, values
            w = torch.softmax(torch.matmul(keys, q.unsqueeze(-1)).squeeze(-1) / math.sqrt(self.d), -1)  # [H, N+1]
            y = torch.matmul(w.unsqueeze(1), values).squeeze(1)  # [H, D]
        x = x + self.proj(y.reshape(1, 1, -1))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shape", default="gpt2-small", choices=sorted(SHAPES))
    p.add_argument("--positions", default="512,2048,8192,32768")
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    layers, h, c, inner = SHAPES[args.shape]
    d = c // h
    positions = [int(x) for x in args.positions.split(",")]
    torch.manual_seed(0)
    blocks = torch.nn.ModuleList(Block(c, h, inner) for _ in range(layers))
    wte = torch.nn.Embedding(VOCAB, c)
    wpe = torch.nn.Embedding(max(positions) + args.steps + 8, c)
    ln_f = torch.nn.LayerNorm(c)
    print(f"pytorch {torch.__version__} | {args.shape}: {layers} layers, {h} heads, width {c} | {torch.get_num_threads()} threads")
    print("| position | softmax + KV cache (torch.cat) ms/token | hedgehog recurrent ms/token |\n|---|---|---|")
    with torch.no_grad():
        for pos in positions:
            row = []
            for hedgehog in (False, True):
                if hedgehog:
                    caches = [(torch.rand(h, 2 * d, d), torch.rand(h, 2 * d) + 1) for _ in range(layers)]
                else:
                    caches = [[torch.randn(h, pos, d), torch.randn(h, pos, d)] for _ in range(layers)]
                times = []
                for step in range(args.steps + 2):
                    t0 = time.perf_counter()
                    x = wte(torch.tensor([[464]])) + wpe(torch.tensor([[pos + step]]))
                    for blk, cache in zip(blocks, caches):
                        x = blk(x, cache, hedgehog)
                    logits = ln_f(x) @ wte.weight.t()
                    logits.argmax()
                    if step >= 2:
                        times.append((time.perf_counter() - t0) * 1e3)
                row.append(f"{statistics.median(times):.2f} ({min(times):.2f})")
                del caches
            print(f"| {pos} | {row[0]} | {row[1]} |", flush=True)


if __name__ == "__main__":
    main()
