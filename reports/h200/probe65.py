"""H200 probe 65 (prepared in the fifteenth session; outside the judge, not a verdict): the first run of the CuTe
attention template (rsi/templates/attention_cute.py) on a GPU. Per schedule (its heuristic, then PINGPONG, OVERLAP
and both), shape and layout: rel-L2 and max-abs error against the op's reference and whether NaN/Inf appear where
the reference has none (a diagnosis for a failed verdict); then at the timed buckets the four schedules beside the
Triton template's heuristic and SDPA cuDNN (prepare outside the timed call, as the judge), one interleaved loop,
paired ratio CIs against cuDNN. --smoke: the heuristic at two small shapes only, exit status 1 on an error or a
non-finite output where the reference is finite (run first under a short timeout: a hang shows as a kill).
--diagnose (run only when the smoke test fails, added in the sixteenth session before the first run): one document,
one head, contiguous q, k, v, at rows 64..384 and three input kinds that separate the failing step: random, q = 0
(uniform weights: tests P V and the row sums without the maxima) and v constant (the output must be that constant:
tests the normalisation); per case the error, the number of wrong rows and the first wrong rows and columns.
Usage: python reports/h200/probe65.py OUT.json [REPS] [--smoke|--diagnose]"""
import json
import sys

import torch

from rsi.harness import timing as T
from rsi.refs import get_op_group
from rsi.search.stats import paired_ratio_ci
from rsi.spaces import load_space
from rsi.templates import attention as triton_tpl
from rsi.templates import attention_cute as cute_tpl

SPACE = load_space("attention")
CUTE = {"BM": 128, "BN": 128, "STAGES": 2, "PINGPONG": 0, "OVERLAP": 0}   # the heuristic when it ran (run 65)
SCHEDULES = {"cute": CUTE, "cute_pp": {**CUTE, "PINGPONG": 1}, "cute_ov": {**CUTE, "OVERLAP": 1},
             "cute_pp_ov": {**CUTE, "PINGPONG": 1, "OVERLAP": 1}}
TRITON = SPACE.heuristic()


def errors(op, name, shape, layout):
    inputs = op.make_inputs(shape, 11, "cuda", layout)
    ref = op.reference(*inputs).float()
    out = cute_tpl.launch(*inputs, **SCHEDULES[name]).float()
    torch.cuda.synchronize()
    fin = torch.isfinite(ref)
    d = (out - ref)[fin]
    return {"schedule": name, "shape": shape.name, "layout": layout, "rel_l2": (d.norm() / ref[fin].norm()).item(),
            "max_abs": d.abs().max().item() if d.numel() else 0.0,
            "nonfinite_where_ref_finite": int((~torch.isfinite(out) & fin).sum()),
            "nonfinite_ref": int((~fin).sum())}


def smoke(op, out_path):
    rows = []
    for shape in (s for s in op.interp_shapes if s.name in ("two_docs", "cross_docs")):
        row = errors(op, "cute", shape, 0)
        rows.append(row)
        print(row, flush=True)
    with open(out_path, "w") as f:
        json.dump({"note": __doc__, "smoke": rows}, f, indent=1, default=str)
    return 0 if all(r["nonfinite_where_ref_finite"] == 0 and r["rel_l2"] < 1e-2 for r in rows) else 1


