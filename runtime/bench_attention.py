"""Dense and FP8 attention side by side in one loop, on one GPU (issue 11's "FP8 attention >= 1.6x cuDNN dense").

    python -m runtime.bench_attention --out bench_attention.json          # ~2 min on an H200 at h3_full

At an ``attention_fp8`` bucket (default ``h3_full``: H3's 38,272 packed rows, 56 heads, two documents: the video
and text rows, then the pad), on that op group's inputs (``rsi.refs.attention_fp8.make_inputs``: random normal q, k,
v with per-head magnitudes 2^16 apart; layout 0, v a column view of the fused qkv output), one interleaved loop
(rsi.harness.timing: shuffled order per repetition, L2 flushed before every call, CUDA events) times:

* ``sdpa_cudnn`` and ``sdpa_cudnn_aa``: dense bf16 SDPA per document with only the cuDNN backend (the second is the
  A/A control), ``sdpa_flash``: the flash backend, ``fa4``: FlashAttention-4's varlen kernel where the flash-attn-4
  package is installed (else left out, with the reason in ``left_out``) (rsi/refs/attention_baselines.py);
* ``attention``: what the runtime runs for dense attention (its verified kernel where locked, else FA4 where
  installed, else SDPA);
* ``cudnn_fp8``: cuDNN's FP8 attention with per-head scales (runtime/attention_fp8_cudnn.py), quantisation
  included; ``attention_fp8``: what ``--attention fp8`` runs (verified kernel, else cudnn_fp8, else the reference).

Per row: median time, TFLOP/s (4 n^2 H D per document), the paired ratio sdpa_cudnn / row with its bootstrap 95% CI
(``rsi.search.stats``), and the error of its output on the first input set against the exact op (dense attention
in fp64 on the bf16 inputs, ``rsi.refs.attention.oracle``): rel-L2, max-abs, cosine. FP8 rows are lossy and say so;
they also give their error against ``attention_fp8``'s reference (fp32 math on the per-head e4m3 values).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from typing import Any

import torch

from runtime.bench_fp8 import error, header


def log(msg: str) -> None:
    print(f"[bench_attention {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _flop(cu: torch.Tensor, H: int, D: int) -> int:
    return sum(4 * (b - a) ** 2 * H * D for a, b in itertools.pairwise(int(x) for x in cu.tolist()))


def bench(bucket: str, kernels, reps: int, dev: torch.device) -> dict[str, Any]:
    from rsi.harness import timing as T
    from rsi.refs import attention as A
    from rsi.refs import attention_fp8 as ref
    from rsi.refs.attention_baselines import BASELINES, cudnn_fp8
    from rsi.search.stats import aa_band, paired_ratio_ci
    from runtime.attention import INCUMBENT_OF, fa4_available, fa4_documents, fp8_fallback, sdpa_documents

    op = ref.OP_GROUP
    known = (*op.shapes, *op.odd_shapes, *op.interp_shapes)
    shape = next((s for s in known if s.name == bucket), None)
    if shape is None:
        raise SystemExit(f"unknown attention_fp8 shape {bucket!r}; known: {', '.join(s.name for s in known)}")
    sets = [op.make_inputs(shape, 1000 + i, dev) for i in range(2)]
    base = {b.name: b for b in BASELINES}

    def served(op_name, fallback, *args):   # as the runtime's attention dispatches (runtime/attention.py)
        return kernels.call_or(op_name, fallback, *args, incumbent=INCUMBENT_OF.get(fallback))

    def library(name):
        return lambda q, k, v, cu: base[name].fn(*base[name].prepare(q, k, v, cu))

    impls = {"sdpa_cudnn": library("sdpa_cudnn"), "sdpa_cudnn_aa": library("sdpa_cudnn"),
             "sdpa_flash": library("sdpa_flash"), "fa4": library("fa4"),
             "attention": lambda q, k, v, cu: served(
                 "attention", fa4_documents if fa4_available(q) else sdpa_documents, q, k, v, cu, cu),
             "cudnn_fp8": lambda q, k, v, cu: cudnn_fp8(q, k, v, [int(x) for x in cu.tolist()]),
             "attention_fp8": lambda q, k, v, cu: served("attention_fp8", fp8_fallback(q), q, k, v, cu)}
    lossy = {"cudnn_fp8", "attention_fp8"}
    q, k, v, cu = sets[0]
    flop = _flop(cu, q.shape[1], q.shape[2])
    skipped = {}
    with torch.no_grad():
        for name, fn in list(impls.items()):   # graphs, compiles and kernel choices outside the loop
            try:
                fn(*sets[0])
            except Exception as e:             # a peer library missing here (fa4) is left out
                if name != "fa4":
                    raise
                skipped[name] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                del impls[name]
                log(f"{name} left out: {skipped[name]}")
        samples = T.time_interleaved(impls, sets, warmup=2, reps=reps, sync_reps=0, device=dev)
        log("timed; the exact op in fp64 next")
        exact = A.oracle(q, k, v, cu) if q.shape[2] == A.HEAD_DIM else ref.oracle(q, k, v, cu)
        fp8_ref = ref.reference(q, k, v, cu).float()
        first = samples["sdpa_cudnn"].times_us
        aa = paired_ratio_ci(first, samples["sdpa_cudnn_aa"].times_us)
        rows = []
        for name, fn in impls.items():
            s = samples[name].summary()
            out = fn(*sets[0])
            row: dict[str, Any] = {"impl": name, **s, "tflops": flop / (s["p50_us"] * 1e6), "lossy": name in lossy,
                                   "error_vs_exact": error(out, exact)}
            if name != "sdpa_cudnn":
                med, lo, hi = paired_ratio_ci(first, samples[name].times_us)
                row["speedup_vs_sdpa_cudnn"] = {"median": med, "ci95": [lo, hi]}
            if name in lossy:
                row["error_vs_fp8_reference"] = error(out, fp8_ref)
            if name in ("attention", "attention_fp8"):
                row["kernel"] = kernels.chosen(name, *sets[0], *sets[0][3:] if name == "attention" else ())
            if name == "cudnn_fp8" and dev.type == "cuda":
                from runtime import attention_fp8_cudnn

                row["cudnn_plans"] = attention_fp8_cudnn.plans()
            del out
            rows.append(row)
            sp, e = row.get("speedup_vs_sdpa_cudnn"), row["error_vs_exact"]
            log(f"{name}{' (lossy)' if row['lossy'] else ''}: {s['p50_us'] / 1e3:.3f} ms, {row['tflops']:.0f} "
                f"TFLOP/s" + (f", {sp['median']:.3f}x cuDNN [{sp['ci95'][0]:.3f}, {sp['ci95'][1]:.3f}]" if sp else "")
                + f", rel-L2 {e['rel_l2']:.2e} cosine {e['cosine']:.6f} vs exact")
    return {"bucket": bucket, "dims": dict(shape.dims), "left_out": skipped, "cu_seqlens": [int(x) for x in cu.tolist()], "flop": flop,
            "aa_ci95": list(aa), "aa_band": aa_band(aa[1:]), "rows": rows}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m runtime.bench_attention", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="bench_attention.json", help="JSON results (default bench_attention.json)")
    p.add_argument("--buckets", nargs="+", default=["h3_full"],
                   help="attention_fp8 buckets (default h3_full; also h3_stage1, ltx_video)")
    p.add_argument("--reps", type=int, default=10, help="timed repetitions per implementation (default 10)")
    p.add_argument("--root", default=".", help="workspace root holding verified_kernels/ (default .)")
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_attention needs a CUDA GPU (cuDNN attention)", file=sys.stderr)
        return 2
    from runtime.kernels import Kernels

    kernels = Kernels("verified", root=a.root)
    res = {**header("runtime.bench_attention", a, argv), "buckets": []}
    for bucket in a.buckets:
        log(f"bucket {bucket}")
        res["buckets"].append(bench(bucket, kernels, a.reps, torch.device("cuda")))
        with open(a.out, "w") as fh:          # after every bucket: a killed run keeps what it measured
            json.dump(res, fh, indent=2, default=str)
    log(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
