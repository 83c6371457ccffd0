#!/usr/bin/env python3
"""Times PyTorch (cuBLAS matmul, scaled_dot_product_attention) on the shapes decodebench measured,
with decodebench's method, and prints the ratio table; or summarises a GPU check against the
speed targets the kernels are held to (kernels/README.md, "Predicted against measured").

Usage:
  peer_torch.py DECODEBENCH.jsonl [PEER_OUT.jsonl]     time the peers (needs torch and a GPU)
  peer_torch.py --summary DECODEBENCH.jsonl [PEER.jsonl]  the targets table (plain Python)

DECODEBENCH.jsonl holds `decodebench bench` records (kind linear, attention or probe; the probes
and the records that are not "ok" or are emulated are skipped when timing peers).

Method (the same as decodebench's, design.md "Measuring honestly"): CUDA events on a
non-default stream after warm-up; each sample times `reps` calls, each on the next of enough
rotated weight (or KV-cache) copies that the working set exceeds 4x the L2 size (so operands come
from HBM), reps calibrated so that a sample lasts 200 us or more; at least 10 samples and
PEER_MIN_SECONDS (0.5 s), then until (Q3-Q1)/median < PEER_TARGET_SPREAD (0.5%) or
PEER_MAX_SECONDS (10 s); the median is reported. Each output line is flushed as it is written.
"""
import json
import math
import os
import sys
import time

MIN_SECONDS = float(os.environ.get("PEER_MIN_SECONDS", "0.5"))
MAX_SECONDS = float(os.environ.get("PEER_MAX_SECONDS", "10"))
TARGET_SPREAD = float(os.environ.get("PEER_TARGET_SPREAD", "0.005"))
MIN_SAMPLES = 10


def quantile(sorted_xs, q):
    pos = q * (len(sorted_xs) - 1)
    lo = math.floor(pos)
    if lo >= len(sorted_xs) - 1:
        return sorted_xs[-1]
    return sorted_xs[lo] + (pos - lo) * (sorted_xs[lo + 1] - sorted_xs[lo])


def read_jsonl(path):
    recs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    recs.append(json.loads(line))
                except json.JSONDecodeError:
                    pass  # a line cut off by a timeout
    return recs


# ---- timing the peers ---------------------------------------------------------------------------

def measure(torch, call, copies, stream):
    """call(i) launches one operation on copy i. Returns per-call seconds statistics."""
    with torch.cuda.stream(stream):
        for i in range(3):
            call(i % copies)
        torch.cuda.synchronize()
        reps = 1  # calibrate: a sample of 200 us or more
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
            if len(samples) >= MIN_SAMPLES and elapsed >= MIN_SECONDS:
                s = sorted(samples)
                med = quantile(s, 0.5)
                spread = (quantile(s, 0.75) - quantile(s, 0.25)) / med
                if spread < TARGET_SPREAD or elapsed >= MAX_SECONDS:
                    return {"median_seconds": med, "min_seconds": s[0], "spread": spread, "samples": len(samples),
                            "reps_per_sample": reps, "converged": spread < TARGET_SPREAD, "copies": copies}


