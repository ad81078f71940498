"""``rsi bench``: time every op group at its shapes against eager, torch.compile, Liger, the op group's incumbents
(``OpGroup.baselines``, e.g. attention's SDPA backends and FlexAttention) and the locked verified kernel, and render
the README's performance table.

Incumbents are vetted first as in the judge (``rsi.harness.incumbents.vet``): one that raises or fails the op
group's class is not timed and the row's notes say why. Rows of an approximate op group say "approximate" with the
verified kernel's recorded rel-L2 and cosine against the exact op, never shown as if exact.

All timing goes through ``rsi.harness.timing`` (CUDA events, L2 flushed before every call, implementations
interleaved, inputs rotating among pre-made sets). Effective bandwidth counts the op group's compulsory bytes
(``OpGroup.bytes_moved``) and is reported against the device-to-device copy bandwidth measured in the same run.
GPU only; results are JSON (one row per op group and shape) plus a markdown table with the exact command line.
"""

from __future__ import annotations

import argparse
import gc
import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

SCHEMA = 1
IMPL_ORDER = ("eager", "compile", "liger", "verified", "copy")
IMPL_TITLES = {"eager": "eager", "compile": "torch.compile", "liger": "Liger", "verified": "verified kernel",
               "copy": "copy_ of the same bytes"}


class BenchError(RuntimeError):
    """A bench that cannot run; the message says what to do."""


# ------------------------------------------------------------------------------------------ result assembly (CPU)
def impl_stats(summary: dict[str, float], nbytes: int, copy_gbps: float) -> dict[str, float]:
    """p20/p50/p80 (us) of one implementation plus effective GB/s and % of the copy bandwidth at the median."""
    p50 = summary["p50_us"]
    gbps = nbytes / (p50 * 1e-6) / 1e9 if p50 > 0 else float("nan")
    return {"p20_us": summary["p20_us"], "p50_us": p50, "p80_us": summary["p80_us"], "gbps": gbps,
            "pct_copy": 100.0 * gbps / copy_gbps if copy_gbps > 0 else float("nan")}


def assemble_row(op: str, bucket: str, dims: dict[str, int], nbytes: int, summaries: dict[str, dict[str, float]],
                 copy_gbps: float, verified: str | None = None, notes: dict[str, str] | None = None,
                 incumbents: tuple[str, ...] = (), approximate: str = "") -> dict[str, Any]:
    """One result row: per implementation timings and bandwidth, verified speedups over eager, torch.compile and
    the fastest timed incumbent (``incumbents``: the op group's baseline names); ``approximate``: the row's label
    (rsi.search.display.approximate_label), "" for an exact op group."""
    impls = {name: impl_stats(s, nbytes, copy_gbps) for name, s in summaries.items()}
    row: dict[str, Any] = {"op": op, "bucket": bucket, "dims": dict(dims), "bytes": nbytes, "impls": impls,
                           "verified_kernel": verified, "notes": dict(notes or {}), "approximate": approximate}
    timed = [n for n in incumbents if n in impls]
    if timed:
        row["fastest_incumbent"] = min(timed, key=lambda n: impls[n]["p50_us"])
    v = impls.get("verified")
    for base in ("eager", "compile", "liger"):
        if v and base in impls:
            row[f"verified_vs_{base}"] = impls[base]["p50_us"] / v["p50_us"]
    if v and timed:
        row["verified_vs_incumbent"] = impls[row["fastest_incumbent"]]["p50_us"] / v["p50_us"]
    return row


def _cell(stats: dict[str, float] | None) -> str:
    if stats is None:
        return "-"
    flag = " ‡" if stats["pct_copy"] > 105 else ""
    return f"{stats['p50_us']:.1f} µs ({stats['pct_copy']:.0f}%){flag}"


def _dims(dims: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in dims.items())


