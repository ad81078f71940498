"""The runtime's FP8 path against its bf16 path, op by op, on one GPU (issue 12's side-by-side figures). Writes JSON.

    python -m runtime.bench_fp8 --out bench_fp8.json          # ~1 min on an H200

1. The four H3 linears of one block (qkv 5376->21504, out 7168->5376, fc1 5376->28672, fc2 14336->5376) at
   ``--rows`` (default 38,248, the 1344x768 request): the bf16 ``torch.nn.functional.linear`` against the runtime's
   ``Fp8Linear`` call (the per-row activation quantiser included: the verified ``fp8_linear`` kernel where the lock
   has one, else ``torch._scaled_mm`` after the eager quantiser, what ``--precision fp8`` runs), timed side by side
   in one interleaved loop (rsi.harness.timing: shuffled order per repetition, L2 flushed before every call, fresh
   inputs made outside the timed region). The weights are random (N(0, 1/K)); the fp8 weight is quantised once
   outside the loop, as at load. Error of both against the fp32 product of the same bf16 x and W (TF32 off):
   rel-L2, max-abs, cosine. Lossy: the fp8 rows are labelled so.
2. The fused producers against the bf16 op each replaces (modulate -> modulate_fp8, gate_residual_modulate ->
   gate_residual_modulate_fp8, swiglu -> swiglu_fp8, head_merge -> head_merge_fp8) at the op groups' production
   shapes: the bf16 op's verified kernel (else its reference) and the producer's verified kernel (else its
   reference: the unfused chain plus the quantiser), with the ratio producer / bf16 op (issue 12 asks <= 1.05); and
   the path the runtime takes without the producer, the bf16 op's kernel then the runtime's compiled quantiser
   (``quantize_rows_compiled(None)``, what ``Fp8Linear`` does to a bf16 activation; of an op with two outputs, its
   last, the activation): whether a producer beats that path (nothing reads the ratio automatically; the decision
   to keep swiglu_fp8 in the lock was made from it by hand, run 33).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import torch
import torch.nn.functional as F

LINEARS = (("qkv", 5376, 21504), ("out", 7168, 5376), ("fc1", 5376, 28672), ("fc2", 14336, 5376))
PRODUCERS = (("modulate", "modulate_fp8"), ("gate_residual_modulate", "gate_residual_modulate_fp8"),
             ("swiglu", "swiglu_fp8"), ("head_merge", "head_merge_fp8"))


def log(msg: str) -> None:
    print(f"[bench_fp8 {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def header(module: str, args, argv: list[str] | None) -> dict[str, Any]:
    """What every runtime bench's JSON starts with: environment, lock hash, arguments, timing method and the exact
    command line (``python -m <module> ...``)."""
    from rsi.env import capture
    from rsi.harness.timing import METHOD
    from runtime.kernels import lock_sha256

    return {"env": capture(), "lock_sha256": lock_sha256(args.root), "args": vars(args), "method": METHOD,
            "command": " ".join([f"python -m {module}", *(argv if argv is not None else sys.argv[1:])])}


def error(y: torch.Tensor, exact: torch.Tensor) -> dict[str, float]:
    d = y.float() - exact
    return {"rel_l2": (d.norm() / exact.norm()).item(), "max_abs": d.abs().max().item(),
            "cosine": F.cosine_similarity(y.float().flatten(), exact.flatten(), dim=0).item()}


def _stats(samples) -> dict[str, float]:
    return samples.summary()


def bench_linears(rows: int, kernels, reps: int, dev: torch.device, seed: int) -> list[dict[str, Any]]:
    from rsi.harness import timing as T
    from runtime.precision import Fp8Linear

    out = []
    g = torch.Generator(device=dev).manual_seed(seed)
    for name, k, n in LINEARS:
        lin = torch.nn.Linear(k, n, bias=False, device=dev, dtype=torch.bfloat16)
        with torch.no_grad():
            lin.weight.copy_((torch.randn(n, k, generator=g, device=dev) / k ** 0.5).to(torch.bfloat16))
        f8 = Fp8Linear(lin, kernels)
        sets = [(torch.randn(rows, k, generator=g, device=dev).to(torch.bfloat16),) for _ in range(2)]
        with torch.no_grad():
            samples = T.time_interleaved({"bf16": lambda x, w=lin.weight: F.linear(x, w), "fp8": f8}, sets,
                                         warmup=3, reps=reps, sync_reps=0, device=dev, seed=seed)
            tf32 = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = False
            exact = sets[0][0].float() @ lin.weight.float().t()
            torch.backends.cuda.matmul.allow_tf32 = tf32
            e_bf16, e_fp8 = error(F.linear(sets[0][0], lin.weight), exact), error(f8(sets[0][0]), exact)
        b, f = _stats(samples["bf16"]), _stats(samples["fp8"])
        flops = 2 * rows * k * n
        row = {"layer": name, "rows": rows, "in": k, "out": n, "flops": flops,
               "bf16": {**b, "tflops": flops / (b["p50_us"] * 1e-6) / 1e12, "error": e_bf16},
               "fp8": {**f, "tflops": flops / (f["p50_us"] * 1e-6) / 1e12, "error": e_fp8, "lossy": True},
               "speedup_fp8_over_bf16": b["p50_us"] / f["p50_us"],
               "fp8_impl": kernels.chosen("fp8_linear", sets[0][0], f8.w8, f8.w_scale)}
        out.append(row)
        log(f"{name} {rows}x{k}->{n}: bf16 {b['p50_us'] / 1e3:.3f} ms, fp8 {f['p50_us'] / 1e3:.3f} ms "
            f"({row['speedup_fp8_over_bf16']:.3f}x; fp8 rel-L2 {e_fp8['rel_l2']:.4f}, bf16 {e_bf16['rel_l2']:.2e})")
        del lin, f8, sets, exact
        torch.cuda.empty_cache()
    return out


def then_quantize(out, quantize):
    """The bf16 op's output with its activation (the last output, of gate_residual_modulate's (r, h)) quantised."""
    return (*out[:-1], *quantize(out[-1])) if isinstance(out, tuple) else quantize(out)


def bench_producers(kernels, reps: int, dev: torch.device, shapes_of=lambda op: op.shapes) -> list[dict[str, Any]]:
    from rsi.harness import timing as T
    from rsi.refs import get_op_group
    from rsi.refs.fp8_common import quantize_rows_compiled

    quantize = quantize_rows_compiled(None)
    out = []
    for bf16_op, fp8_op in PRODUCERS:
        base, prod = get_op_group(bf16_op), get_op_group(fp8_op)
        for shape in shapes_of(prod):
            sets = [prod.make_inputs(shape, 1000 + i, dev) for i in range(2)]
            unfused = f"{bf16_op}+quantize"
            impls = {bf16_op: lambda *a, _o=bf16_op, _r=base.reference: kernels.call_or(_o, _r, *a),
                     fp8_op: lambda *a, _o=fp8_op, _r=prod.reference: kernels.call_or(_o, _r, *a),
                     unfused: lambda *a, _o=bf16_op, _r=base.reference: then_quantize(kernels.call_or(_o, _r, *a),
                                                                                      quantize)}
            s = T.time_interleaved(impls, sets, warmup=3, reps=reps, sync_reps=0, device=dev)
            b, f, u = _stats(s[bf16_op]), _stats(s[fp8_op]), _stats(s[unfused])
            row = {"pair": f"{bf16_op} -> {fp8_op}", "bucket": shape.name, "dims": dict(shape.dims),
                   bf16_op: {**b, "impl": kernels.chosen(bf16_op, *sets[0])},
                   fp8_op: {**f, "impl": kernels.chosen(fp8_op, *sets[0])},
                   unfused: {**u, "impl": f"{kernels.chosen(bf16_op, *sets[0])} + quantize_rows_compiled(None)"},
                   "ratio_fp8_over_bf16": f["p50_us"] / b["p50_us"],
                   "ratio_fp8_over_unfused": f["p50_us"] / u["p50_us"]}
            out.append(row)
            log(f"{fp8_op} {shape.name}: {f['p50_us']:.1f} us ({row[fp8_op]['impl']}) vs {bf16_op} "
                f"{b['p50_us']:.1f} us ({row[bf16_op]['impl']}): x{row['ratio_fp8_over_bf16']:.3f}; vs {unfused} "
                f"{u['p50_us']:.1f} us: x{row['ratio_fp8_over_unfused']:.3f}")
            del sets
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m runtime.bench_fp8", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="bench_fp8.json", help="JSON results (default bench_fp8.json)")
    p.add_argument("--rows", type=int, nargs="+", default=[38248], help="activation rows (default 38248)")
    p.add_argument("--reps", type=int, default=20, help="timed repetitions per implementation (default 20)")
    p.add_argument("--root", default=".", help="workspace root holding verified_kernels/ (default .)")
    p.add_argument("--seed", type=int, default=0, help="seed of weights and inputs (default 0)")
    p.add_argument("--skip-producers", action="store_true", help="time only the linears")
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_fp8 needs a CUDA GPU with e4m3 support (sm_89 or newer)", file=sys.stderr)
        return 2
    from runtime.kernels import Kernels

    dev = torch.device("cuda")
    kernels = Kernels("verified", root=a.root)
    res = header("runtime.bench_fp8", a, argv)
    res["linears"] = [r for rows in a.rows for r in bench_linears(rows, kernels, a.reps, dev, a.seed)]
    for rows in a.rows:
        sel = [r for r in res["linears"] if r["rows"] == rows]
        b, f = sum(r["bf16"]["p50_us"] for r in sel), sum(r["fp8"]["p50_us"] for r in sel)
        res.setdefault("four_linears", []).append({"rows": rows, "bf16_ms": b / 1e3, "fp8_ms": f / 1e3,
                                                   "speedup": b / f, "lossy": True})
        log(f"four linears at {rows} rows: bf16 {b / 1e3:.2f} ms, fp8 {f / 1e3:.2f} ms ({b / f:.3f}x)")
    if not a.skip_producers:
        res["producers"] = bench_producers(kernels, a.reps, dev)
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=2, default=str)
    log(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
