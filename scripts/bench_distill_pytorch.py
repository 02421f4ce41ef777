#!/usr/bin/python3
"""The Hedgehog distillation step of a GPT-2 model folder, written plainly in PyTorch.

The baseline for `hedgehog bench MODEL --only distill`: the same model weights, the same batch
(`--batch FILE`, written by `hedgehog bench --save-batch FILE`), the same step:
  teacher forward through every layer (softmax attention propagates), per layer and head the
  softmax weights P and the Hedgehog linear weights A from phi(x) = [exp(xW^T + b), exp(-(xW^T + b))]
  (W = I, b = 0 at the start), the soft cross-entropy  sum_layers sum_heads mean_rows
  sum_j -P_ij log(A_ij + 1e-10), backward into the feature maps only, one AdamW step (lr 1e-2).
Prints the first step's loss (to check against the engine's) and the median and best step time.
With --ranks N the step is data-parallel the plain torch.distributed way (Gloo, one process per
rank, each on its rows of the batch, its loss weighted by its share, every gradient all-reduced),
the baseline for `hedgehog distill --nproc N` (docs/distributed.md).

  python3 scripts/bench_distill_pytorch.py projects/demo/teacher --batch /tmp/batch.safetensors
  python3 scripts/bench_distill_pytorch.py projects/demo/teacher --batch /tmp/batch.safetensors --ranks 2
"""
import argparse
import json
import math
import os
import struct
import statistics
import socket
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32}


def read_safetensors(path):
    """name -> torch tensor (F32/F16/F64/I64/I32; BF16 widened by hand)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        raw = data[base + start:base + end]
        if info["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
            array = bits.view(np.float32)
        else:
            array = np.frombuffer(raw, dtype=DTYPES[info["dtype"]])
        out[name] = torch.from_numpy(array.copy().reshape(info["shape"]))
    return out


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="GPT-2 model folder (config.json + model.safetensors)")
    parser.add_argument("--batch", required=True, help="input_ids [B, T] from `hedgehog bench --save-batch`")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (default: cores / ranks)")
    parser.add_argument("--ranks", type=int, default=1, help="data-parallel processes (Gloo on loopback)")
    args = parser.parse_args()
    if args.ranks <= 1:
        run(0, 1, args)
        return
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    mp.spawn(run, args=(args.ranks, args), nprocs=args.ranks)


def run(rank, world, args):
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(args.threads if args.threads > 0 else max(1, os.cpu_count() // world))
    config = json.load(open(os.path.join(args.model, "config.json")))
    weights = read_safetensors(os.path.join(args.model, "model.safetensors"))
    weights = {k[len("transformer."):] if k.startswith("transformer.") else k: v.float() for k, v in weights.items()}
    ids = read_safetensors(args.batch)["input_ids"].long()  # [B, T] global batch
    rows = ids.shape[0]
    first, last = rank * rows // world, (rank + 1) * rows // world
    share = (last - first) / rows
    ids = ids[first:last]  # this rank's rows
    B, T = ids.shape
    C, H, L = config["n_embd"], config["n_head"], config["n_layer"]
    D = C // H
    eps = config.get("layer_norm_epsilon", 1e-5)

    # Feature maps: one W [H, D, D] and b [H, D] per layer, the identity at the start.
    maps = []
    for _ in range(L):
        maps.append((torch.eye(D).repeat(H, 1, 1).requires_grad_(), torch.zeros(H, D).requires_grad_()))
    optimizer = torch.optim.AdamW([p for pair in maps for p in pair], lr=1e-2)
    causal = torch.ones(T, T, dtype=torch.bool).tril()

    def step():
        optimizer.zero_grad()
        x = weights["wte.weight"][ids] + weights["wpe.weight"][:T]  # [B, T, C]
        total = 0.0
        for l in range(L):
            p = f"h.{l}."
            h = F.layer_norm(x, (C,), weights[p + "ln_1.weight"], weights[p + "ln_1.bias"], eps)
            qkv = h @ weights[p + "attn.c_attn.weight"] + weights[p + "attn.c_attn.bias"]  # [B, T, 3C]
            q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in qkv.split(C, dim=-1))  # [B, H, T, D]
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(D)
            probs = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)  # [B, H, T, T]
            w, b = maps[l]
            uq = torch.einsum("bhtd,hed->bhte", q, w) + b[None, :, None, :]
            uk = torch.einsum("bhtd,hed->bhte", k, w) + b[None, :, None, :]
            fq = torch.cat([uq.exp(), (-uq).exp()], dim=-1)  # [B, H, T, 2D]
            fk = torch.cat([uk.exp(), (-uk).exp()], dim=-1)
            a = (fq @ fk.transpose(-1, -2)).masked_fill(~causal, 0.0)
            a = a / (a.sum(-1, keepdim=True) + 1e-6)  # [B, H, T, T]
            per_row = -(probs * torch.log(a + 1e-10)).masked_fill(~causal, 0.0).sum(-1)  # [B, H, T]
            total = total + per_row.mean(dim=(0, 2)).sum()
            y = (probs @ v).transpose(1, 2).reshape(B, T, C)
            x = x + (y @ weights[p + "attn.c_proj.weight"] + weights[p + "attn.c_proj.bias"])
            h = F.layer_norm(x, (C,), weights[p + "ln_2.weight"], weights[p + "ln_2.bias"], eps)
            h = gelu_new(h @ weights[p + "mlp.c_fc.weight"] + weights[p + "mlp.c_fc.bias"])
            x = x + (h @ weights[p + "mlp.c_proj.weight"] + weights[p + "mlp.c_proj.bias"])
        (total * share).backward()
        if world > 1:
            for w, b in maps:
                dist.all_reduce(w.grad)
                dist.all_reduce(b.grad)
            loss = torch.tensor([total.item() * share])
            dist.all_reduce(loss)
            optimizer.step()
            return loss.item()
        optimizer.step()
        return total.item()

    first_loss = None
    for _ in range(args.warmup):
        loss = step()
        first_loss = loss if first_loss is None else first_loss
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        loss = step()
        times.append((time.perf_counter() - t0) * 1000.0)
        first_loss = loss if first_loss is None else first_loss
    if rank == 0:
        print(f"pytorch {torch.__version__} | batch {rows} x {T} tokens | {world} process(es) x {torch.get_num_threads()} threads")
        print(f"distill step (PyTorch): median {statistics.median(times):.1f} ms, best {min(times):.1f} ms, "
              f"first-step loss {first_loss:.6g}")
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