def render_markdown(results: dict[str, Any]) -> str:
    """The README performance table: median time and % of the copy bandwidth per implementation."""
    env = results.get("env", {})
    copy = results.get("copy", {})
    t = results.get("timing", {})
    lines = [
        f"Measured on {env.get('gpu_name') or 'unknown GPU'} (target {results.get('target') or 'none'}), "
        f"torch {env.get('torch', '?')}, Triton {env.get('triton', '?')}, rsi {str(env.get('rsi_commit', '?'))[:10]}"
        + (" (dirty)" if env.get("rsi_dirty") else "") + f", {results.get('created', '')}.",
        (f"Median of {t.get('reps', '?')} interleaved repetitions ({t.get('method', '?')}); in parentheses the "
         f"effective bandwidth (compulsory bytes / median) as % of the device-to-device copy measured in the same "
         f"run ({copy.get('gbps', float('nan')):.0f} GB/s, 4 GiB moved); the last column is a copy_ of the op's own "
         f"byte count, timed with the others: the ceiling at that size."),
        "",
        "```",
        results.get("command", "rsi bench"),
        "```",
        "",
        "| op group | shape | MB | " + " | ".join(IMPL_TITLES[i] for i in IMPL_ORDER)
        + " | verified vs compile | fastest incumbent | verified vs incumbent |",
        "|---|---|---:|" + "---:|" * len(IMPL_ORDER) + "---:|---:|---:|",
    ]
    flagged = False
    for r in results.get("rows", []):
        cells = [_cell(r["impls"].get(i)) for i in IMPL_ORDER]
        flagged |= any("‡" in c for c in cells)
        vs = r.get("verified_vs_compile")
        inc = r.get("fastest_incumbent")
        inc_cell = f"{inc}: {_cell(r['impls'][inc])}" if inc else "-"
        vs_inc = r.get("verified_vs_incumbent")
        op = r["op"] + (f" ({r['approximate']})" if r.get("approximate") else "")
        lines.append(f"| {op} | {r['bucket']} ({_dims(r['dims'])}) | {r['bytes'] / 1e6:.0f} | " + " | ".join(cells)
                     + f" | {f'{vs:.2f}x' if vs else '-'} | {inc_cell} | {f'{vs_inc:.2f}x' if vs_inc else '-'} |")
    notes = sorted({f"{r['op']}: {n}" for r in results.get("rows", []) for n in r.get("notes", {}).values()})
    if flagged:
        lines += ["", ("‡ above the copy bandwidth: that implementation moves fewer bytes than the op's compulsory "
                       "count (e.g. the reference returns a view), not a faster kernel.")]
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------- GPU run
def _on_set(fn: Callable[..., Any], sets: list[tuple]) -> Callable[[int], Any]:
    """fn bound to a list of input sets: called with the index of the set to run on."""
    return lambda i: fn(*sets[i])


def _verified_impl(root: str, target: str | None, op: str, dims: dict[str, int], env: dict[str, Any]):
    from rsi.verified import resolve

    vk, why = resolve(root, target, op, dims, env)
    if vk is None:
        return None, None, why, None
    return vk.load(), vk.path.name, why, vk.record.get("tolerance", {})


def run_bench(ops: list[str], root: str = ".", target: str | None = None, out_json: str | None = None,
              reps: int = 40, warmup: int = 5, input_sets: int = 2, command: str = "rsi bench") -> dict[str, Any]:
    """Time every op group in ``ops`` at each of its shapes; write JSON to ``out_json`` when given."""
    import torch

    from rsi import env as envmod
    from rsi.harness import incumbents as I
    from rsi.harness import timing as T
    from rsi.refs import get_op_group
    from rsi.search.display import approximate_label
    from rsi.targets import detect_local
    from rsi.verified import now

    if not torch.cuda.is_available():
        raise BenchError("rsi bench times kernels on a CUDA GPU and none is visible; run it on the GPU machine "
                         "(the interpreter backend checks correctness only and cannot be timed)")
    if target is None:
        local = detect_local()
        target = local.name if local else None
    device = torch.device("cuda")
    env = envmod.capture()
    copy = T.measure_copy_bandwidth(device)
    rows = []
    for name in ops:
        op = get_op_group(name)
        compiled = torch.compile(op.reference, dynamic=False) if op.reference_timed else None
        liger_ok = False
        if op.liger is not None:
            try:
                import liger_kernel  # noqa: F401  (optional, GPU only)

                liger_ok = True
            except ImportError:
                pass
        for shape in op.shapes:
            sets = [op.make_inputs(shape, 1000 + k, device) for k in range(input_sets)]
            fns: dict[str, Callable[..., Any]] = ({"eager": op.reference, "compile": compiled}
                                                  if op.reference_timed else {})
            notes: dict[str, str] = {}
            vfn, vname, why, vtol = _verified_impl(root, target, name, dict(shape.dims), env)
            label = approximate_label(vtol if vtol else {"class": op.tolerance.name})
            if vfn is not None:
                fns["verified"] = vfn
                fns["verified_aa"] = vfn  # the same kernel timed twice: the method's A/A difference, JSON only
            else:
                notes["verified"] = f"no verified kernel at {shape.name}: {why}"
            if not liger_ok and op.liger is not None:
                notes["liger"] = "Liger not installed"
            # every implementation takes an input-set index, so Liger can run on its own (prepared) layout
            impls = {k: _on_set(f, sets) for k, f in fns.items()}
            if liger_ok:
                impls["liger"] = _on_set(op.liger, [op.liger_prepare(s) for s in sets])
            passed, report = I.vet(op, op.tolerance, sets[0])
            for b in passed:
                impls[b.name] = _on_set(b.fn, [b.args(s) for s in sets])
            notes.update({n: f"{n} not timed at {shape.name}: {r['reason']}" for n, r in report.items()
                          if not r["timed"]})
            impls["copy"] = T.same_bytes_copy(op.bytes_moved(shape), device)
            samples = T.time_interleaved(impls, [(i,) for i in range(len(sets))], warmup=warmup, reps=reps,
                                         sync_reps=0, device=device)
            row = assemble_row(name, shape.name, dict(shape.dims), op.bytes_moved(shape),
                               {k: s.summary() for k, s in samples.items()}, copy["gbps"], vname, notes,
                               tuple(b.name for b in op.baselines), label)
            row["samples_us"] = {k: list(s.times_us) for k, s in samples.items()}   # per repetition, in order
            if "verified_aa" in row["impls"]:
                row["aa_ratio"] = row["impls"]["verified_aa"]["p50_us"] / row["impls"]["verified"]["p50_us"]
            rows.append(row)
            print(f"{name:24s} {shape.name:9s} " + (f"({label}) " if label else "") + "  ".join(
                f"{k} {v['p50_us']:.1f}us {v['pct_copy']:.0f}%" for k, v in row["impls"].items()), flush=True)
            del sets, impls, fns
            gc.collect()
            torch.cuda.empty_cache()
    results = {"schema": SCHEMA, "command": command, "target": target, "env": env, "copy": copy,
               "timing": {"method": T.METHOD, "warmup": warmup, "reps": reps, "input_sets": input_sets},
               "created": now(), "rows": rows}
    if out_json:
        Path(out_json).parent.mkdir(parents=True, exist_ok=True)
        Path(out_json).write_text(json.dumps(results, indent=2, sort_keys=True, default=str) + "\n")
    return results


