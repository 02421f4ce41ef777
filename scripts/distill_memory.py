#!/usr/bin/env python3
"""Memory per rank of Hedgehog distillation, measured on this machine and extrapolated to a model
shape by the formula docs/distributed.md derives:

  per rank = W * bytes(dtype)                        frozen teacher weights (replicated)
           + P * 24 bytes                            feature maps: fp32 value, grad, AdamW m and v,
                                                     the last-good and best copies (replicated)
           + k * 4 bytes * b * H * T^2               attention-sized tensors alive at the peak of a
                                                     training step (one layer's: distillation
                                                     backpropagates layer by layer); b = this
                                                     rank's sequences of the global batch
           + 4 bytes * b * T * (6 d + 3 f)           one layer's hidden-sized transients (x, q, k,
                                                     v, attention output, residual; the MLP's
                                                     three f-wide tensors), counted, not fitted
  rank 0 also probes (per-head tables on R held-out rows, no gradient; the peak is the larger):
             k0 * 4 bytes * R * H * T^2              R = probe_rows (default: the global batch B)

k is fitted by least squares on the peak resident memory of rank 1 of `hedgehog distill --nproc 2`
runs (rank 1 trains and never probes), k0 on `--steps 0` runs of one process (probe and held-out
loss only), both over several sequence lengths and batch sizes of a small model folder. The table
is then computed for the shape in --target (a Hugging Face config.json).

  scripts/distill_memory.py --cli build/app/hedgehog --model tests/data/tiny-random-gpt2 \\
      --target projects/shapes/llama-2-7b.json
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile


def run(cmd, env):
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    if done.returncode != 0:
        sys.exit(f"distill_memory: {' '.join(cmd)} failed: {done.stdout.strip()[-2000:]}")
    return done.stdout


def peak_mb(text, rank):
    """The peak memory the CLI printed: "peak memory: N MB" (rank 0) or "rank K: ... peak memory N MB"."""
    pattern = r"^peak memory: ([0-9.]+) MB" if rank == 0 else rf"^rank {rank}: .*peak memory ([0-9.]+) MB"
    match = re.search(pattern, text, re.M)
    if not match:
        sys.exit(f"distill_memory: no peak memory line for rank {rank} in: {text[-2000:]}")
    return float(match.group(1))


def solve_least_squares(rows, values):
    """Normal equations for a small dense system (no numpy needed)."""
    n = len(rows[0])
    a = [[sum(r[i] * r[j] for r in rows) for j in range(n)] for i in range(n)]
    b = [sum(r[i] * v for r, v in zip(rows, values)) for i in range(n)]
    for col in range(n):  # Gauss-Jordan with partial pivoting
        pivot = max(range(col, n), key=lambda i: abs(a[i][col]))
        a[col], a[pivot], b[col], b[pivot] = a[pivot], a[col], b[pivot], b[col]
        for i in range(n):
            if i != col and a[col][col] != 0:
                f = a[i][col] / a[col][col]
                a[i] = [x - f * y for x, y in zip(a[i], a[col])]
                b[i] -= f * b[col]
    return [b[i] / a[i][i] for i in range(n)]


def shape_of(config):
    c = json.load(open(config))
    get = lambda *keys: next(c[k] for k in keys if k in c)
    return {
        "d": get("hidden_size", "n_embd"),
        "layers": get("num_hidden_layers", "n_layer"),
        "heads": get("num_attention_heads", "n_head"),
        "kv_heads": c.get("num_key_value_heads", get("num_attention_heads", "n_head")),
        "ffn": c.get("intermediate_size") or c.get("n_inner") or 4 * get("hidden_size", "n_embd"),
        "vocab": c["vocab_size"],
        "gated_mlp": c.get("model_type", "") in ("llama", "mistral"),
        "tied": c.get("tie_word_embeddings", c.get("model_type") == "gpt2"),
    }


def parameter_counts(s):
    d, L, H, kv, f, v = s["d"], s["layers"], s["heads"], s["kv_heads"], s["ffn"], s["vocab"]
    head = d // H
    attention = d * d * 2 + 2 * d * head * kv      # q, o and k, v (grouped)
    mlp = (3 if s["gated_mlp"] else 2) * d * f
    norms = 2 * d
    weights = v * d + L * (attention + mlp + norms) + d + (0 if s["tied"] else v * d)
    feature_maps = L * H * (head * head + head)    # Hedgehog: W [H,D,D] + b [H,D] per layer
    return weights, feature_maps


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cli", default="build/app/hedgehog")
    p.add_argument("--model", default="tests/data/tiny-random-gpt2")
    p.add_argument("--corpus", default="brown")
    p.add_argument("--lengths", type=int, nargs="+", default=[64, 192, 320, 448])
    p.add_argument("--batches", type=int, nargs="+", default=[2, 6])
    p.add_argument("--target", default="projects/shapes/llama-2-7b.json")
    p.add_argument("--target-lengths", type=int, nargs="+", default=[1024, 2048])
    p.add_argument("--global-batch", type=int, default=8)
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--probe-rows", type=int, default=1, help="the probe_rows of the last column")
    args = p.parse_args()

    measured = shape_of(os.path.join(args.model, "config.json"))
    H = measured["heads"]
    env = dict(os.environ, HH_NUM_THREADS="1")
    train_rows, train_peaks, probe_rows, probe_peaks = [], [], [], []
    print("measured on", args.model, f"(L={measured['layers']}, H={H}, d={measured['d']}), 1 thread per process")
    print("| global batch B | tokens T | rank 1 of 2, training (MB) | 1 process, probe only (MB) |\n|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for b in args.batches:
            for t in args.lengths:
                common = [args.cli, "distill", args.model, "--corpus", args.corpus, "--eval-every", "1000",
                          "--batch-size", str(b), "--seq-len", str(t), "--max-train", str(2 * b)]
                train_dir = os.path.join(tmp, f"train-b{b}t{t}")
                run(common + ["--run-dir", train_dir, "--steps", "3", "--nproc", "2"], env)
                trained = peak_mb(open(os.path.join(train_dir, "rank-1.log")).read(), 1)
                probed = peak_mb(run(common + ["--run-dir", os.path.join(tmp, f"probe-b{b}t{t}"), "--steps", "0"], env), 0)
                train_rows.append([1.0, 4 * (b // 2) * H * t * t])
                train_peaks.append(trained * 2**20)
                probe_rows.append([1.0, 4 * b * H * t * t])
                probe_peaks.append(probed * 2**20)
                print(f"| {b} | {t} | {trained:.0f} | {probed:.0f} |")
    base, k = solve_least_squares(train_rows, train_peaks)
    base0, k0 = solve_least_squares(probe_rows, probe_peaks)
    residual = lambda rows, peaks, c0, c1: max(abs(c0 + c1 * x - y) for (_, x), y in zip(rows, peaks)) / 2**20
    print(f"\ntraining: peak = {base / 2**20:.1f} MB + {k:.2f} x (4 B x b H T^2), b = B / 2;"
          f" largest residual {residual(train_rows, train_peaks, base, k):.1f} MB")
    print(f"probe:    peak = {base0 / 2**20:.1f} MB + {k0:.2f} x (4 B x B H T^2);"
          f" largest residual {residual(probe_rows, probe_peaks, base0, k0):.1f} MB")

    s = shape_of(args.target)
    weights, feature_maps = parameter_counts(s)
    print(f"\ntarget {args.target}: {weights / 1e9:.3f} B weights ({weights * 4 / 1e9:.1f} GB fp32, {weights * 2 / 1e9:.1f} GB bf16),"
          f" {feature_maps / 1e6:.2f} M feature-map parameters ({feature_maps * 24 / 1e9:.2f} GB with grads, AdamW, copies)"
          f" (L={s['layers']}, H={s['heads']}, d={s['d']}), global batch {args.global_batch}")
    print(f"| tokens T | ranks | sequences per rank | training activations (GB) | rank > 0, fp32 / bf16 teacher (GB) |"
          f" rank 0, probe_rows = B: probe (GB), fp32 / bf16 teacher (GB) |"
          f" rank 0, probe_rows = {args.probe_rows}: probe (GB), fp32 / bf16 teacher (GB) |")
    print("|---|---|---|---|---|---|---|")
    gb = 1e9
    d, f = s["d"], s["ffn"]
    for t in args.target_lengths:
        for n in args.ranks:
            b = -(-args.global_batch // n)  # the largest shard
            act = k * 4 * b * s["heads"] * t * t + 4 * b * t * (6 * d + 3 * f)
            probe = lambda rows: k0 * 4 * rows * s["heads"] * t * t + 4 * rows * t * (6 * d + 3 * f)
            trainable = feature_maps * 24
            total = lambda bytes_per_weight, a: (weights * bytes_per_weight + trainable + a) / gb
            cells = [f"{t}", f"{n}", f"{b}", f"{act / gb:.2f}", f"{total(4, act):.1f} / {total(2, act):.1f}"]
            for rows in (args.global_batch, args.probe_rows):
                peak = max(act, probe(rows))
                cells.append(f"{probe(rows) / gb:.2f}: {total(4, peak):.1f} / {total(2, peak):.1f}")
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