def copies_for(l2, working_set_bytes, cap_bytes):
    want = max(1, math.ceil(4 * l2 / max(working_set_bytes, 1)))
    return max(1, min(want, int(cap_bytes // max(working_set_bytes, 1))))


def time_linear(torch, l2, rec, stream):
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[rec.get("dtype", "bf16")]
    b, n, k = rec["batch"], rec["n"], rec["k"]
    wbytes = n * k * 2
    ncopies = copies_for(l2, wbytes, 20e9)
    ws = [torch.randn(n, k, device="cuda", dtype=dt) for _ in range(ncopies)]
    x = torch.randn(b, k, device="cuda", dtype=dt)
    y = torch.empty(b, n, device="cuda", dtype=dt)
    st = measure(torch, lambda i: torch.matmul(x, ws[i].t(), out=y), ncopies, stream)
    del ws
    return st


def time_attention(torch, l2, rec, stream):
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[rec.get("dtype", "bf16")]
    b, hq, hkv, d, s = rec["batch"], rec["q_heads"], rec["kv_heads"], rec["head_dim"], rec["context"]
    kvbytes = 2 * b * hkv * s * d * 2
    ncopies = copies_for(l2, kvbytes, 40e9)
    q = torch.randn(b, hq, 1, d, device="cuda", dtype=dt)
    ks = [torch.randn(b, hkv, s, d, device="cuda", dtype=dt) for _ in range(ncopies)]
    vs = [torch.randn(b, hkv, s, d, device="cuda", dtype=dt) for _ in range(ncopies)]
    f = torch.nn.functional.scaled_dot_product_attention
    st = measure(torch, lambda i: f(q, ks[i], vs[i], enable_gqa=(hq != hkv)), ncopies, stream)
    del ks, vs
    return st


def shape_text(rec):
    if rec.get("kind") == "attention":
        return f"B={rec['batch']} Hq={rec['q_heads']} Hkv={rec['kv_heads']} D={rec['head_dim']} S={rec['context']}"
    return f"B={rec['batch']} N={rec['n']} K={rec['k']}"


def peers(ours_path, out_path):
    import torch

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    recs = [r for r in read_jsonl(ours_path)
            if r.get("kind") in ("linear", "attention") and r.get("status") == "ok" and not r.get("emulated")]
    out = open(out_path, "a") if out_path else None
    stream = torch.cuda.Stream()
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, L2 {l2/1e6:.1f} MB; {len(recs)} shapes", flush=True)
    print(f"{'kernel':<16}{'shape':<38}{'ours us':>10}{'torch us':>10}{'ratio':>8}  (torch time / ours; >1 = we are faster)", flush=True)
    for rec in recs:
        try:
            st = time_attention(torch, l2, rec, stream) if rec["kind"] == "attention" else time_linear(torch, l2, rec, stream)
        except torch.cuda.OutOfMemoryError:
            print(f"{rec.get('kernel', '?'):<16}{shape_text(rec):<38} out of memory for the peer; skipped", flush=True)
            torch.cuda.empty_cache()
            continue
        except Exception as e:  # an unsupported shape for the peer: say so, go on
            print(f"{rec.get('kernel', '?'):<16}{shape_text(rec):<38} peer failed: {e}", flush=True)
            torch.cuda.empty_cache()
            continue
        ours = rec["median_seconds"]
        ratio = st["median_seconds"] / ours
        print(f"{rec.get('kernel', '?'):<16}{shape_text(rec):<38}{ours*1e6:>10.1f}{st['median_seconds']*1e6:>10.1f}{ratio:>8.2f}", flush=True)
        if out:
            keys = ("kind", "kernel", "model", "batch", "n", "k", "q_heads", "kv_heads", "head_dim", "context", "dtype", "bytes")
            row = {k: rec.get(k) for k in keys if k in rec}
            row.update({"peer": "torch", "torch_version": torch.__version__, **st, "decodebench_median_seconds": ours,
                        "ratio_peer_over_ours": ratio, "peer_achieved_gbps": rec.get("bytes", 0) / st["median_seconds"] / 1e9})
            out.write(json.dumps(row) + "\n")
            out.flush()
    return 0


# ---- the targets table --------------------------------------------------------------------------

def summary(ours_path, peer_path):
    recs = read_jsonl(ours_path)
    peer = read_jsonl(peer_path) if peer_path and os.path.exists(peer_path) else []
    ok = [r for r in recs if r.get("status") == "ok"]
    emulated = any(r.get("emulated") for r in recs)
    rows = []  # (target, measured, goal, verdict)

    def verdict(value, goal, higher=True):
        if emulated:
            return "n/a (emulated)"
        if value is None:
            return "NO DATA"
        return "PASS" if (value >= goal if higher else value <= goal) else "MISS"

    def pct(x):
        return "-" if x is None else f"{100*x:.1f}%"

    failed = [r for r in recs if r.get("status") == "failed"]
    rows.append(("measurements ok / failed / skipped",
                 f"{len(ok)} / {len(failed)} / {sum(r.get('status') == 'skipped' for r in recs)}", "0 failed",
                 "NO DATA" if not recs else "PASS" if not failed else "MISS"))

    reads = [r for r in ok if r.get("kind") == "probe" and r.get("probe") == "read"]
    read = max(reads, key=lambda r: r["achieved_gbps"]) if reads else None
    frac = read.get("fraction_of_datasheet") if read else None
    rows.append(("read probe / datasheet bandwidth",
                 f"{read['achieved_gbps']:.0f} / {read.get('datasheet_gbps', 0):.0f} GB/s = {pct(frac)}" if read else "-",
                 ">= 90%", verdict(frac, 0.90)))
    for name in ("write", "copy", "triad"):
        p = [r for r in ok if r.get("probe") == name]
        if p:
            rows.append((f"{name} probe / datasheet", f"{p[0]['achieved_gbps']:.0f} GB/s = {pct(p[0].get('fraction_of_datasheet'))}",
                         "(info)", ""))
    for name in ("fma", "mma"):
        p = [r for r in ok if r.get("probe") == name]
        if p:
            rows.append((f"{name} probe / datasheet", f"{p[0]['achieved_tflops']:.1f} TFLOP/s = {pct(p[0].get('fraction_of_datasheet'))}",
                         "(info)", ""))

    lin = [r for r in ok if r.get("kind") == "linear"]
    big1 = [r for r in lin if r["batch"] == 1 and r["n"] * r["k"] * 2 >= 64e6 and r.get("fraction_of_read_ceiling")]
    if big1:
        worst = min(big1, key=lambda r: r["fraction_of_read_ceiling"])
        rows.append(("batch-1 GEMV / read ceiling, W >= 64 MB",
                     f"min {pct(worst['fraction_of_read_ceiling'])} ({worst.get('model', '')} {worst['kernel']}), "
                     f"mean {pct(sum(r['fraction_of_read_ceiling'] for r in big1) / len(big1))} of {len(big1)}",
                     ">= 92%", verdict(worst["fraction_of_read_ceiling"], 0.92)))
    else:
        rows.append(("batch-1 GEMV / read ceiling, W >= 64 MB", "-", ">= 92%", verdict(None, 0.92)))

    # ours / cuBLAS as speed (the peer's time over ours), per batch: the targets differ where
    # cuBLAS's tiles start to pay (batch 1 >= 1.10, 64 >= 1.0, 256 >= 0.9).
    for batch, goal in ((1, 1.10), (64, 1.00), (256, 0.90)):
        plin = [p for p in peer if p.get("kind") == "linear" and p.get("batch") == batch]
        label = f"cuBLAS time / ours, linear, batch {batch}"
        if plin:
            worst = min(plin, key=lambda p: p["ratio_peer_over_ours"])
            rows.append((label, f"min {worst['ratio_peer_over_ours']:.2f} ({worst['kernel']} N={worst['n']} K={worst['k']}) of {len(plin)}",
                         f">= {goal:.2f}", verdict(worst["ratio_peer_over_ours"], goal)))
        else:
            rows.append((label, "- (no peer results)", f">= {goal:.2f}", verdict(None, goal)))

    ratios = []
    for r in lin:
        if r["batch"] == 16:
            one = [o for o in lin if o["batch"] == 1 and o["n"] == r["n"] and o["k"] == r["k"] and o.get("model") == r.get("model")]
            if one:
                ratios.append((r["median_seconds"] / one[0]["median_seconds"], r))
    if ratios:
        worst, r = max(ratios, key=lambda x: x[0])
        rows.append(("linear time batch 16 / batch 1", f"max {worst:.2f} ({r.get('model', '')} {r['kernel']}) of {len(ratios)}",
                     "<= 1.10", verdict(worst, 1.10, higher=False)))
    else:
        rows.append(("linear time batch 16 / batch 1", "-", "<= 1.10", verdict(None, 1.10, higher=False)))

    att = [r for r in ok if r.get("kind") == "attention" and r.get("fraction_of_read_ceiling")]
    big = [r for r in att if r.get("kv_bytes", 0) >= 256e6]
    if big:
        worst = min(big, key=lambda r: r["fraction_of_read_ceiling"])
        rows.append(("attention / read ceiling, KV >= 256 MB",
                     f"min {pct(worst['fraction_of_read_ceiling'])} (B={worst['batch']} Hq={worst['q_heads']} S={worst['context']}) of {len(big)}",
                     ">= 90%", verdict(worst["fraction_of_read_ceiling"], 0.90)))
    else:
        rows.append(("attention / read ceiling, KV >= 256 MB", "-", ">= 90%", verdict(None, 0.90)))
    b1 = [r for r in att if r["batch"] == 1 and r["context"] == 8192]
    if b1:
        worst = min(b1, key=lambda r: r["fraction_of_read_ceiling"])
        rows.append(("attention / read ceiling, batch 1, 8k", f"min {pct(worst['fraction_of_read_ceiling'])} of {len(b1)} layouts",
                     ">= 70%", verdict(worst["fraction_of_read_ceiling"], 0.70)))
    else:
        rows.append(("attention / read ceiling, batch 1, 8k", "-", ">= 70%", verdict(None, 0.70)))
    mha = [r for r in att if r["q_heads"] == r["kv_heads"]]
    pairs = [(g, m) for m in mha for g in att if g["q_heads"] != g["kv_heads"] and g["kv_bytes"] == m["kv_bytes"]
             and g["head_dim"] == m["head_dim"]]
    if pairs:
        worst = min(g["fraction_of_read_ceiling"] / m["fraction_of_read_ceiling"] for g, m in pairs)
        rows.append(("attention GQA / MHA efficiency, same KV bytes", f"min {worst:.2f} of {len(pairs)} pairs", ">= 0.95",
                     verdict(worst, 0.95)))
    patt = [p for p in peer if p.get("kind") == "attention"]
    if patt:
        worst = min(patt, key=lambda p: p["ratio_peer_over_ours"])
        rows.append(("torch SDPA time / ours, attention",
                     f"min {worst['ratio_peer_over_ours']:.2f} (B={worst['batch']} Hq={worst['q_heads']} S={worst['context']}) of {len(patt)}",
                     ">= 1.00", verdict(worst["ratio_peer_over_ours"], 1.0)))
    else:
        rows.append(("torch SDPA time / ours, attention", "- (no peer results)", ">= 1.00", verdict(None, 1.0)))

    if emulated:
        print("*** EMULATED results: the CPU emulator's times are NOT performance; verdicts do not apply ***")
    w0, w1 = max(len(r[0]) for r in rows), max(len(r[1]) for r in rows)
    print(f"{'TARGET':<{w0}}  {'MEASURED':<{w1}}  {'GOAL':<9} VERDICT")
    for target, measured, goal, v in rows:
        print(f"{target:<{w0}}  {measured:<{w1}}  {goal:<9} {v}")
    return 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "--summary":
        if len(argv) < 3:
            print(__doc__)
            return 2
        return summary(argv[2], argv[3] if len(argv) > 3 else None)
    if len(argv) < 2:
        print(__doc__)
        return 2
    return peers(argv[1], argv[2] if len(argv) > 2 else None)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