# ------------------------------------------------------------------------------------------------------ CLI
def add_parser(subparsers) -> argparse.ArgumentParser:
    b = subparsers.add_parser("bench", help="time op groups: eager, torch.compile, Liger, the verified kernel and a "
                                            "copy of the same bytes")
    b.add_argument("--op-group", default="all", help="op group to time (e.g. modulate), or 'all' (default)")
    b.add_argument("--gpu", default=None, help="GPU target whose LOCK.json entries to time (default: this GPU's)")
    b.add_argument("--reps", type=int, default=40, help="timed repetitions per implementation (default 40)")
    b.add_argument("--warmup", type=int, default=5, help="warm-up calls per implementation (default 5)")
    b.add_argument("--out", default=None, help="write the results as JSON here")
    b.add_argument("--markdown", default=None, help="write the performance table (markdown) here")
    b.add_argument("--dry-run", action="store_true", help="list what would be timed, time nothing")
    b.set_defaults(fn=run)
    return b


def _command_line(a: argparse.Namespace) -> str:
    parts = ["rsi"] + (["--root", a.root] if getattr(a, "root", ".") != "." else []) + \
        ["bench", "--op-group", a.op_group]
    for flag, value in (("--gpu", a.gpu), ("--reps", a.reps), ("--out", a.out), ("--markdown", a.markdown)):
        if value is not None:
            parts += [flag, str(value)]
    return " ".join(shlex.quote(p) for p in parts)


def run(a: argparse.Namespace) -> int:
    """Exit codes: 0 ok, 2 usage (unknown op group, no GPU)."""
    from rsi.refs import op_names

    ops = op_names() if a.op_group == "all" else [a.op_group]
    unknown = [o for o in ops if o not in op_names()]
    if unknown:
        print(f"error: unknown --op-group {unknown[0]!r}; known: {', '.join(op_names())}, all", file=sys.stderr)
        return 2
    if a.gpu is not None:
        import torch

        from rsi.targets import TargetError, get_target, resolve_target

        try:
            get_target(a.gpu)
            if torch.cuda.is_available():  # timing another target's lock on this GPU would mislabel every row
                resolve_target(a.gpu, allow_proxy=False)
        except TargetError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    if getattr(a, "dry_run", False):
        print(f"dry run: would time {', '.join(ops)} (eager, torch.compile, Liger, verified) with {a.reps} reps")
        return 0
    try:
        from rsi.verified import find_root

        root, how = find_root(getattr(a, "root_explicit", None))
        print(f"verified kernels from {root / 'verified_kernels'} ({how})")
        results = run_bench(ops, root=str(root), target=a.gpu, out_json=a.out, reps=a.reps,
                            warmup=a.warmup, command=_command_line(a))
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    md = render_markdown(results)
    if a.markdown:
        Path(a.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(a.markdown).write_text(md)
    print(md)
    return 0
