"""The Ulysses exchanges of one H3 block on N processes, per wire format, timed end to end (pack and encode, the
all-to-all, decode) with each wire's error against the bf16 wire and its projected time at slower links.

    torchrun --standalone --nproc-per-node 2 -m runtime.bench_a2a --out a2a.json      # 2 GPUs (NCCL)
    torchrun --standalone --nproc-per-node 2 -m runtime.bench_a2a --device cpu --rows 512 --heads 4   # gloo smoke

Per rank: q, k, v [S/N, heads, 128] bf16 (the QKV leg: qkv_pack -> encode -> all_to_all_single -> decode) and the
attention output [N, S/N, heads/N, 128] (the output leg: encode -> all_to_all_single -> decode). The wires take
turns inside each repetition (rotating order), CUDA events around each leg after a barrier; the median over
repetitions is reported, with rank 0's figures (every rank moves the same bytes). Errors: rel-L2 and max-abs of the
decoded tensors against the bf16 wire's (exact) ones. Projection (labelled so): bytes each rank sends / link
bandwidth, for each ``--link-gbps``. Verdict per lossy wire, with the judge's statistics (rsi.search.stats): the
bf16 wire is timed twice per repetition (its A/A band) and a wire is "faster beyond noise" only when the 95% CI of
the paired ratio bf16 / wire (both legs) has its low end above 1 + band; it stays lossy either way. Written for the
2x H200 machine; not yet run there (the kind was withheld).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import torch
import torch.distributed as dist


def _legs(wire: str, q, k, v, o, sp, kernels):
    """(qkv leg, output leg): each returns the decoded tensor this rank receives."""
    from runtime import wire as WF

    d = q.shape[-1]

    def qkv():
        packed = kernels.call("qkv_pack", q, k, v, sp.world)
        if wire == "int8":
            rec = WF.encode_qkv(packed[..., :d], packed[..., d:2 * d], packed[..., 2 * d:])
            return WF.decode_qkv(sp._exchange(rec), q.dtype)
        return sp._exchange(packed)

    def out():
        if wire == "int8":
            return WF.decode_out(sp._exchange(WF.encode_out(o)), o.dtype)
        if wire == "fp8":
            return WF.decode_fp8_out(sp._exchange(WF.encode_fp8_out(o)), o.dtype)
        return sp._exchange(o)
    return qkv, out


def _time(fn, dev: torch.device) -> float:
    dist.barrier()
    if dev.type == "cuda":
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        return a.elapsed_time(b) / 1e3
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _err(x: torch.Tensor, ref: torch.Tensor) -> dict[str, float]:
    d = x.float() - ref.float()
    return {"rel_l2": (d.norm() / ref.float().norm()).item(), "max_abs": d.abs().max().item()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m runtime.bench_a2a", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, nargs="+", default=[38272, 10304], help="packed rows S (default 38272 10304)")
    p.add_argument("--heads", type=int, default=56, help="attention heads (default 56)")
    p.add_argument("--reps", type=int, default=20, help="repetitions (default 20, after 3 warm-ups)")
    p.add_argument("--link-gbps", type=float, nargs="+", default=[50.0, 25.0],
                   help="link bandwidths to project each wire's time at, GB/s per GPU (default 50 25)")
    p.add_argument("--device", default="cuda", help="cuda (NCCL, default) or cpu (gloo)")
    p.add_argument("--out", default="a2a.json", help="JSON results (rank 0; default a2a.json)")
    a = p.parse_args(argv)
    from runtime import wire as WF
    from runtime.kernels import Kernels
    from runtime.ulysses import init_from_env

    sp = init_from_env(a.device)
    if sp is None:
        print("bench_a2a runs under torchrun with 2 or more processes", file=sys.stderr)
        return 2
    dev = torch.device("cuda", torch.cuda.current_device()) if a.device == "cuda" else torch.device("cpu")
    kernels = Kernels("verified")
    res: dict[str, Any] = {"world": sp.world, "device": str(dev), "args": vars(a), "rows": []}
    if sp.rank == 0:
        from rsi.env import capture

        res["env"] = capture()
    for S in a.rows:
        s, h = S // sp.world, a.heads // sp.world
        g = torch.Generator(device=dev).manual_seed(1000 + sp.rank)
        q, k, v = (torch.randn(s, a.heads, 128, generator=g, device=dev).to(torch.bfloat16) for _ in range(3))
        o = torch.randn(sp.world, s, h, 128, generator=g, device=dev).to(torch.bfloat16)
        legs = {w: _legs(w, q, k, v, o, sp, kernels) for w in WF.WIRES}
        legs["bf16_aa"] = legs["bf16"]                      # the bf16 wire again: the A/A band
        ref = {"qkv": legs["bf16"][0](), "out": legs["bf16"][1]()}
        names = (*WF.WIRES, "bf16_aa")
        times: dict[str, dict[str, list[float]]] = {w: {"qkv": [], "out": []} for w in names}
        for r in range(3 + a.reps):
            order = names[r % len(names):] + names[:r % len(names)]
            for w in order:
                for i, leg in enumerate(("qkv", "out")):
                    t = _time(legs[w][i], dev)
                    if r >= 3:
                        times[w][leg].append(t)
        from rsi.search.stats import aa_band, paired_ratio_ci

        block = {w: [x + y for x, y in zip(times[w]["qkv"], times[w]["out"])] for w in names}
        band = aa_band(paired_ratio_ci(block["bf16"], block["bf16_aa"])[1:])
        for w in WF.WIRES:
            nbytes = WF.exchange_bytes(w, s, a.heads, sp.world)
            med = {leg: sorted(ts)[len(ts) // 2] for leg, ts in times[w].items()}
            row = {"rows": S, "wire": w, "lossy": w != "bf16", "bytes_per_rank": nbytes,
                   "median_s": med, "block_s": med["qkv"] + med["out"],
                   "error_vs_bf16": {"qkv": _err(legs[w][0](), ref["qkv"]), "out": _err(legs[w][1](), ref["out"])},
                   "projected_s": {f"{gb:g} GB/s": WF.projected_seconds(nbytes["qkv"] + nbytes["out"], gb)
                                   for gb in a.link_gbps}}
            if w != "bf16":
                ratio, lo, hi = paired_ratio_ci(block["bf16"], block[w])
                row["vs_bf16"] = {"speedup": ratio, "ci95": [lo, hi], "aa_band": band,
                                  "verdict": ("faster than bf16 beyond noise" if lo > 1 + band
                                              else "not faster than bf16 beyond noise") + " (lossy)"}
            res["rows"].append(row)
            if sp.rank == 0:
                print(f"S={S} {w}: qkv {med['qkv'] * 1e3:.3f} ms, out {med['out'] * 1e3:.3f} ms; projected "
                      + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in row["projected_s"].items())
                      + (" (PROJECTION)" if a.link_gbps else "")
                      + (f"; {row['vs_bf16']['speedup']:.3f}x bf16, {row['vs_bf16']['verdict']}" if "vs_bf16" in row
                         else ""), flush=True)
    if sp.rank == 0:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=2, default=str)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
