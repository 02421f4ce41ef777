#!/usr/bin/python3
"""The Hedgehog distillation and finetuning steps of a GPT-2 or Llama model, written plainly in PyTorch.

The baseline for `hedgehog bench MODEL --only distill` (and `--only finetune`): the same model
weights (a model folder, or `--shape gpt2-small|llama-1b` with random weights, as the engine's
--shape), the same batch (`--batch FILE`, written by `hedgehog bench --save-batch FILE`; with
--shape and no --batch the same random ids as the engine's: torch.manual_seed(1), randint), the
same steps:
  distill   teacher forward through every layer (softmax attention propagates), per layer and head
            the softmax weights P and the Hedgehog linear weights A from
            phi(x) = [exp(u), exp(-u)], u = clamp(xW^T + b, +-30) (W = I, b = 0 at the start, one
            per layer and head; the engine's clamp), the soft cross-entropy  sum_layers sum_heads
            mean_rows sum_j -P_ij log(A_ij + 1e-10), backward into the feature maps only, one AdamW
            step (lr 1e-2). Each layer's term is backpropagated as soon as the layer has run (as the
            engine's distill step does: a term depends on its own feature map only, so the
            gradients are those of the sum, and one layer's [B, H, T, T] tensors are alive at a
            time); --distill-backward summed backpropagates the sum once at the end instead.
  finetune  the converted model (every layer Hedgehog linear attention, causal:
            y_i = sum_{j<=i} (phi(q_i).phi(k_j)) v_j / (sum_{j<=i} phi(q_i).phi(k_j) + 1e-6)), the
            next-token cross-entropy, backward into every weight (feature maps included), one
            AdamW step (lr 1e-4). --linear-form quadratic (default) computes it the plain way, the
            [T, T] products with a causal mask; chunked the engine's way (chunks of 64: the
            chunk's masked [64, 64] products plus the running state S = sum phi(k) [v, 1]^T).
Prints each step's first loss (to check against the engine's), median and best step time,
tokens per second and, on a GPU, the allocator's peak over the step (torch.cuda.max_memory_allocated
after reset_peak_memory_stats; every step ends with torch.cuda.synchronize()). --json FILE writes
them as `hedgehog bench --json` does.

--dtype bfloat16 is the engine's mixed precision, with explicit casts: the frozen teacher's
weights and the activations in bf16; what trains (the feature maps in the distill step, every
weight in the finetune step) fp32 master weights cast to bf16 where used; LayerNorm / RMSNorm, the
softmax (q and k cast up before q k^T, as the engine does), the linear attention's products and
normaliser (features cast up) and the losses in fp32. --autocast instead keeps every weight in fp32
and runs the step's forward under torch.autocast(bfloat16), PyTorch deciding the casts.
fp32 matmuls use PyTorch's default (no TF32), as the engine's.

With --ranks N the step is data-parallel the plain torch.distributed way (Gloo, CPU only, one
process per rank, each on its rows of the batch, its loss weighted by its share, every gradient
all-reduced), the baseline for `hedgehog distill --nproc N` (docs/distributed.md).

  python3 scripts/bench_distill_pytorch.py projects/demo/teacher --batch /tmp/batch.safetensors
  python3 scripts/bench_distill_pytorch.py projects/demo/teacher --batch /tmp/batch.safetensors --ranks 2
On the GPU machine (PyTorch 2.x, CUDA):
  python3 scripts/bench_distill_pytorch.py --shape gpt2-small --device cuda --dtype bfloat16 --batch-size 8 --seq-len 1024 --step both --json /tmp/pt_gpt2.json
  python3 scripts/bench_distill_pytorch.py --shape llama-1b --device cuda --dtype bfloat16 --batch-size 4 --seq-len 1024 --step both
"""
import argparse
import contextlib
import gc
import json
import math
import os
import statistics
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from pytorch_reference_models import SHAPES, load_folder, make_model, random_weights, read_safetensors, shape_config

