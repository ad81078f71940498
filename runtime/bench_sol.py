"""Sol-Attn against dense cuDNN attention in one loop, on one GPU (issue 11's "Sol >= 2.5x cuDNN dense"). Writes JSON.

    python -m runtime.bench_sol --out bench_sol.json          # ~1 min on an H200

At the sol_attn op group's bucket (default ``ltx_video``: the LTX-2 refiner's video self-attention, 16,128 rows, 32
heads, one document), on the op group's own inputs (structured q/k/v, ``rsi.refs.sol_attn.make_inputs``), one
interleaved loop (rsi.harness.timing: shuffled order per repetition, L2 flushed before every call) times:

* ``cudnn`` and ``cudnn_aa``: dense SDPA forced to the cuDNN backend, twice (the second is the A/A control: the
  band within which two identical implementations differ);
* per tau of ``--taus`` (default the report's schedule 1.0, 1.25, 1.5): ``sol@tau``, the runtime's Sol-Attn call (the
  verified ``sol_attn`` kernel where the lock has one, else the FlexAttention fallback), the block selection included;
* ``sol_flex@tau``: the FlexAttention incumbent (``rsi.refs.attention_baselines.sol_flex``), for reference.

Per Sol row: median time, the paired ratio cuDNN / Sol with its bootstrap 95% CI (``rsi.search.stats``), the density
(fraction of kept key blocks) and the output's error against cuDNN's dense output on the same inputs (rel-L2,
max-abs, cosine). Sol is lossy: its rows say so.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import torch

from runtime.attention import TAUS, parse_taus
from runtime.bench_fp8 import error, header


def log(msg: str) -> None:
    print(f"[bench_sol {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def cudnn_documents(q, k, v, cu):
    """Dense attention per document through SDPA with only the cuDNN backend allowed (fails if it cannot run)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from runtime.attention import sdpa_documents

    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        return sdpa_documents(q, k, v, cu)


def bench(bucket: str, taus: tuple[float, ...], kernels, reps: int, dev: torch.device,
          dense_fn=cudnn_documents) -> dict[str, Any]:
    from rsi.harness import timing as T
    from rsi.refs import get_op_group
    from rsi.refs import sol_attn as ref
    from rsi.refs.attention_baselines import sol_flex
    from rsi.search.stats import aa_band, paired_ratio_ci
    from runtime.attention import sol_flex_or_reference

    op = get_op_group("sol_attn")
    known = (*op.shapes, *op.odd_shapes, *op.interp_shapes)
    shape = next((s for s in known if s.name == bucket), None)
    if shape is None:
        raise SystemExit(f"unknown sol_attn shape {bucket!r}; known: {', '.join(s.name for s in known)}")
    sets = [op.make_inputs(shape, 1000 + i, dev)[:4] for i in range(2)]
    sink = ref.schedule(shape)[1]
    impls = {"cudnn": dense_fn, "cudnn_aa": dense_fn}
    for tau in taus:
        impls[f"sol@{tau:g}"] = lambda q, k, v, cu, t=tau: kernels.call_or(
            "sol_attn", sol_flex_or_reference, q, k, v, cu, t, sink)
        impls[f"sol_flex@{tau:g}"] = lambda q, k, v, cu, t=tau: sol_flex(q, k, v, cu, t, sink)
    with torch.no_grad():
        samples = T.time_interleaved(impls, sets, warmup=3, reps=reps, sync_reps=0, device=dev)
        dense = dense_fn(*sets[0])
        base = samples["cudnn"].times_us
        aa = paired_ratio_ci(base, samples["cudnn_aa"].times_us)
        rows = []
        for name, fn in impls.items():
            s = samples[name].summary()
            row: dict[str, Any] = {"impl": name, **s}
            if name != "cudnn":
                med, lo, hi = paired_ratio_ci(base, samples[name].times_us)
                row["speedup_vs_cudnn"] = {"median": med, "ci95": [lo, hi]}
            if name.startswith("sol"):
                tau = float(name.split("@")[1])
                out, mask = fn(*sets[0])
                row.update(tau=tau, lossy=True, density=ref.mask_density(mask, sets[0][3]),
                           error_vs_cudnn=error(out, dense.float()))
                if not name.startswith("sol_flex"):
                    row["kernel"] = kernels.chosen("sol_attn", *sets[0], tau, sink)
            rows.append(row)
            sp = row.get("speedup_vs_cudnn", {})
            log(f"{name}: {s['p50_us'] / 1e3:.3f} ms" + (f", {sp['median']:.3f}x cuDNN [{sp['ci95'][0]:.3f}, "
                                                         f"{sp['ci95'][1]:.3f}]" if sp else "")
                + (f", density {row['density']:.3f}, rel-L2 vs cuDNN {row['error_vs_cudnn']['rel_l2']:.4f}"
                   if "density" in row else ""))
    return {"bucket": bucket, "dims": dict(shape.dims), "sink_rows": sink, "aa_ci95": list(aa),
            "aa_band": aa_band(aa[1:]), "rows": rows}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m runtime.bench_sol", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="bench_sol.json", help="JSON results (default bench_sol.json)")
    p.add_argument("--bucket", default="ltx_video", help="sol_attn bucket (default ltx_video, the refiner's)")
    p.add_argument("--taus", type=parse_taus, default=TAUS, help="comma-separated taus (default 1.0,1.25,1.5)")
    p.add_argument("--reps", type=int, default=20, help="timed repetitions per implementation (default 20)")
    p.add_argument("--root", default=".", help="workspace root holding verified_kernels/ (default .)")
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_sol needs a CUDA GPU (cuDNN attention)", file=sys.stderr)
        return 2
    from runtime.kernels import Kernels

    kernels = Kernels("verified", root=a.root)
    res = header("runtime.bench_sol", a, argv)
    res.update(bench(a.bucket, tuple(a.taus), kernels, a.reps, torch.device("cuda")))
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=2, default=str)
    log(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
