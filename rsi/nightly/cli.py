"""``rsi nightly``: the subcommand. Exit codes: 0 nothing regressed, 1 something regressed (a phase failed, a locked
kernel no longer verifies, a gating figure slower beyond noise), 2 usage error, 3 another nightly holds the machine
lock (nothing was run)."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rsi.nightly import extract, history, run
from rsi.nightly.plan import PHASE_KINDS, ROUTES, Options, phases

console = Console() if sys.stdout.isatty() else Console(width=160)


def add_parser(sub) -> argparse.ArgumentParser:
    n = sub.add_parser("nightly", help="re-verify, re-bench and re-run the pipeline, compare with earlier nightlies, "
                                       "write a report (exit 1 on a regression)",
                       description=__doc__)
    n.add_argument("--gpu", default=None, help="GPU target (must be this GPU's; on the CPU: whose lock to verify)")
    n.add_argument("--out", default=None, help="output folder (default <root>/.rsi/nightly/<UTC date>-<target|cpu>); "
                                               "an existing one is resumed")
    n.add_argument("--baseline", default="last", help="last (newest earlier nightly of this target), none, a nightly "
                                                      "run id (rsi show) or a nightly output folder (default last)")
    n.add_argument("--history", type=int, default=10, help="earlier nightlies compared as the history (default 10)")
    n.add_argument("--ops", default="all", help="op groups to verify, bench and search, comma-separated (default all)")
    n.add_argument("--phases", default=None, help="phase kinds to run, comma-separated, of verify,bench,pipeline,"
                                                  "search (default verify,bench,pipeline; plus search with --search)")
    n.add_argument("--search", action="store_true", help="also a short search per op group, on a scratch copy of "
                                                         "the lock (DIR/search-root; the product's lock is untouched)")
    n.add_argument("--budget", default="4,10m", help="search budget per op group: N candidates, Nm minutes or N,Mm "
                                                     "(default 4,10m)")
    n.add_argument("--routes", default=",".join(ROUTES), help="pipeline routes (default two-stage,single-stage)")
    n.add_argument("--size", choices=["auto", "tiny", "full"], default="auto",
                   help="pipeline model size: full on a GPU, tiny on the CPU (default auto)")
    n.add_argument("--repeat", type=int, default=9, help="two-stage requests after the warm-up; all but the first "
                                                         "are the steady state (default 9: 8 samples per stage, 7 "
                                                         "A/A pairs of consecutive requests)")
    n.add_argument("--steps", type=int, default=8, help="single-stage denoising steps (default 8)")
    n.add_argument("--no-mux", action="store_true", help="pipeline phases without the MP4 (no PyAV needed; the "
                                                          "mux stage is then not compared)")
    n.add_argument("--reps", type=int, default=30, help="timed repetitions of rsi verify and rsi bench (default 30)")
    n.add_argument("--phase-timeout", type=float, default=3600.0, help="seconds before a phase is killed and "
                                                                       "counted failed (default 3600)")
    n.add_argument("--dry-run", action="store_true", help="print the phases' commands, run nothing")
    n.set_defaults(fn=main)
    return n


def options(a: argparse.Namespace, argv: list[str]) -> Options:
    import torch

    from rsi.cli import UsageError, parse_budget
    from rsi.refs import op_names
    from rsi.targets import TargetError, get_target, resolve_target

    cuda = torch.cuda.is_available()
    gpu = a.gpu
    try:
        if cuda:
            target, _local, _proxy = resolve_target(a.gpu, allow_proxy=False)
            if target is None:
                raise UsageError("this GPU is not in the target registry (rsi env lists them)")
            gpu = target.name
        elif gpu is not None:
            get_target(gpu)
    except TargetError as e:
        raise UsageError(str(e)) from None
    ops = op_names() if a.ops == "all" else [x.strip() for x in a.ops.split(",") if x.strip()]
    bad = [x for x in ops if x not in op_names()]
    kinds = tuple(x.strip() for x in (a.phases or "verify,bench,pipeline").split(",") if x.strip())
    routes = tuple(x.strip() for x in a.routes.split(",") if x.strip())
    for what, got, known in (("--ops", bad, op_names()), ("--phases", [k for k in kinds if k not in PHASE_KINDS],
                                                             PHASE_KINDS),
                             ("--routes", [r for r in routes if r not in ROUTES], ROUTES)):
        if got:
            raise UsageError(f"{what}: unknown {', '.join(got)}; known: {', '.join(known)}")
    if a.search and "search" not in kinds:
        kinds += ("search",)
    parse_budget(a.budget)
    for flag, v, lo in (("--repeat", a.repeat, 1), ("--steps", a.steps, 1), ("--reps", a.reps, 1),
                        ("--history", a.history, 0)):
        if v < lo:
            raise UsageError(f"{flag} must be at least {lo}")
    root = Path(a.root)
    out = Path(a.out) if a.out else root / ".rsi" / "nightly" / f"{time.strftime('%Y-%m-%d', time.gmtime())}-" \
                                                                  f"{gpu if cuda else 'cpu'}"
    size = a.size if a.size != "auto" else ("full" if cuda else "tiny")
    return Options(out=out.resolve(), root=a.root_explicit, db=a.db, gpu=gpu, cuda=cuda, ops=ops, kinds=kinds,
                   routes=routes, size=size, reps=a.reps, repeat=a.repeat, steps=a.steps, budget=a.budget,
                   mux=not a.no_mux,
                   baseline=a.baseline, history=a.history, phase_timeout_s=a.phase_timeout, argv=argv)


def main(a: argparse.Namespace) -> int:
    argv = list(getattr(a, "argv", None) or sys.argv[1:])
    o = options(a, argv)
    plan = phases(o)
    if a.dry_run:
        for ph in plan:
            console.print(escape(f"{ph.name}: " + (f"skipped ({ph.skip})" if ph.skip else shlex.join(ph.argv))),
                          soft_wrap=True)
        return 0
    db = Path(a.root) / a.db
    try:
        with run.machine_lock(o.out) as stale:
            return nightly(o, plan, db, Path(a.root), stale)
    except run.Busy as e:
        console.print(f"[red]busy:[/] {escape(str(e))}", soft_wrap=True)
        return 3


def _collect(records: list[dict[str, Any]]):
    figs, verdicts, copy_gbps, searches = {}, [], None, []
    for rec in records:
        if rec["status"] != "ok":
            continue
        if rec["kind"] == "search":
            out = rec["output"]
            searches.append({"name": rec["name"], "backend": out.get("backend"), "candidates": out.get("candidates"),
                             "accepted": out.get("accepted"), "promoted": len(out.get("promoted") or [])})
        for f in extract.figures(rec["kind"], rec["name"], rec["output"]):
            figs[f.key] = f
        if rec["kind"] == "verify":
            verdicts += extract.verdicts(rec["output"])
        if rec["kind"] == "bench" and copy_gbps is None:
            copy_gbps = (rec["output"].get("copy") or {}).get("gbps")
    return figs, verdicts, copy_gbps, searches


def nightly(o: Options, plan, db: Path, root: Path, stale: str) -> int:
    from rsi import env as envmod
    from rsi.nightly import findings as F
    from rsi.nightly import report
    from rsi.nightly.next import rank
    from rsi.nightly.tables import Report

    o.out.mkdir(parents=True, exist_ok=True)
    store = history.open_store(db, root)
    store.reap_dead_runs()
    st = run.state(o, store, envmod.capture(), run.lock_info(o.root))
    env, lock = st["env"], st["lock"]              # the first start's: the phases done then ran there
    target = o.gpu if o.cuda else None
    try:
        base = history.baseline(store, o.baseline, target, st["run_id"])
    except history.BaselineError as e:
        store.finish_run(st["run_id"], "failed", {"error": str(e)})
        from rsi.cli import UsageError

        raise UsageError(str(e)) from None
    notes = [stale] if stale else []
    console.print(f"nightly {st['run_id']} -> {escape(str(o.out))}" + (" (resumed)" if st.get("resumed") else ""))
    records = []
    for ph in plan:
        rec = run.done(ph, o.out)
        if rec is not None:
            console.print(f"  {ph.name}: done earlier ({rec['status']}), not run again")
        else:
            console.print(f"  {ph.name}: " + ("skipped: " + ph.skip if ph.skip else "running"), soft_wrap=True)
            if ph.kind == "search":
                _search_root(o)
            rec = run.run_phase(ph, o.out, o.phase_timeout_s)
            run.write_json(o.out / ph.file, rec)
            if not ph.skip:
                console.print(f"    {rec['status']} (exit {rec['rc']}) in {rec['wall_s']:.1f} s")
        records.append(rec)
    figs, verdicts, copy_gbps, searches = _collect(records)
    past = history.earlier(store, target, st["run_id"], o.history)
    comps = F.comparisons(figs, base, past)
    phase_rows = [{k: v for k, v in r.items() if k != "output"} for r in records]
    finds = F.assess(figs, comps, phase_rows, verdicts, {"env": env, "lock": lock, "resumes": st.get("resumes", []),
                                                          "searches": searches}, base)
    ranking = rank(figs, target, copy_gbps)
    code = F.exit_code(finds)
    summary = {"exit_code": code, "out": str(o.out), "baseline": base.id if base else None, "lock": lock,
               "verdicts": verdicts, "next": ranking, "phases": phase_rows,
               "findings": [f.to_json() for f in finds]}
    history.save_figures(store, st["run_id"], list(figs.values()))
    store.finish_run(st["run_id"], "finished", summary)
    run.write_json(o.out / "figures.json", [f.to_json() for f in figs.values()])
    run.write_json(o.out / "summary.json", summary)
    rep = Report(o.out, st, figs, comps, finds, verdicts, ranking, phase_rows, base, past, code, notes)
    files = report.write_all(rep)
    _print(rep, files)
    return code


def _search_root(o: Options) -> None:
    import shutil

    from rsi.verified import find_root, kernels_root

    dst = kernels_root(o.out / "search-root")
    if not dst.exists():
        shutil.copytree(kernels_root(find_root(o.root)[0]), dst)


def _print(rep, files) -> None:
    from rsi.nightly.report import counts, headline

    cls, head = headline(rep)
    console.print(f"[{'red' if cls == 'bad' else 'green'}]{escape(head)}[/]")
    for line in counts(rep):
        console.print(escape(line), soft_wrap=True)
    t = Table(title="findings (regressions first)")
    for c in ("severity", "what", "detail"):
        t.add_column(c, overflow="fold")
    for f in [f for f in rep.findings if f.severity != "note"][:25]:
        t.add_row(f.severity, escape(f.what), escape(f.detail[:200]))
    console.print(t)
    if rep.ranking:
        r = rep.ranking[0]
        console.print(escape(f"next: {r['op']} ({r['seconds']:.4g} s per request, headroom {r['headroom_s']:.4g} s; "
                             f"limit {r['limit']})"), soft_wrap=True)
    console.print("report: " + ", ".join(escape(str(p)) for p in files.values()), soft_wrap=True)