CLAMP = 30.0      # Hedgehog's u is clamped to +-30 before exp (engine/config/attention_types.h)
EPS = 1e-6        # the linear attention's normaliser guard
CHUNK = 64        # the chunked form's chunk length (the engine's default)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", help="GPT-2 or Llama model folder (config.json + model.safetensors)")
    parser.add_argument("--shape", choices=sorted(SHAPES), help="instead of a folder: a named shape, random weights")
    parser.add_argument("--batch", help="input_ids [B, T] from `hedgehog bench --save-batch` (default with --shape: random ids)")
    parser.add_argument("--batch-size", type=int, default=8, help="with --shape and no --batch: sequences (default 8)")
    parser.add_argument("--seq-len", type=int, default=128, help="with --shape and no --batch: tokens per sequence (default 128)")
    parser.add_argument("--step", choices=("distill", "finetune", "both"), default="distill")
    parser.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N (default cpu)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--autocast", action="store_true",
                        help="with --dtype bfloat16: fp32 weights under torch.autocast instead of explicit casts")
    parser.add_argument("--distill-backward", choices=("per-layer", "summed"), default="per-layer",
                        help="backpropagate each layer's term as it comes (the engine's way, default) or the sum once")
    parser.add_argument("--linear-form", choices=("quadratic", "chunked"), default="quadratic",
                        help="the finetune step's linear attention (default quadratic)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (default: cores / ranks)")
    parser.add_argument("--ranks", type=int, default=1, help="data-parallel processes (Gloo on loopback, CPU only)")
    parser.add_argument("--json", help="also write the timings here as JSON")
    args = parser.parse_args()
    if args.model is None and args.shape is None:
        parser.error("give a model folder or --shape")
    if args.model is not None and args.shape is not None:
        parser.error("give a model folder or --shape, not both")
    if args.model is not None and args.batch is None:
        parser.error("a model folder needs --batch FILE (from `hedgehog bench MODEL --save-batch FILE`)")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.autocast and args.dtype != "bfloat16":
        parser.error("--autocast goes with --dtype bfloat16")
    if args.device != "cpu" and not args.device.startswith("cuda"):
        parser.error("--device is cpu, cuda or cuda:N")
    if args.device.startswith("cuda"):
        if args.ranks > 1:
            parser.error("--ranks > 1 is the CPU / Gloo baseline only: run one process with --device cuda")
        if not torch.cuda.is_available():
            parser.error(f"--device {args.device}: this PyTorch ({torch.__version__}) sees no CUDA device")
    if args.ranks <= 1:
        run(0, 1, args)
        return
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    mp.spawn(run, args=(args.ranks, args), nprocs=args.ranks)


def hedgehog_features(x, w, b):
    """phi(x) = [exp(u), exp(-u)], u = clamp(x W^T + b, +-30) per head: x [B, H, T, D] -> [B, H, T, 2D]
    in x's dtype (the fp32 master W [H, D, D] and b [H, D] cast to it)."""
    u = torch.einsum("bhtd,hed->bhte", x, w.to(x.dtype)) + b.to(x.dtype)[None, :, None, :]
    u = u.clamp(-CLAMP, CLAMP)
    return torch.cat([u.exp(), (-u).exp()], dim=-1)


def linear_weights(fq, fk, causal):
    """A [B, H, T, T] in fp32: the causal phi(q).phi(k) products, each row normalised."""
    a = (fq.float() @ fk.float().transpose(-1, -2)).masked_fill(~causal, 0.0)
    return a / (a.sum(-1, keepdim=True) + EPS)


def linear_attention(fq, fk, v, causal, form):
    """Causal Hedgehog attention y [B, H, T, D] in v's dtype; features, values and sums in fp32."""
    fq, fk, vf = fq.float(), fk.float(), v.float()
    if form == "quadratic":
        a = (fq @ fk.transpose(-1, -2)).masked_fill(~causal, 0.0)  # [B, H, T, T]
        return ((a @ vf) / (a.sum(-1, keepdim=True) + EPS)).to(v.dtype)
    B, H, T, D = v.shape
    v1 = torch.cat([vf, torch.ones_like(vf[..., :1])], dim=-1)  # [B, H, T, D+1]: the last column sums the weights
    state = fq.new_zeros(B, H, fq.shape[-1], D + 1)              # S = sum_j phi(k_j) [v_j, 1]^T
    outs = []
    for t0 in range(0, T, CHUNK):
        qc, kc, vc = fq[:, :, t0:t0 + CHUNK], fk[:, :, t0:t0 + CHUNK], v1[:, :, t0:t0 + CHUNK]
        n = qc.shape[2]
        outs.append(((qc @ kc.transpose(-1, -2)).masked_fill(~causal[:n, :n], 0.0)) @ vc + qc @ state)
        state = state + kc.transpose(-1, -2) @ vc
    o = torch.cat(outs, dim=2)
    return (o[..., :D] / (o[..., D:] + EPS)).to(v.dtype)


