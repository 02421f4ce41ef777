#!/usr/bin/env python3
"""The attention tables of docs/performance_gpu.md from a device session's logs.

    python3 scripts/gpu_tables.py DIR        (DIR: the unpacked session.tgz, or docs/gpu_runs/<run>)

Reads DIR/attention_small.log and DIR/attention_large.log (hh_bench_attention's markdown tables)
and prints, per shape, one row per length: FlashAttention (at::scaled_dot_product_attention), the
engine's generic LibTorch path and each set of fused kernels (measured, pipelined, chunked) as
"forward / forward + backward" in ms, the chunked kernels' peak memory, flash's forward time over the
fastest Hedgehog forward's (above 1: Hedgehog is faster), and the chunked forward's share of the measured matmul rate. A column the
log does not have (an older bench) prints as "-". Standard library only (the GPU machine has no
package registry).
"""
import re
import sys
from pathlib import Path

# (table heading, bench column of the forward; the forward + backward column follows it)
SETS = [("flash", "fused fwd"), ("generic", "generic fwd"), ("kernel", "cuda kernel fwd"),
        ("pipelined", "pipelined kernel fwd"), ("chunked", "chunked kernel fwd")]


def read_table(path):
    """The bench's first markdown table: (header cells, rows of cells) with cells stripped."""
    header, rows = None, []
    for line in path.read_text().splitlines():
        if not line.startswith("|"):
            if header:
                break
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
        elif not set(line) <= set("|-: "):
            rows.append(cells)
    return header or [], rows


def columns(header):
    """Column index of each set's forward, and of its forward + backward (the next column)."""
    found = {}
    for name, title in SETS:
        if title in header:
            found[name] = (header.index(title), header.index(title) + 1)
    return found


def ms(cell):
    m = re.match(r"([0-9.]+) ms", cell)
    return float(m.group(1)) if m else None


def mib(cell):
    m = re.search(r"([0-9.]+) MiB", cell)
    return float(m.group(1)) if m else None


def pair(row, at):
    """'fwd / fwd+bwd' in ms, or what the bench said instead (out of memory, skipped)."""
    def one(cell):
        value = ms(cell)
        if value is not None:
            return f"{value:g}"
        return "OOM" if "out of memory" in cell else ("skipped" if "skipped" in cell else "-")
    return f"{one(row[at[0]])} / {one(row[at[1]])}"


def shape_of(path):
    first = path.read_text().splitlines()[0]
    m = re.search(r"B=(\d+) H=(\d+) D=(\d+)", first)
    return f"B={m.group(1)} H={m.group(2)} D={m.group(3)}" if m else path.name


def print_shape(path):
    header, rows = read_table(path)
    where = columns(header)
    share = header.index("chunked fwd, % of rate") if "chunked fwd, % of rate" in header else None
    names = [name for name, _ in SETS]
    print(f"\n{shape_of(path)} (ms; forward / forward + backward):\n")
    print("| n | " + " | ".join(names) + " | chunked memory fwd / fwd+bwd | flash / fastest Hedgehog fwd | chunked fwd, % of rate |")
    print("|---" * (len(names) + 4) + "|")
    for row in rows:
        cells = [pair(row, where[name]) if name in where else "-" for name in names]
        memory = "-"
        if "chunked" in where:
            f, b = (mib(row[i]) for i in where["chunked"])
            memory = f"{f:g} / {b:g} MiB" if f is not None and b is not None else "-"
        forwards = [ms(row[where[n][0]]) for n in names[1:] if n in where]
        forwards = [x for x in forwards if x is not None]
        flash = ms(row[where["flash"][0]]) if "flash" in where else None
        versus = f"{flash / min(forwards):.2f}x" if flash and forwards else "-"
        print(f"| {row[0]} | " + " | ".join(cells) + f" | {memory} | {versus} | {row[share] if share is not None else '-'} |")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = Path(sys.argv[1])
    logs = [root / name for name in ("attention_small.log", "attention_large.log") if (root / name).exists()]
    if not logs:
        sys.exit(f"gpu_tables: no attention_*.log in {root}")
    for log in logs:
        print_shape(log)


if __name__ == "__main__":
    main()
