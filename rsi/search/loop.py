"""The recursive search loop: propose -> judge in the isolated worker -> record -> feed back -> promote.

The current best (the locked verified kernel for this target, else torch.compile, else eager) is the baseline
every candidate is timed against, interleaved in the same worker; a promoted candidate becomes the next baseline at
once. Each verdict is committed to the store before the next candidate starts, so a killed search resumes
(``--resume``) with every judged candidate intact.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from rsi import env as envmod
from rsi.contract import Candidate
from rsi.harness.judge import JudgeOptions
from rsi.refs import get_op_group, reference_source_sha256
from rsi.search import promote
from rsi.search.display import SearchDisplay, approximate_label
from rsi.search.propose import Proposer, check_first, objective_of, offline_proposer, runnable
from rsi.search.workers import WorkerError, make_pool
from rsi.spaces import load_space
from rsi.store import Store
from rsi.verified import lock_kernel, locked_kernel, write_record


class SearchError(RuntimeError):
    """A search that cannot start; the message says what to do."""


@dataclass
class SearchOptions:
    op: str
    backend: str                 # "cuda" | "interpret"
    target: str | None           # GPU target name the records are for (None: interpreter)
    proxy: bool = False
    proposer: str = "offline"
    budget_candidates: int = 20
    budget_minutes: float = 60.0
    seed: int = 0
    root: str = "."
    db: str = ".rsi/rsi.db"
    resume: str | None = None    # run id, or "latest"
    candidate_timeout_s: float = 600.0
    unsafe_no_sandbox: bool = False  # judge LLM candidates although bwrap is unavailable (records say so)
    timing: dict[str, Any] = field(default_factory=lambda: {"warmup": 5, "reps": 40, "input_sets": 2})
    proposer_args: dict[str, Any] = field(default_factory=dict)
    quiet: bool = False
    explicit: tuple[str, ...] = ()  # options the user gave on this command line (a resume takes them)
    workers: int = 1                # judges in parallel (rsi.search.workers): local processes, or Ray actors
    ray_address: str | None = None  # auto | HOST:PORT | local (a cluster started for this search)
    template: str | None = None     # search only this template of the op group's space (rsi search --template)
    command: str = "rsi search"     # the command line that ran (a promotion's record names it; a resume its own)
    first: tuple[dict[str, Any], ...] = ()  # offline proposer: configs judged before the heuristic (rsi search --first)


def make_proposer(opts: SearchOptions, store: Store, run_id: str, spaces: list) -> Proposer:
    """``spaces``: the templates that can run here (rsi.search.propose.runnable), the space's main one first where
    it can; the LLM proposers start from the first."""
    if opts.proposer == "offline":
        judged = {e["candidate"]: e["objective"] for e in store.evaluations(run_id)}
        return offline_proposer(spaces, store.url, study_name=f"{opts.op}:{run_id}", seed=opts.seed, judged=judged,
                                first=opts.first)
    from rsi.search import llm_proposers

    return llm_proposers.make(opts, store, run_id, spaces[0])


def _incumbent(opts: SearchOptions):
    if opts.target is None or opts.backend != "cuda":
        return None
    return locked_kernel(opts.root, opts.target, opts.op)


# a resumed run keeps its op, proposer, backend and target (and its proposer's model, sampling...); these may change
RESUMABLE = ("budget_candidates", "budget_minutes", "candidate_timeout_s", "workers", "ray_address")


def _resume_options(store: Store, run_id: str, saved: SearchOptions, given: SearchOptions) -> SearchOptions:
    """The resumed run's options: its own, with the budgets, timeouts and (LLM proposers) base URL that ``given``
    or the environment change; printed (kept / overridden / ignored) and stored for the next resume. The CLI fills
    every top-level option, so one is taken where the user gave it (``explicit``) or where it differs from the
    default."""
    default = SearchOptions(op=given.op, backend=given.backend, target=given.target)
    changes: dict[str, Any] = {}
    overridden, ignored = [], []
    for name in RESUMABLE:
        new, old = getattr(given, name), getattr(saved, name)
        if (name in given.explicit or new != getattr(default, name)) and new != old:
            changes[name] = new
            overridden.append(f"{name} {old} -> {new}")
    for name in ("op", "backend", "target") + (("proposer",) if given.proposer != default.proposer else ()):
        if getattr(given, name) != getattr(saved, name):
            ignored.append(f"{name}={getattr(given, name)}")
    kept = [f"{n}={getattr(saved, n) or '-'}" for n in ("op", "proposer", "backend", "target")]
    from rsi.search import llm_proposers

    if saved.proposer in llm_proposers.LLM_PROVIDERS:
        merged, p_over, p_ign = llm_proposers.resume_settings(saved.proposer_args or {}, given.proposer_args or {},
                                                              os.environ)
        changes["proposer_args"] = merged
        overridden += p_over
        ignored += p_ign
        if merged.get("model") not in (None, "none"):
            kept.append(f"model={merged['model']}")
    opts = replace(saved, **changes)
    store.update_run_args(run_id, {k: v for k, v in asdict(opts).items() if k not in ("resume", "quiet", "explicit")})
    print(f"[rsi] resume {run_id}: kept {', '.join(kept)}; overridden: {', '.join(overridden) or 'nothing'}"
          + (f"; ignored (a resumed run keeps its op, proposer, backend, target, model and sampling): "
             f"{', '.join(ignored)}" if ignored else ""), file=sys.stderr, flush=True)
    return opts


def _searchable(space, opts: SearchOptions) -> tuple[list, list[str]]:
    """The templates to search (``--template``'s alone, else every one that can run here) and the notes of those
    skipped (CuTe DSL templates without the GPU or the [cute] extra)."""
    try:
        space = space.select(opts.template) if opts.template else space
    except ValueError as e:
        raise SearchError(str(e)) from None
    spaces, skipped = runnable(space, opts.backend)
    if not spaces:
        raise SearchError(f"nothing to search for {opts.op}: " + "; ".join(skipped))
    return spaces, skipped


def run_search(opts: SearchOptions) -> dict[str, Any]:
    op = get_op_group(opts.op)
    space = load_space(opts.op)
    if not opts.resume:
        spaces, skipped = _searchable(space, opts)   # before a run is recorded
        try:
            check_first(spaces, opts.first)
        except ValueError as e:
            raise SearchError(str(e)) from None
    store = Store(Path(opts.root) / opts.db if not Path(opts.db).is_absolute() else opts.db, opts.root)
    env = envmod.capture()
    if opts.resume:
        store.reap_dead_runs()  # `running` runs whose process is gone from this host become `interrupted`
        run = store.get_run(opts.resume) if opts.resume != "latest" else store.latest_unfinished(opts.op)
        if run is None:
            raise SearchError(f"no unfinished run to resume for op group {opts.op!r}"
                              + (f" with id {opts.resume}" if opts.resume != "latest" else "")
                              + "; `rsi show` lists runs, or start a new search without --resume")
        holder = store.running_elsewhere(run.id)
        if holder is not None:
            raise SearchError(f"run {run.id} is still running (pid {holder['pid']} on {holder['host']}); stop that "
                              f"process first, or wait for it to finish, then --resume {run.id}")
        saved = SearchOptions(**{**asdict(opts), **run.args, "resume": opts.resume, "quiet": opts.quiet})
        opts = replace(_resume_options(store, run.id, saved, opts), command=opts.command)
        spaces, skipped = _searchable(space, opts)   # the resumed run's template, on this backend
        run_id = run.id
        store.mark_running(run_id)
    else:
        args = {k: v for k, v in asdict(opts).items() if k not in ("resume", "quiet", "explicit")}
        run_id = store.create_run(opts.op, opts.target, opts.backend, opts.proposer, args, env, opts.proxy)
    done = store.evaluations(run_id)
    seq = len(done)
    incumbent = _incumbent(opts)
    proposer = make_proposer(opts, store, run_id, spaces)
    display = SearchDisplay(opts, run_id, space.buckets, quiet=opts.quiet,
                            incumbents=tuple(b.name for b in op.baselines))
    for e in done:
        display.add(e["seq"], e["verdict"], store.load_candidate(e["candidate"]), resumed=True)
    for note in skipped:
        display.note(note)
    started = time.monotonic()
    promoted: list[dict[str, Any]] = []
    status = "finished"
    judge_opts = JudgeOptions(backend=opts.backend, timeout_s=opts.candidate_timeout_s, huge=opts.backend == "cuda",
                              unsafe_no_sandbox=opts.unsafe_no_sandbox, timing=dict(opts.timing), target=opts.target,
                              approximate={opts.op: dict(space.approximate)} if space.approximate else {})
    try:
        pool = make_pool(opts.workers, opts.ray_address, judge_opts)
    except WorkerError as e:
        store.finish_run(run_id, "failed", {"error": str(e)})
        raise SearchError(str(e)) from None
    if pool.size == 1 and pool.kind == "in-process":
        display.note(f"judge: producer sandbox {pool.describe()['sandbox']}; seeds {list(pool._j.judge.seeds)} "
                     "(fresh per run)")
    else:
        hosts = sorted({w["host"] for w in pool.workers})
        display.note(f"{pool.size} judges ({pool.kind}) on {', '.join(hosts)}; each its own sandboxed judge and "
                     "seeds; verdicts recorded by this driver as they arrive")
    in_flight: dict[int, tuple[Any, str | None]] = {}     # key -> (proposal, incumbent hash it is timed against)
    next_key, exhausted = seq, False
    try:
        with display:
            while True:
                while not exhausted and len(in_flight) < pool.size and seq + len(in_flight) < opts.budget_candidates:
                    if (time.monotonic() - started) / 60.0 > opts.budget_minutes:
                        display.note(f"time budget of {opts.budget_minutes} min reached")
                        exhausted = True
                        break
                    proposal = proposer.propose()
                    if proposal is None:
                        display.note(getattr(proposer, "stop_reason", "") or "proposer has nothing left to try")
                        exhausted = True
                        break
                    cand = proposal.candidate
                    if any(p.candidate.hash == cand.hash for p, _ in in_flight.values()):
                        getattr(proposer, "withdraw", lambda _p: None)(proposal)   # already being judged
                        continue
                    store.save_candidate(cand)
                    display.start(next_key, cand)
                    in_flight[next_key] = (proposal, incumbent.record["candidate_hash"] if incumbent else None)
                    pool.submit(next_key, cand, incumbent.candidate if incumbent else None)
                    next_key += 1
                if not in_flight:
                    break
                for key, verdict in pool.results(timeout=1.0):
                    proposal, timed_against = in_flight.pop(key)
                    cand = proposal.candidate
                    # the candidate's template's space: its buckets decide the objective and the promotion
                    tspace = space.of(proposal.meta.get("template") or opts.template)
                    objective = objective_of(verdict, opts.backend, tuple(b.name for b in op.baselines),
                                             tspace.buckets or None)
                    store.record_evaluation(run_id, seq, verdict, objective)
                    proposer.feedback(proposal, verdict, objective)
                    _remember(store, opts, run_id, cand, verdict, incumbent)
                    display.add(seq, verdict, cand)
                    seq += 1
                    now_against = incumbent.record["candidate_hash"] if incumbent else None
                    if now_against != timed_against and verdict["status"] == "accepted" and opts.backend == "cuda":
                        display.note(f"keep baseline: {cand.hash[:10]} was timed against a baseline promoted over "
                                     "since (another worker's promotion); not promoted")
                        continue
                    dec = promotion_decision(opts, tspace, cand, verdict, incumbent)
                    if dec is not None:
                        display.note(("PROMOTE " if dec.promote else "keep baseline: ") + cand.hash[:10] + " " +
                                     dec.reason())
                        if dec.promote:
                            incumbent = _promote(store, opts, run_id, op, tspace, cand, verdict, dec, env,
                                                 template=proposal.meta.get("template"))
                            promoted.append({"candidate": cand.hash, "path": str(incumbent.path)})
                for n in pool.notes():
                    display.note(n)
    except KeyboardInterrupt:
        status = "interrupted"
    except WorkerError as e:
        status = "interrupted"
        display.note(f"stopped: {e}")
    finally:
        pool.close()
    summary = summarize(store, run_id, opts, promoted)
    if skipped:
        summary["skipped_templates"] = skipped
    if hasattr(proposer, "summary"):  # LLM proposers: spending, stop reason, which origin won
        summary["proposer"] = proposer.summary()
    store.finish_run(run_id, status, summary)
    store.close()
    return summary


def promotion_decision(opts: SearchOptions, space, cand, verdict: dict, incumbent) -> promote.Decision | None:
    """The promotion rule for one evaluated candidate; None where promotion does not apply (interpreter, no target,
    not accepted). The locked kernel re-proposed (same hash) is never promoted over itself, whatever its timing, and
    a candidate whose template claims fewer buckets than the locked kernel serves never replaces it (the lock holds
    one kernel a target and op: the other buckets would lose theirs)."""
    if verdict["status"] != "accepted" or opts.backend != "cuda" or not opts.target:
        return None
    if incumbent is not None and cand.hash == incumbent.record["candidate_hash"]:
        return promote.Decision(False, {"all": "the locked kernel itself"}, rule="beat incumbent")
    served = sorted({s["bucket"] for s in incumbent.record.get("shapes", [])} - set(space.buckets)) if incumbent else []
    if served:   # one kernel a target and op: promoting this one would leave those buckets without a verified kernel
        return promote.Decision(False, {"all": f"the locked kernel also serves {', '.join(served)}, which template "
                                                f"{space.template} does not claim"}, rule="beat incumbent")
    return promote.decide(verdict, space.buckets, incumbent is not None,
                          tuple(b.name for b in get_op_group(space.op).baselines))


def _promote(store, opts, run_id, op, space, cand, verdict, dec, env, template: str | None = None):
    """``template``: the one the candidate came from (a mixed space's proposal says; default the space's)."""
    template = template or space.template
    record = promote.build_record(cand=cand, op_group=op, verdict=verdict, decision=dec, env=env, space=space,
                                  run_id=run_id, reference_sha=reference_source_sha256(opts.op), proxy=opts.proxy,
                                  seed=opts.seed, proposer=opts.proposer, template=template, command=opts.command)
    path = write_record(opts.root, cand, template, record, target=opts.target)
    locked = not opts.proxy
    if locked:
        lock_kernel(opts.root, opts.target, opts.op, path)
    store.record_promotion(run_id, opts.op, opts.target, cand.hash, str(path), locked)
    from rsi.verified import VerifiedKernel

    return VerifiedKernel(op=opts.op, path=path, record=record, source=cand.source)


def _remember(store: Store, opts: SearchOptions, run_id: str, cand: Candidate, verdict: dict, incumbent) -> None:
    """Proposer memory across runs and op groups: failure signatures and slow->fast pairs."""
    if verdict["status"] != "accepted":
        store.remember(opts.op, "failure", verdict["stage"], {"reason": verdict["reason"][:300],
                                                              "config": dict(cand.config), "candidate": cand.hash},
                       run_id)
        return
    for row in verdict.get("timings", []):
        best = row["baselines"].get("best") or row["baselines"].get("compile")
        if best and row["p50_us"] < best["p50_us"]:
            store.remember(opts.op, "slow_fast", row["bucket"], {
                "slow": incumbent.record["candidate_hash"] if incumbent else "torch.compile",
                "fast": cand.hash, "slow_us": best["p50_us"], "fast_us": row["p50_us"], "config": dict(cand.config)},
                run_id)


def summarize(store: Store, run_id: str, opts: SearchOptions, promoted: list[dict]) -> dict[str, Any]:
    evals = store.evaluations(run_id)
    accepted = [e for e in evals if e["status"] == "accepted"]
    best = None
    if accepted and opts.backend == "cuda":
        best_e = min(accepted, key=lambda e: e["objective"] if e["objective"] is not None else 1e9)
        best = {"candidate": best_e["candidate"], "objective": best_e["objective"],
                "config": store.load_candidate(best_e["candidate"]).config,
                "per_shape": [{"bucket": r["bucket"], "p50_us": r["p50_us"], "pct_copy": r["pct_copy"],
                               "late": r.get("late", 0), "n": r.get("n", 0),
                               **{f"vs_{k}": v["speedup"] for k, v in r["baselines"].items()}}
                              for r in best_e["verdict"]["timings"]]}
    elif accepted:
        best_e = accepted[0]
        best = {"candidate": accepted[0]["candidate"], "config": store.load_candidate(accepted[0]["candidate"]).config,
                "per_shape": "timing not measured (interpreter)"}
    if best is not None:
        best["approximate"] = approximate_label(best_e["verdict"].get("tolerance", {}))
    all_promos = store.promotions(run_id)
    reasons: dict[str, int] = {}
    for e in evals:
        if e["status"] != "accepted":
            reasons[e["stage"]] = reasons.get(e["stage"], 0) + 1
    return {"run_id": run_id, "op": opts.op, "backend": opts.backend, "target": opts.target, "proxy": opts.proxy,
            "candidates": len(evals), "accepted": len(accepted), "rejected_by_stage": reasons, "best": best,
            "promoted": [{"candidate": p["candidate"], "record": p["record_path"], "locked": bool(p["locked"])}
                         for p in all_promos]}