def feature_maps(layers, heads, dim, device):
    """Per layer W [H, D, D] = I and b [H, D] = 0, fp32, trainable."""
    return [(torch.eye(dim, device=device).repeat(heads, 1, 1).requires_grad_(),
             torch.zeros(heads, dim, device=device).requires_grad_()) for _ in range(layers)]


def all_reduce_grads(params):
    for p in params:
        if p.grad is not None:
            dist.all_reduce(p.grad)


def global_loss(value, share, world):
    """The batch's loss from this rank's (each rank's weighted by its share of the rows)."""
    if world == 1:
        return value
    loss = torch.tensor([value * share])
    dist.all_reduce(loss)
    return loss.item()


class ModelSource:
    """The teacher: a model folder (weights read once, on the CPU) or a named shape (random weights,
    drawn afresh on the device for each step kind, seeded)."""

    def __init__(self, args, seq_len):
        if args.shape:
            self.config, self.weights, self.name = shape_config(args.shape, seq_len), None, f"{args.shape} (random weights)"
        else:
            self.config, self.weights = load_folder(args.model)
            self.name = args.model
            positions = self.config.get("n_positions", self.config.get("max_position_embeddings", seq_len))
            if seq_len > positions:
                raise SystemExit(f"the batch has {seq_len} tokens per row, the model {positions} positions")

    def make(self, device, dtype, act, trainable):
        if self.weights is not None:  # a copy: the folder's weights stay as read for the next step kind
            return make_model(self.config, self.weights, device, dtype, act, trainable, copy=True)
        torch.manual_seed(0)
        return make_model(self.config, random_weights(self.config, device, dtype), device, dtype, act, trainable)


def distill_step(source, ids, args, device, act, share, world):
    """The distill step as a function returning the batch's loss (the state lives in its closure)."""
    teacher_dtype = act  # bf16: the frozen teacher's weights in bf16; --autocast keeps them fp32 (act is fp32 then)
    model = source.make(device, teacher_dtype, act, trainable=False)
    H, D, L = model.heads()
    maps = feature_maps(L, H, D, device)
    params = [p for pair in maps for p in pair]
    optimizer = torch.optim.AdamW(params, lr=1e-2)
    T = ids.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool, device=device).tril()
    per_layer = args.distill_backward == "per-layer"

    def step():
        optimizer.zero_grad()
        terms = []

        def attend(l, q, k, v):
            scores = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(D)
            probs = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)  # [B, H, T, T] fp32
            w, b = maps[l]
            a = linear_weights(hedgehog_features(q, w, b), hedgehog_features(k, w, b), causal)
            per_row = -(probs * torch.log(a + 1e-10)).masked_fill(~causal, 0.0).sum(-1)  # [B, H, T]
            term = per_row.mean(dim=(0, 2)).sum()
            if per_layer:
                with autocast(device, args, enabled=False):
                    (term * share).backward()
                term = term.detach()
            terms.append(term)
            return probs.to(v.dtype) @ v

        with autocast(device, args):
            model.forward(ids, attend, logits=False)
        total = torch.stack(terms).sum()
        if not per_layer:
            (total * share).backward()
        if world > 1:
            all_reduce_grads(params)
        optimizer.step()
        return global_loss(total.item(), share, world)

    return step