def diagnose(op, out_path):
    rows = []
    for kind in ("random", "q_zero", "v_const"):
        for S in (128, 64, 200, 256, 384):
            for name in ("cute", "cute_pp"):
                g = torch.Generator(device="cuda").manual_seed(S)
                q, k, v = (torch.randn((S, 1, 128), generator=g, device="cuda").bfloat16() for _ in range(3))
                if kind == "q_zero":
                    q.zero_()
                if kind == "v_const":
                    v.fill_(0.5)
                cu = torch.tensor([0, S], dtype=torch.int32, device="cuda")
                row = {"kind": kind, "rows": S, "schedule": name}
                try:
                    ref = op.reference(q, k, v, cu, cu).float()
                    out = cute_tpl.launch(q, k, v, cu, cu, **SCHEDULES[name]).float()
                    torch.cuda.synchronize()
                    bad = ~torch.isclose(out, ref, rtol=2e-2, atol=2e-2)
                    bad_rows = bad.any(dim=2).any(dim=1).nonzero().flatten()
                    bad_cols = bad.any(dim=0).any(dim=0).nonzero().flatten()
                    row.update(rel_l2=((out - ref).norm() / ref.norm()).item(), n_bad_rows=len(bad_rows),
                               first_bad_rows=bad_rows[:12].tolist(), first_bad_cols=bad_cols[:12].tolist(),
                               nonfinite=int((~torch.isfinite(out)).sum()), out_00=out[0, 0, :4].tolist(),
                               ref_00=ref[0, 0, :4].tolist())
                except Exception as e:   # noqa: BLE001 - a probe: record the failure and go on
                    row["error"] = f"{type(e).__name__}: {e}"[:400]
                rows.append(row)
                print(row, flush=True)
                with open(out_path, "w") as f:
                    json.dump({"note": __doc__, "diagnose": rows}, f, indent=1, default=str)


def main():
    out_path = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    op = get_op_group("attention")
    if "--smoke" in sys.argv:
        sys.exit(smoke(op, out_path))
    if "--diagnose" in sys.argv:
        return diagnose(op, out_path)
    res = {"note": __doc__, "torch": torch.__version__, "device": torch.cuda.get_device_name(), "cute": CUTE,
           "triton": TRITON, "errors": [], "timing": []}
    odd = [s for s in op.odd_shapes if s.name in ("cross_docs", "odd_text")]
    for name in SCHEDULES:
        for shape in [*op.interp_shapes, *odd]:
            for layout in (0, 1, 2) if name == "cute" else (0,):
                try:
                    row = errors(op, name, shape, layout)
                except Exception as e:   # noqa: BLE001 - a probe: record the failure and go on
                    row = {"schedule": name, "shape": shape.name, "layout": layout,
                           "error": f"{type(e).__name__}: {e}"[:400]}
                res["errors"].append(row)
                print(row, flush=True)
                with open(out_path, "w") as f:
                    json.dump(res, f, indent=1, default=str)
    cudnn = next(b for b in op.baselines if b.name == "sdpa_cudnn")
    for bucket in ("ltx_video", "h3_stage1", "ltx_text", "h3_full"):
        shape = next(s for s in op.shapes if s.name == bucket)
        sets = [op.make_inputs(shape, 1000 + i, "cuda") for i in range(2)]
        prepared = {id(s[0]): cudnn.args(s) for s in sets}
        impls = {"sdpa_cudnn": lambda *a, p=prepared: cudnn.fn(*p[id(a[0])]),
                 "triton": lambda *a: triton_tpl.launch(*a, **TRITON)}
        for name, cfg in SCHEDULES.items():
            impls[name] = lambda *a, c=cfg: cute_tpl.launch(*a, **c)
        ref = impls["sdpa_cudnn"](*sets[0]).float()
        errs = {n: ((f(*sets[0]).float() - ref).norm() / ref.norm()).item() for n, f in impls.items()}
        torch.cuda.synchronize()
        stats = T.time_interleaved(impls, sets, warmup=2, reps=reps, sync_reps=0)
        p50 = {n: x.summary()["p50_us"] for n, x in stats.items()}
        base = stats["sdpa_cudnn"].times_us
        row = {"bucket": bucket, "rel_l2_vs_cudnn": errs, "p50_us": p50,
               "vs_cudnn": {n: paired_ratio_ci(base, x.times_us) for n, x in stats.items()}}
        res["timing"].append(row)
        print(bucket, {n: (round(p50[n] / 1e3, 3), round(row["vs_cudnn"][n][0], 3), f"{errs[n]:.1e}")
                       for n in impls}, flush=True)
        with open(out_path, "w") as f:
            json.dump(res, f, indent=1, default=str)


if __name__ == "__main__":
    main()
