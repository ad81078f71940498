"""Command line: ``rsi <verb>`` (also ``python -m rsi``). Exit codes: 0 ok, 1 a check failed, 2 usage error."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

console = Console()


class UsageError(Exception):
    pass


def parse_budget(text: str) -> tuple[int | None, float | None]:
    """``20`` -> 20 candidates; ``30m`` -> 30 minutes; ``20,30m`` -> both."""
    cands, minutes = None, None
    for part in text.split(","):
        part = part.strip()
        if re.fullmatch(r"\d+", part):
            cands = int(part)
        elif re.fullmatch(r"\d+(\.\d+)?m", part):
            minutes = float(part[:-1])
        else:
            raise UsageError(f"--budget {text!r}: use N (candidates), Nm (minutes) or N,Mm (both), e.g. --budget 20,30m")
    if cands is not None and cands < 1:
        raise UsageError("--budget needs at least 1 candidate")
    if minutes is not None and minutes <= 0:
        raise UsageError(f"--budget {text!r}: the time budget must be more than 0 minutes")
    return cands, minutes


def seed_arg(text: str) -> int:
    """argparse type for --seed: an integer in [0, 2**63) (usage error, exit 2, otherwise)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= v < 2**63:
        raise argparse.ArgumentTypeError(f"{v} is outside [0, 2**63)")
    return v


def check_gpu(gpu: str | None, backend: str) -> None:
    """An unknown --gpu is a usage error everywhere; on the GPU it must also be this machine's target."""
    if gpu is None:
        return
    from rsi.targets import TargetError, get_target, resolve_target

    try:
        get_target(gpu)
        if backend == "cuda":
            resolve_target(gpu, allow_proxy=False)
    except TargetError as e:
        raise UsageError(str(e)) from None


def _backend(requested: str) -> str:
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "interpret"
    if requested == "cuda" and not torch.cuda.is_available():
        raise UsageError("--backend cuda needs a CUDA GPU and none is visible; use --backend interpret "
                         "(Triton interpreter, correctness only) on this machine")
    return requested


def command_line() -> str:
    """This invocation as a shell command line (records and JSON name the exact command that produced them)."""
    return "rsi " + " ".join(shlex.quote(x) for x in sys.argv[1:])


def cmd_search(a: argparse.Namespace) -> int:
    from rsi.refs import op_names
    from rsi.search.display import print_summary
    from rsi.search.loop import SearchError, SearchOptions, run_search
    from rsi.targets import TargetError, resolve_target

    if a.op_group == "next":
        from rsi.nightly.next import resolve_next

        a.op_group = resolve_next(a, console)
    ops = op_names() if a.op_group == "all" else [a.op_group]
    for op in ops:
        if op not in op_names():
            raise UsageError(f"unknown --op-group {op!r}; known: {', '.join(op_names())}, all")
    backend = _backend(a.backend)
    cands, minutes = parse_budget(a.budget) if a.budget is not None else (None, None)
    explicit = tuple(n for n, v in (("budget_candidates", cands), ("budget_minutes", minutes),
                                    ("candidate_timeout_s", a.candidate_timeout)) if v is not None)
    if a.workers < 1:
        raise UsageError(f"--workers {a.workers}: at least 1")
    first = tuple(_parse_config(c) for c in a.first or ())
    if first and (a.proposer != "offline" or a.resume):
        raise UsageError("--first is for a new run of the offline proposer (it queues configs before the heuristic)")
    if backend == "cuda" and a.workers > 1 and not a.ray_address:
        import torch

        if torch.cuda.device_count() < a.workers:
            raise UsageError(f"--workers {a.workers}: {torch.cuda.device_count()} GPU(s) here (one judge per GPU); "
                             "use --ray-address for a cluster")
    if a.ray_address:
        try:
            import ray  # noqa: F401
        except ImportError:
            raise UsageError("--ray-address needs Ray: pip install -e '.[ray]'; without it, --workers N runs local "
                             "processes") from None
    target_name = None
    proxy = False
    if backend == "cuda":
        try:
            target, _local, proxy = resolve_target(a.gpu, a.allow_proxy)
        except TargetError as e:
            raise UsageError(str(e)) from None
        if target is None:
            raise UsageError("this GPU is not in the target registry; pass --gpu <target> --allow-proxy to measure "
                             "it as a labelled proxy (`rsi env` lists targets)")
        target_name = target.name
    elif a.gpu:
        check_gpu(a.gpu, backend)  # an unknown target is a usage error on every backend
        console.print(f"[yellow]note:[/] --backend interpret checks correctness only; --gpu {a.gpu} is not measured "
                      "and nothing is promoted")
    if a.dry_run:
        console.print(f"dry run: would search {', '.join(ops)} on backend {backend}, target {target_name}, "
                      f"proposer {a.proposer}, template {a.template or 'every one the space declares'}, budget "
                      f"{cands} candidates / {minutes} min")
        return 0
    code = 0
    for op in ops:
        opts = SearchOptions(op=op, backend=backend, target=target_name, proxy=proxy, proposer=a.proposer,
                             budget_candidates=cands or 20, budget_minutes=minutes or 60.0, seed=a.seed,
                             root=a.root, db=a.db, resume=a.resume,
                             candidate_timeout_s=a.candidate_timeout or 600.0, explicit=explicit,
                             unsafe_no_sandbox=a.unsafe_no_sandbox,
                             timing={"warmup": a.warmup, "reps": a.reps, "input_sets": 2}, quiet=a.quiet,
                             workers=a.workers, ray_address=a.ray_address, template=a.template,
                             command=command_line(), first=first,
                             proposer_args={"model": a.model, "base_url": a.base_url, "inbox": a.inbox,
                                            "transcript": a.transcript, "max_calls": a.max_calls,
                                            "max_cost_usd": a.max_cost, "hybrid_tune": a.hybrid_tune})
        try:
            summary = run_search(opts)
        except SearchError as e:
            raise UsageError(str(e)) from None
        print_summary(summary, console)
        if a.summary_out:
            out = Path(a.summary_out.replace("{op}", op))
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n")
            console.print(f"summary written to {out}")
        if summary["accepted"] == 0:
            code = 1
    return code


