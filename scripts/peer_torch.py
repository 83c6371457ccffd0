#!/usr/bin/env python3
"""Times PyTorch (cuBLAS matmul, scaled_dot_product_attention) on the shapes decodebench measured,
with decodebench's method, and prints the ratio table.

Usage: peer_torch.py DECODEBENCH_RESULTS.jsonl [OUT.jsonl]

Method (the same as decodebench's, design.md "Measuring honestly"): CUDA events on a
non-default stream after warm-up; each sample times `reps` calls, each on the next of enough
rotated weight copies that the working set exceeds 4x the L2 size (so operands come from HBM);
at least 10 samples and 0.5 s, then until (Q3-Q1)/median < 0.5% or 10 s; the median is reported.
"""
import json
import math
import statistics
import sys
import time

import torch

L2 = torch.cuda.get_device_properties(0).L2_cache_size if torch.cuda.is_available() else 0
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def quantile(sorted_xs, q):
    pos = q * (len(sorted_xs) - 1)
    lo = math.floor(pos)
    if lo >= len(sorted_xs) - 1:
        return sorted_xs[-1]
    return sorted_xs[lo] + (pos - lo) * (sorted_xs[lo + 1] - sorted_xs[lo])


def measure(call, copies, bytes_per_call, stream):
    """call(i) launches one operation on copy i. Returns per-call seconds statistics."""
    with torch.cuda.stream(stream):
        for i in range(3):
            call(i % copies)
        torch.cuda.synchronize()
        # calibrate reps so that one sample lasts about 200 us or more
        reps = 1
        while True:
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(stream)
            for i in range(reps):
                call(i % copies)
            stop.record(stream)
            stop.synchronize()
            if start.elapsed_time(stop) >= 0.2 or reps >= 4096:
                break
            reps *= 2
        samples, t0, j = [], time.perf_counter(), 0
        while True:
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(stream)
            for _ in range(reps):
                call(j % copies)
                j += 1
            stop.record(stream)
            stop.synchronize()
            samples.append(start.elapsed_time(stop) / 1e3 / reps)
            elapsed = time.perf_counter() - t0
            if len(samples) >= 10 and elapsed >= 0.5:
                s = sorted(samples)
                med = quantile(s, 0.5)
                spread = (quantile(s, 0.75) - quantile(s, 0.25)) / med
                if spread < 0.005 or elapsed >= 10:
                    return {"median_seconds": med, "min_seconds": s[0], "spread": spread,
                            "samples": len(samples), "converged": spread < 0.005}


def copies_for(working_set_bytes):
    return max(1, math.ceil(4 * L2 / max(working_set_bytes, 1)))


def time_linear(rec, stream):
    b, n, k, dt = rec["batch"], rec["n"], rec["k"], DTYPES[rec.get("dtype", "bf16")]
    wbytes = n * k * 2
    ncopies = min(copies_for(wbytes), max(1, int(20e9 // wbytes)))
    ws = [torch.randn(n, k, device="cuda", dtype=dt) for _ in range(ncopies)]
    x = torch.randn(b, k, device="cuda", dtype=dt)
    ys = [torch.empty(b, n, device="cuda", dtype=dt) for _ in range(ncopies)]
    st = measure(lambda i: torch.matmul(x, ws[i].t(), out=ys[i]), ncopies, wbytes, stream)
    del ws, ys
    return st


def time_attention(rec, stream):
    b, hq, hkv, d, s = rec["batch"], rec["q_heads"], rec["kv_heads"], rec["head_dim"], rec["context"]
    dt = DTYPES[rec.get("dtype", "bf16")]
    kvbytes = 2 * b * hkv * s * d * 2
    ncopies = min(copies_for(kvbytes), max(1, int(40e9 // kvbytes)))
    q = torch.randn(b, hq, 1, d, device="cuda", dtype=dt)
    ks = [torch.randn(b, hkv, s, d, device="cuda", dtype=dt) for _ in range(ncopies)]
    vs = [torch.randn(b, hkv, s, d, device="cuda", dtype=dt) for _ in range(ncopies)]
    f = torch.nn.functional.scaled_dot_product_attention
    st = measure(lambda i: f(q, ks[i], vs[i], enable_gqa=(hq != hkv)), ncopies, kvbytes, stream)
    del ks, vs
    return st


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    out = open(sys.argv[2], "w") if len(sys.argv) > 2 else None
    stream = torch.cuda.Stream()
    print(f"{'kernel':<16}{'shape':<34}{'decodebench us':>15}{'torch us':>10}{'ratio':>8}  (torch/decodebench time; >1 = we are faster)")
    for rec in recs:
        if rec.get("status", "ok") != "ok":
            continue
        try:
            if rec.get("kind") == "attention":
                st = time_attention(rec, stream)
                shape = f"B={rec['batch']} Hq={rec['q_heads']} Hkv={rec['kv_heads']} D={rec['head_dim']} S={rec['context']}"
            else:
                st = time_linear(rec, stream)
                shape = f"B={rec['batch']} N={rec['n']} K={rec['k']}"
        except torch.cuda.OutOfMemoryError:
            print(f"{rec.get('kernel','?'):<16} out of memory for the peer; skipped")
            torch.cuda.empty_cache()
            continue
        ours = rec["median_seconds"]
        ratio = st["median_seconds"] / ours
        print(f"{rec.get('kernel','?'):<16}{shape:<34}{ours*1e6:>15.1f}{st['median_seconds']*1e6:>10.1f}{ratio:>8.2f}")
        if out:
            out.write(json.dumps({**{k: rec.get(k) for k in ("kernel", "kind", "batch", "n", "k", "q_heads", "kv_heads", "head_dim", "context", "dtype")},
                                  "peer": "torch", "torch_version": torch.__version__, **st,
                                  "decodebench_median_seconds": ours, "ratio_peer_over_ours": ratio}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
