"""The incumbents of an op group (``OpGroup.baselines``): each one is checked before it is timed.

:func:`vet` runs every declared baseline on one input set (its ``prepare`` included) and compares its outputs with
the reference under the class the candidate is judged by (``rsi.harness.check``: structure, then ``compare`` with
the oracle and term scales a candidate gets), or under the baseline's own ``tolerance`` where it declares one (an
implementation the runtime really runs whose bytes legitimately differ; the report then names that class). A baseline that raises (a backend that does not support these inputs,
cuDNN missing, out of memory) or fails the check is dropped from timing and reported with its reason; none is
dropped silently. The judge vets once per shape and judge (``Judge.timing``) and records the report in every
verdict's ``details["incumbents"]``; ``rsi bench`` vets before timing too. Pure torch: runs on the CPU in tests.
"""

from __future__ import annotations

from typing import Any

from rsi.contract import Baseline, OpGroup, ToleranceClass
from rsi.harness import check


def _why(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"raised {type(e).__name__}: {text[:300]}"


def vet(op: OpGroup, tol: ToleranceClass, inputs: tuple,
        refs: tuple | None = None) -> tuple[list[Baseline], dict[str, dict[str, Any]]]:
    """(baselines that passed, report per declared baseline). ``refs``: the reference's outputs on ``inputs`` when
    the caller has them. A report entry is ``{"timed": True, "error": worst stats}`` for a baseline that passed, else
    ``{"timed": False, "reason": ...}``."""
    if not op.baselines:
        return [], {}
    refs = check.as_tuple(op.reference(*inputs)) if refs is None else tuple(refs)
    classes = [b.tolerance or tol for b in op.baselines]
    oracles = (check.as_tuple(op.oracle(*inputs)) if any(check.needs_oracle(t) for t in classes)
               else (None,) * len(refs))
    scales = check.term_scales(op, inputs, len(refs))
    passed: list[Baseline] = []
    report: dict[str, dict[str, Any]] = {}
    for b, btol in zip(op.baselines, classes):
        try:
            outs = check.as_tuple(b.fn(*b.args(inputs)))
        except Exception as e:  # noqa: BLE001 - an unsupported backend drops this baseline, with its reason
            report[b.name] = {"timed": False, "reason": _why(e)}
            continue
        ok, why = check.check_structure(outs, refs)
        stats: list[dict[str, float]] = []
        for i, (o, r, q, sc) in enumerate(zip(outs, refs, oracles, scales)):
            if not ok:
                break
            ok, st, why = check.compare(o, r, q, btol, term_scale=sc)
            stats.append(st)
            why = f"{why} (output {i})" if why else ""
        cls = {} if btol is tol else {"class": btol.describe()}
        if not ok:
            report[b.name] = {"timed": False, "reason": f"fails the {btol.name} check: {why}",
                              "error": check.worst(stats), **cls}
            continue
        passed.append(b)
        report[b.name] = {"timed": True, "error": check.worst(stats), **cls}
    return passed, report
