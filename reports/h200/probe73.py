"""H200 probe 73 (prepared in the eighteenth session, not yet run; outside the judge, not a verdict): QVEC 2 (the
V^T pass's loads issued first) and EMU 2 at the promoted schedule (BN 192: the space's heuristic).
--smoke: QVEC 2's q8 / k8 / vt bytes against the reference's quantiser (probe 71's check) at the interpreter and odd
shapes in layouts 0-2, the special cases and h3_stage1, and the whole launch at QVEC 2 with EMU 0 and 2 against the
op's reference; exit status 1 if a byte differs or a launch is off.
--timing: at h3_full, h3_stage1 and ltx_video, one interleaved loop a bucket: SDPA cuDNN, cuDNN FP8, the launch at
QVEC 1 / 2 x EMU 0 / 2, and the V^T pass alone at QVEC 1 and 2, with paired ratio CIs against SDPA cuDNN.
Usage: python reports/h200/probe73.py OUT.json [REPS] --smoke | --timing"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe69 import expected_vt, rel  # run 69's checks, reused as they ran
from probe71 import same_scales, workspace

from rsi import kernel as K
from rsi.harness import timing as T
from rsi.refs import attention_fp8 as A8
from rsi.refs import get_op_group
from rsi.search.stats import paired_ratio_ci
from rsi.spaces import load_space
from rsi.templates import attention_fp8_cute as tpl

HEUR = load_space("attention_fp8").select("attention_fp8_cute").heuristic()
CONFIGS = {f"q{qv}_emu{emu}": {**HEUR, "QVEC": qv, "EMU": emu} for qv in (1, 2) for emu in (0, 2)}
CHECKED = ("q2_emu0", "q2_emu2")


def smoke_row(op, shape, layout, special):
    q, k, v, cu = op.make_inputs(shape, 11, "cuda", layout)
    if special is not None:
        q, k, v, cu = special.apply((q, k, v, cu))
    row = {"shape": shape.name, "layout": layout, "special": special.name if special else None}
    try:
        part, scales, q8, k8, vt, n_pad = workspace(q, cu)
        tpl._quantize(q, k, v, cu, part, scales, q8, k8, vt, QVEC=2)
        torch.cuda.synchronize()
        (rq8, sq), (rk8, sk), (rv8, sv) = (A8.quantize(t) for t in (q, k, v))
        ok = all(same_scales(scales[i], s) for i, s in enumerate((sq, sk, sv)))
        want = expected_vt(rv8, cu, n_pad)
        row["bytes_differing"] = [int((a.view(torch.uint8) != b.view(torch.uint8)).sum())
                                  for a, b in ((q8, rq8), (k8, rk8), (vt, want))]
        ref = op.reference(q, k, v, cu)
        fin = torch.isfinite(ref)
        for name in CHECKED:
            out = tpl.launch(q, k, v, cu, **{**CONFIGS[name], "DYNAMIC": 1})
            torch.cuda.synchronize()
            row[f"{name}_vs_ref"] = rel(out, ref)
            ok = ok and row[f"{name}_vs_ref"] < 0.05 and int((torch.isfinite(out) != fin).sum()) == 0
        row["ok"] = ok and not any(row["bytes_differing"])
    except Exception as e:   # noqa: BLE001 - a probe: record the failure and go on
        row["error"], row["ok"] = f"{type(e).__name__}: {e}"[:600], False
    return row


def time_bucket(op, bucket, reps):
    base = {b.name: b for b in op.baselines}
    shape = next(s for s in op.shapes if s.name == bucket)
    sets = [op.make_inputs(shape, 1000 + i, "cuda") for i in range(2)]
    prep = {name: {id(s[0]): base[name].args(s) for s in sets} for name in ("sdpa_cudnn", "cudnn_fp8")}
    impls = {name: (lambda *a, n=name: base[n].fn(*prep[n][id(a[0])])) for name in prep}
    for name, cfg in CONFIGS.items():
        impls[name] = lambda *a, c=cfg: tpl.launch(*a, **c)
    part, scales, _q8, _k8, vt, _ = workspace(sets[0][0], sets[0][3])
    for first in (0, 1):
        impls[f"vt_q{first + 1}"] = lambda q_, k_, v_, cu_, f=first: K.cute_launch(
            tpl._quant_vt_vec_host, v_, part[2], cu_, vt, scales[2], LOADS_FIRST=f)
    for f in impls.values():   # compile outside the timed loop
        f(*sets[0])
    torch.cuda.synchronize()
    stats = T.time_interleaved(impls, sets, warmup=2, reps=reps, sync_reps=0)
    b = stats["sdpa_cudnn"].times_us
    row = {"bucket": bucket, "p50_us": {n: x.summary()["p50_us"] for n, x in stats.items()},
           "vs_cudnn": {n: paired_ratio_ci(b, x.times_us) for n, x in stats.items()}}
    print(bucket, {n: (round(p / 1e3, 3), round(row["vs_cudnn"][n][0], 3)) for n, p in row["p50_us"].items()},
          flush=True)
    return row


def main():
    out_path = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 and not sys.argv[2].startswith("--") else 10
    op = get_op_group("attention_fp8")
    res = {"note": __doc__, "torch": torch.__version__, "device": torch.cuda.get_device_name(), "configs": CONFIGS,
           "rows": [], "timing": []}
    if "--smoke" in sys.argv:
        three = next(s for s in op.odd_shapes if s.name == "three_docs")
        cases = [(s, lay, None) for s in (*op.interp_shapes, *op.odd_shapes) for lay in range(op.n_layouts)]
        cases += [(three, 0, sp) for sp in op.special_cases]
        cases += [(next(s for s in op.shapes if s.name == "h3_stage1"), lay, None) for lay in range(op.n_layouts)]
        for shape, layout, special in cases:
            res["rows"].append(smoke_row(op, shape, layout, special))
            print(res["rows"][-1], flush=True)
            with open(out_path, "w") as f:
                json.dump(res, f, indent=1, default=str)
        sys.exit(0 if all(r["ok"] for r in res["rows"]) else 1)
    for bucket in ("h3_full", "h3_stage1", "ltx_video"):
        res["timing"].append(time_bucket(op, bucket, reps))
        with open(out_path, "w") as f:
            json.dump(res, f, indent=1, default=str)


if __name__ == "__main__":
    main()
