"""What to search next: op groups ranked by the pipeline time they take and their headroom to the physical limit.

From the pipeline's own per-op timing (runtime/kernels.py ``op_times``; the first route the nightly ran with ops,
two-stage before single-stage), per op group and call shape: the median seconds per steady-state request, the
calls per request, hence the time per call, and the fraction of the physical limit it reaches: the op's compulsory
bytes (``OpGroup.bytes_moved``) per call time over the copy bandwidth that ``rsi bench`` measured in the same
nightly (else the target's datasheet HBM bandwidth), or, for ``flops_kind == "tensor"`` op groups, its FLOPs per call
time over the target's dense bf16 tensor-core peak. Headroom = time x (1 - fraction), summed over the op group's
shapes; the ranking is by headroom. Without a GPU target the limit is unknown: the fraction is taken as 0 and the
ranking is by time alone (said in the table). ``rsi search --op-group next`` searches the first ranked op group
that has a search space.
"""

from __future__ import annotations

from typing import Any

from rsi.nightly.figure import Figure


def _limit(op_group, target, copy_gbps: float | None) -> tuple[float | None, str]:
    """(per-second capacity, description): bytes/s for memory-bound op groups, FLOP/s for tensor ones."""
    if op_group.flops_kind == "tensor":
        if target is None:
            return None, "unknown (no GPU target)"
        return target.peak_tflops("tensor") * 1e12, f"tensor-core bf16 peak {target.bf16_tflops:g} TFLOP/s (spec)"
    if copy_gbps:
        return copy_gbps * 1e9, f"copy {copy_gbps:.0f} GB/s (measured by rsi bench tonight)"
    if target is None:
        return None, "unknown (no GPU target)"
    return target.hbm_tbps * 1e12, f"HBM {target.hbm_tbps:g} TB/s (datasheet)"


def rank(figs: dict[str, Figure], target_name: str | None, copy_gbps: float | None) -> list[dict[str, Any]]:
    from rsi.contract import Shape
    from rsi.refs import get_op_group, op_names
    from rsi.spaces import SPACES_DIR
    from rsi.targets import TARGETS

    target = TARGETS.get(target_name) if target_name else None
    ops = [f for f in figs.values() if f.meta.get("op") and f.key.startswith("pipeline/")]
    route = next((r for r in ("two-stage", "single-stage") if any(f.meta["route"] == r for f in ops)), None)
    total = figs.get(f"pipeline/{route}/request_total") or figs.get(f"pipeline/{route}/request (stage sum)")
    out: dict[str, dict[str, Any]] = {}
    for f in ops:
        if f.meta["route"] != route or f.meta["op"] not in op_names():
            continue
        g = get_op_group(f.meta["op"])
        sec, calls = f.median, max(1, int(f.meta.get("calls") or 1))
        cap, limit = _limit(g, target, copy_gbps)
        frac = None
        if cap and sec > 0:
            shape = Shape("pipeline", f.meta["dims"])
            work = g.flops(shape) if g.flops_kind == "tensor" else g.bytes_moved(shape)
            frac = min(1.0, work / (sec / calls) / cap)
        r = out.setdefault(g.name, {"op": g.name, "seconds": 0.0, "headroom_s": 0.0, "reached_s": 0.0,
                                    "limit": limit, "shapes": 0, "kernels": set(),
                                    "searchable": (SPACES_DIR / f"{g.name}.toml").exists()})
        r["seconds"] += sec
        r["headroom_s"] += sec * (1.0 - (frac or 0.0))
        r["reached_s"] += sec * frac if frac is not None else float("nan")
        r["shapes"] += 1
        r["kernels"].add(f.meta.get("kernel", "?"))
    rows = []
    for r in out.values():
        r["fraction"] = r.pop("reached_s") / r["seconds"] if r["seconds"] > 0 else float("nan")
        r["share"] = r["seconds"] / total.median if total is not None and total.median > 0 else float("nan")
        r["kernels"], r["route"] = sorted(r["kernels"]), route
        rows.append(r)
    return sorted(rows, key=lambda r: -r["headroom_s"])


def pick(ranking: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first ranked op group with a search space."""
    return next((r for r in ranking if r.get("searchable")), None)


def resolve_next(a, console) -> str:
    """``rsi search --op-group next``: the first searchable op group of the newest finished nightly's ranking in
    the store (of target ``--gpu`` when given)."""
    from pathlib import Path

    from rich.markup import escape

    from rsi.cli import UsageError
    from rsi.nightly.history import latest_ranking, open_store

    db = Path(a.root) / a.db
    where = f" for target {a.gpu}" if a.gpu else ""
    found = latest_ranking(open_store(db, a.root), a.gpu) if db.exists() else None
    if found is None:
        raise UsageError(f"--op-group next: no finished rsi nightly with a ranking in {db}{where}; run `rsi nightly` "
                         "first (its pipeline phase ranks the op groups)")
    rid, ranking = found
    r = pick(ranking)
    if r is None:
        raise UsageError(f"--op-group next: nightly {rid} ranked {', '.join(x['op'] for x in ranking)}, none of "
                         "them with a search space")
    console.print(escape(f"--op-group next: {r['op']} (nightly {rid}, {r['route']} route: {r['seconds']:.4g} s per "
                         f"request, headroom {r['headroom_s']:.4g} s to {r['limit']})"), soft_wrap=True)
    return r["op"]