def cmd_verify(a: argparse.Namespace) -> int:
    from rsi.refs import op_names
    from rsi.verify import verify_all

    if a.op_group != "all" and a.op_group not in op_names():
        raise UsageError(f"unknown --op-group {a.op_group!r}; known: {', '.join(op_names())}, all")
    backend = _backend(a.backend)
    check_gpu(a.gpu, backend)
    if a.dry_run:
        from rsi.verified import read_lock

        lock = read_lock(a.root).get("targets", {})
        for tgt, ops in lock.items():
            if a.gpu and tgt != a.gpu:
                continue
            for op, entry in sorted(ops.items()):
                if a.op_group not in ("all", op):
                    continue
                console.print(f"would verify {tgt} {op}: {entry['kernel']} (backend {backend})")
        return 0
    t0 = time.perf_counter()
    ops = None if a.op_group == "all" else [a.op_group]
    if a.workers < 1:
        raise UsageError(f"--workers {a.workers}: at least 1")
    from rsi.search.workers import WorkerError

    try:
        results = verify_all(root=a.root, target=a.gpu, backend=backend, timeout_s=a.candidate_timeout, reps=a.reps,
                             ops=ops, workers=a.workers, ray_address=a.ray_address)
    except WorkerError as e:
        raise UsageError(str(e)) from None
    if a.out:
        from rsi import env as envmod

        out = Path(a.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"command": command_line(),
                                   "env": envmod.capture(), "wall_s": time.perf_counter() - t0,
                                   "results": results}, indent=2, sort_keys=True, default=str) + "\n")
    t = Table(title="rsi verify")
    for c in ("target", "op", "kernel", "verdict", "reason"):
        t.add_column(c, overflow="fold")
    for r in results:
        t.add_row(r["target"], r["op"], r["kernel"], r["status"], r["reason"][:120])
    console.print(t)
    if not results:
        console.print("no verified kernels are locked" + (f" for {a.gpu}" if a.gpu else ""))
    return 0 if all(r["status"] in ("accepted", "skipped") for r in results) else 1


def cmd_show(a: argparse.Namespace) -> int:
    from rsi.show import show

    return show(a, console)


def cmd_env(a: argparse.Namespace) -> int:
    from rsi import env as envmod
    from rsi.targets import TARGETS, detect_local

    e = envmod.capture()
    local = detect_local()
    t = Table(title="environment")
    t.add_column("key")
    t.add_column("value")
    for k, v in e.items():
        t.add_row(k, str(v))
    t.add_row("local target", local.name if local else "none (Triton interpreter backend)")
    console.print(t)
    t = Table(title="GPU targets")
    for c in ("target", "arch", "cc", "memory GB", "HBM TB/s", "bf16 TFLOP/s", "fp8 TFLOP/s", "features"):
        t.add_column(c)
    for tg in TARGETS.values():
        t.add_row(tg.name, tg.arch, "{}.{}".format(*tg.compute_capability), str(tg.memory_gb), str(tg.hbm_tbps),
                  str(tg.bf16_tflops), str(tg.fp8_tflops), ",".join(sorted(tg.features)))
    console.print(t)
    if a.json:
        print(json.dumps(e, indent=2, default=str))
    return 0