def finetune_step(source, ids, args, device, act, share, world):
    """The finetune step (as `hedgehog bench --only finetune`): every weight trains, fp32 masters."""
    model = source.make(device, torch.float32, act, trainable=True)
    H, D, L = model.heads()
    maps = feature_maps(L, H, D, device)
    params = model.parameters() + [p for pair in maps for p in pair]
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    T = ids.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool, device=device).tril()

    def attend(l, q, k, v):
        w, b = maps[l]
        return linear_attention(hedgehog_features(q, w, b), hedgehog_features(k, w, b), v, causal, args.linear_form)

    def step():
        optimizer.zero_grad()
        with autocast(device, args):
            logits = model.forward(ids, attend).float()  # [B, T, V]
            V = logits.shape[-1]
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))
        (loss * share).backward()
        if world > 1:
            all_reduce_grads(params)
        optimizer.step()
        return global_loss(loss.item(), share, world)

    return step


def autocast(device, args, enabled=True):
    if not args.autocast:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=enabled)


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(name, step, args, device, tokens):
    """Runs the step --warmup times, then --repeats times; the first loss is the first step's."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    first_loss = None
    for _ in range(args.warmup):
        loss = step()
        first_loss = loss if first_loss is None else first_loss
    times = []
    for _ in range(args.repeats):
        synchronize(device)
        t0 = time.perf_counter()
        loss = step()
        synchronize(device)
        times.append((time.perf_counter() - t0) * 1000.0)
        first_loss = loss if first_loss is None else first_loss
    median = statistics.median(times)
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else -1
    return {"step": name, "median_ms": median, "best_ms": min(times), "tokens_per_second": tokens / (median / 1000.0),
            "peak_bytes": peak, "loss": first_loss}


def run(rank, world, args):
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(args.threads if args.threads > 0 else max(1, os.cpu_count() // world))
    device = torch.device(args.device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    act = torch.bfloat16 if args.dtype == "bfloat16" and not args.autocast else torch.float32
    if args.batch:
        ids = read_safetensors(args.batch)["input_ids"].long()  # [B, T] global batch
    else:
        vocab = SHAPES[args.shape]["vocab_size"]
        torch.manual_seed(1)  # as `hedgehog bench --shape`: the same ids
        ids = torch.randint(vocab, (args.batch_size, args.seq_len))
    source = ModelSource(args, ids.shape[1])
    vocab = source.config["vocab_size"]
    if ids.numel() and (ids.min() < 0 or ids.max() >= vocab):
        raise SystemExit(f"token ids must lie in [0, {vocab})")
    rows = ids.shape[0]
    first, last = rank * rows // world, (rank + 1) * rows // world
    share = (last - first) / rows
    ids = ids[first:last].to(device)  # this rank's rows
    T = ids.shape[1]

    timings = []
    for name, make_step in (("distill step", distill_step), ("finetune step", finetune_step)):
        if args.step not in ("both", name.split()[0]):
            continue
        step = make_step(source, ids, args, device, act, share, world)
        timings.append(time_steps(name, step, args, device, rows * T))
        del step  # frees the step's model, feature maps and optimizer before the next
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()

    if rank == 0:
        label = f"{device} ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else "cpu"
        dtype = args.dtype + (" (autocast)" if args.autocast else "")
        print(f"pytorch {torch.__version__} | {source.name} | batch {rows} x {T} tokens | {label}, {dtype} | "
              f"{world} process(es) x {torch.get_num_threads()} threads")
        for t in timings:
            peak = "n/a (CPU)" if t["peak_bytes"] < 0 else f"{t['peak_bytes'] / 2**20:.0f} MiB"
            print(f"{t['step']} (PyTorch): median {t['median_ms']:.1f} ms, best {t['best_ms']:.1f} ms, "
                  f"{t['tokens_per_second']:.0f} tokens/s, peak {peak}, first-step loss {t['loss']:.6g}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"implementation": "pytorch", "model": source.name, "batch": rows, "seq_len": T,
                           "dtype": dtype, "threads": torch.get_num_threads(), "ranks": world, "device": label,
                           "torch": torch.__version__, "linear_form": args.linear_form,
                           "distill_backward": args.distill_backward, "timings": timings}, f, indent=2)
                f.write("\n")
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
