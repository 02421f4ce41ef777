#!/usr/bin/env python3
"""How large exp(t x) features get in a trained exp_t llama (docs/experiments.md, associative
recall at the paper's vocabulary and length): runs the model folder on N associative-recall rows
drawn like the task's (pairs of a key and its value, then a query key and its value) in plain
PyTorch (scripts/pytorch_reference_models.py), with causal linear attention on exp(t q), exp(t k)
in fp32, and prints per layer the largest t q and t k, the largest normaliser, and how many
normalisers overflowed fp32 and how many outputs are NaN.

  /usr/bin/python3 scripts/exp_feature_overflow.py runs/experiments/associative_recall_d64_len128/exp_t2/model
"""
import argparse
import json
import os
import random
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_reference_models as prm  # noqa: E402


def recall_rows(vocab, length, rows, seed):
    """[rows, length] ids: (length - 2) / 2 key-value pairs (each key keeps one value), a query."""
    keys = vocab // 2
    rng = random.Random(seed)
    out = []
    for _ in range(rows):
        value = [keys + rng.randrange(keys) for _ in range(keys)]
        ids = [rng.randrange(keys)] if length % 2 else []
        for _ in range((length - 2) // 2):
            k = rng.randrange(keys)
            ids += [k, value[k]]
        query = ids[length % 2]  # the first pair's key (after the filler of an odd length)
        out.append(ids + [query, value[query]])
    return torch.tensor(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="model folder (config.json, model.safetensors, task.json)")
    parser.add_argument("--rows", type=int, default=512)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    config, weights = prm.load_folder(args.model)
    task = json.load(open(os.path.join(args.model, "task.json")))["task"]
    t = config["hedgehog_attention"]["layers"][0]["exp_t"]
    model = prm.make_model(config, weights, "cpu", torch.float32, torch.float32, False)
    ids = recall_rows(task["vocab_size"], task["sequence_length"], args.rows, args.seed)

    def attend(layer, q, k, v):  # q, k, v [B, H, T, D]
        fq, fk = torch.exp(t * q), torch.exp(t * k)  # [B, H, T, D]
        state = torch.einsum("bhtf,bhtd->bhtfd", fk, v).cumsum(2)  # sum over keys j <= i
        num = torch.einsum("bhtf,bhtfd->bhtd", fq, state)
        den = torch.einsum("bhtf,bhtf->bht", fq, fk.cumsum(2))
        y = num / den[..., None]
        print(f"layer {layer}: max t*q {float((t * q).max()):.1f}, max t*k {float((t * k).max()):.1f}, "
              f"max normaliser {float(den.max()):.3g}, {int((~torch.isfinite(den)).sum())} of {den.numel()} "
              f"normalisers not finite, {int(torch.isnan(y).sum())} NaN outputs")
        return y

    with torch.no_grad():
        logits = model.forward(ids, attend)
    print(f"{args.rows} rows: logits finite in {int(torch.isfinite(logits).all(-1).all(-1).sum())}")


if __name__ == "__main__":
    main()