def _parse_config(text: str) -> dict[str, int | str]:
    """'BN=128,OVERLAP=1' -> {'BN': 128, 'OVERLAP': 1} (integers where they parse, else strings; 'EVICT=' is the
    empty string)."""
    out: dict[str, int | str] = {}
    for part in text.split(","):
        k, eq, v = (x.strip() for x in part.partition("="))
        if not eq or not k:
            raise UsageError(f"--first {text!r}: expected K=V,K=V (axis names of the template's space)")
        if k in out:
            raise UsageError(f"--first {text!r}: {k} given twice")
        try:
            out[k] = int(v)
        except ValueError:
            out[k] = v
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rsi", description="Recursive kernel search for MiniMax-H3 under a fail-closed "
                                                        "contract.")
    p.add_argument("--root", default=None, help="workspace root holding candidates/, verified_kernels/ (default: .; "
                                                "run-pipeline and bench read the lock from --root, else $RSI_ROOT, "
                                                "else ./verified_kernels, else the installed package's)")
    p.add_argument("--db", default=".rsi/rsi.db", help="SQLite database, relative to --root (default: .rsi/rsi.db)")
    sub = p.add_subparsers(dest="verb", required=True)

    s = sub.add_parser("search", help="search realizations of an op group and promote verified kernels")
    s.add_argument("--op-group", required=True, help="op group to search (e.g. swiglu), 'all', or 'next': the op "
                                                     "group the latest rsi nightly ranked first (pipeline time x "
                                                     "headroom to the physical limit)")
    s.add_argument("--gpu", default=None, help="GPU target the records are for (must match this GPU; see rsi env)")
    s.add_argument("--allow-proxy", action="store_true", help="measure on a different GPU, label every record "
                                                              "proxy, never lock it")
    s.add_argument("--backend", default="auto", choices=["auto", "cuda", "interpret"],
                   help="cuda (time on the GPU), interpret (Triton interpreter on the CPU: correctness only, nothing "
                        "promoted); auto picks cuda when a GPU is visible")
    s.add_argument("--proposer", default="offline", choices=["offline", "openai", "anthropic", "openai-compatible",
                                                               "agent", "replay"],
                   help="where candidates come from (default offline: Optuna TPE over Triton templates)")
    s.add_argument("--template", default=None,
                   help="search only this template of the op group's space: its main (Triton) one or one its TOML "
                        "declares under [<op>.templates], e.g. gelu_tanh_cute (CuTe DSL: GPU and pip install -e "
                        "'.[cute]'); default: every template that can run here (docs/cute.md). A template whose "
                        "table lists its own buckets is promoted on those (attention_cute: h3_full, h3_per_rank)")
    s.add_argument("--model", default=None, help="model name for LLM proposers")
    s.add_argument("--base-url", default=None, help="endpoint for --proposer openai-compatible")
    s.add_argument("--inbox", default=None, help="folder for --proposer agent (prompts out, replies in)")
    s.add_argument("--transcript", default=None, help="transcript to replay (--proposer replay) or to write (LLM and "
                                                      "agent proposers; default .rsi/transcripts/<run>.jsonl)")
    s.add_argument("--max-calls", type=int, default=None, help="LLM/agent proposers: most model calls (default 20)")
    s.add_argument("--max-cost", type=float, default=None, help="LLM proposers: most US$ spent (default 5; prices in "
                                                                 "rsi/llm/prices.toml)")
    s.add_argument("--hybrid-tune", type=int, default=None, help="LLM/agent proposers: optimizer trials on each "
                                                                  "accepted structure's parameters before the next "
                                                                  "call (default 4, 0: none)")
    s.add_argument("--budget", default=None, help="N candidates, Nm minutes, or N,Mm (default 20 candidates, "
                                                  "60 min; a resumed run keeps its own unless given)")
    s.add_argument("--resume", nargs="?", const="latest", default=None,
                   help="continue the latest unfinished run of this op group (or the run id given)")
    s.add_argument("--seed", type=seed_arg, default=0, help="seed of the proposer (default 0)")
    s.add_argument("--first", action="append", metavar="K=V,...",
                   help="offline proposer: judge this config first, before its template's heuristic (repeatable; "
                        "axes not named take the heuristic's values; with several templates they take turns), e.g. a "
                        "config a sweep or probe measured; the record's command line says so")
    s.add_argument("--candidate-timeout", type=float, default=None,
                   help="seconds the candidate's process may take to answer one request of the judge (its compile, "
                        "a call, a timing loop) before it is killed and rejected (default 600); the judge's own "
                        "work (references, oracles, baselines) is not counted, so a candidate's verdict can take "
                        "longer: bound the whole search with --budget")
    s.add_argument("--unsafe-no-sandbox", action="store_true",
                   help="judge LLM/agent candidates even where the producer sandbox (bubblewrap) is unavailable; "
                        "every verdict and record then says so")
    s.add_argument("--warmup", type=int, default=5, help="warm-up calls per implementation (default 5)")
    s.add_argument("--reps", type=int, default=40, help="timed repetitions per implementation (default 40)")
    s.add_argument("--summary-out", default=None, help="also write the closing summary as JSON here ({op} expands)")
    s.add_argument("--quiet", action="store_true", help="no live table")
    s.add_argument("--workers", type=int, default=1,
                   help="judge N candidates at once, each worker its own sandboxed judge (and GPU on CUDA): local "
                        "processes, or Ray actors with --ray-address (default 1: in this process)")
    s.add_argument("--ray-address", default=None,
                   help="run the --workers judges as Ray actors (num_gpus=1 each on CUDA) on a Ray cluster: auto, "
                        "HOST:PORT, or local (start one here); needs pip install -e '.[ray]'")
    s.add_argument("--dry-run", action="store_true", help="check arguments and target, run nothing")
    s.set_defaults(fn=cmd_search)

    v = sub.add_parser("verify", help="re-check locked verified kernels on this GPU (correctness, timing, physics)")
    v.add_argument("--gpu", default=None, help="target whose lock to check (default: the local GPU's)")
    v.add_argument("--backend", default="auto", choices=["auto", "cuda", "interpret"],
                   help="interpret re-checks correctness on small shapes only")
    v.add_argument("--candidate-timeout", type=float, default=600.0,
                   help="seconds a kernel's process may take to answer one request of the judge (default 600)")
    v.add_argument("--reps", type=int, default=30, help="timed repetitions per implementation (default 30)")
    v.add_argument("--dry-run", action="store_true", help="list what would be verified")
    v.add_argument("--workers", type=int, default=1, help="judge N kernels at once (local processes, one GPU each; "
                                                            "or Ray actors with --ray-address; default 1)")
    v.add_argument("--ray-address", default=None, help="auto, HOST:PORT or local: the --workers judges as Ray actors")
    v.add_argument("--op-group", default="all", help="verify only this op group's locked kernel (default all)")
    v.add_argument("--out", default=None, help="also write the results (with the judge's wall time per kernel) as "
                                               "JSON here")
    v.set_defaults(fn=cmd_verify)

    w = sub.add_parser("show", help="runs, candidates and verdicts as tables")
    w.add_argument("--run", default=None, help="show one run's candidates and verdicts")
    w.add_argument("--candidate", default=None, help="show one candidate (hash prefix): config, verdicts, source")
    w.add_argument("--ops", action="store_true", help="list op groups with their tolerance classes and shapes")
    w.add_argument("--limit", type=int, default=20, help="rows (default 20)")
    w.add_argument("--dry-run", action="store_true", help="same as without (show changes nothing)")
    w.set_defaults(fn=cmd_show)

    e = sub.add_parser("env", help="this machine, its GPU target and the target registry")
    e.add_argument("--json", action="store_true", help="also print the environment as JSON")
    e.add_argument("--dry-run", action="store_true", help="same as without")
    e.set_defaults(fn=cmd_env)

    from rsi.bench import add_parser as add_bench
    from runtime.attention_quality import add_parser as add_attention_quality
    from runtime.cli import add_parser as add_run_pipeline

    add_bench(sub)
    add_run_pipeline(sub)
    add_attention_quality(sub)
    from rsi.nightly.cli import add_parser as add_nightly

    add_nightly(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    a = parser.parse_args(argv)
    a.root_explicit, a.root = a.root, a.root or "."
    a.argv = list(argv) if argv is not None else sys.argv[1:]
    try:
        return a.fn(a)
    except (UsageError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
