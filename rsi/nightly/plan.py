"""What a nightly runs: its options and its phases, each one exact ``python -m rsi ...`` command.

Phases, in order: ``verify:<op>`` (``rsi verify --op-group <op>`` for every op group locked for the target; on the
CPU the judge runs the Triton interpreter: correctness only, nothing timed), ``bench:<op>`` (``rsi bench``, GPU only:
on the CPU the phase is skipped, since bench refuses to run without CUDA), ``pipeline:<route>`` (``rsi
run-pipeline``: the two-stage route with a warm-up and ``repeat`` requests, then the single-stage route; full size
on a GPU, tiny on the CPU) and, with ``--search``, ``search:<op>`` (``rsi search`` on a scratch copy of the lock
under DIR/search-root, so that a nightly never changes the product's lock). One phase per op group so that a killed
nightly resumes at the op group it was in.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

ROUTES = ("two-stage", "single-stage")
PHASE_KINDS = ("verify", "bench", "pipeline", "search")
PROMPT = "a red fox runs through fresh snow at dawn, wind noise"
SIZES = {  # route -> size -> run-pipeline arguments; the GPU's are the product's canvases at the full model size
    "two-stage": {"full": ["--config", "full", "--resolution", "1344x768", "--two-stage"],
                  "tiny": ["--config", "tiny", "--resolution", "128x64", "--duration", "0.5", "--two-stage"]},
    "single-stage": {"full": ["--config", "full", "--resolution", "672x384", "--stage1-only"],
                     "tiny": ["--config", "tiny", "--resolution", "64x32", "--duration", "0.2", "--stage1-only"]},
}


@dataclass
class Options:
    out: Path
    root: str | None = None              # --root as given (None: the commands find the lock as rsi does)
    db: str = ".rsi/rsi.db"
    gpu: str | None = None                # target name; None on the CPU
    cuda: bool = False
    ops: list[str] = field(default_factory=list)      # op groups for verify, bench, search
    kinds: tuple[str, ...] = ("verify", "bench", "pipeline")
    routes: tuple[str, ...] = ROUTES
    size: str = "tiny"
    reps: int = 30                        # judge and bench repetitions
    repeat: int = 9                       # two-stage requests: first + 8 steady (8 pairs, 7 A/A pairs: the minimum)
    steps: int = 8                        # single-stage denoising steps (8 step samples, 7 A/A pairs)
    mux: bool = True                      # False: run-pipeline --no-mux (a machine without PyAV)
    prompt: str = PROMPT
    budget: str = "4,10m"                 # search budget per op group
    baseline: str = "last"
    history: int = 10
    phase_timeout_s: float = 3600.0
    argv: list[str] = field(default_factory=list)     # the nightly's own command line, for repro.sh


@dataclass(frozen=True)
class Phase:
    name: str                              # "verify:modulate", "pipeline:two-stage"
    kind: str
    argv: tuple[str, ...]                  # the exact command (argv[0] is this Python)
    raw: Path                              # the JSON the command writes
    skip: str = ""                         # non-empty: not run on this machine, and why

    @property
    def file(self) -> Path:
        return Path("phases") / (self.name.replace(":", "-") + ".json")


def _rsi(o: Options) -> list[str]:
    base = [sys.executable, "-m", "rsi"]
    if o.root is not None:
        base += ["--root", o.root]
    return base


def locked_ops(o: Options) -> list[str]:
    """Op groups among ``o.ops`` with a locked kernel for the target (every target's on the CPU, as rsi verify)."""
    from rsi.verified import find_root, read_lock

    root, _ = find_root(o.root)
    targets = read_lock(root).get("targets", {})
    have = set(targets.get(o.gpu, {})) if o.cuda else {op for t in targets.values() for op in t}
    return [op for op in o.ops if op in have]


def phases(o: Options) -> list[Phase]:
    work = o.out / "work"
    gpu = ["--gpu", o.gpu] if o.gpu else []
    out: list[Phase] = []
    if "verify" in o.kinds:
        for op in locked_ops(o):
            raw = work / f"verify-{op}.json"
            out.append(Phase(f"verify:{op}", "verify", (*_rsi(o), "verify", "--op-group", op, *gpu, "--reps",
                                                        str(o.reps), "--out", str(raw)), raw))
    if "bench" in o.kinds:
        for op in o.ops:
            raw = work / f"bench-{op}.json"
            skip = "" if o.cuda else "rsi bench times on a CUDA GPU and this machine has none"
            out.append(Phase(f"bench:{op}", "bench", (*_rsi(o), "bench", "--op-group", op, *gpu, "--reps",
                                                      str(o.reps), "--out", str(raw)), raw, skip))
    if "pipeline" in o.kinds:
        for route in o.routes:
            raw = work / f"pipeline-{route}.json"
            extra = (["--warmup", "--repeat", str(o.repeat)] if route == "two-stage" else ["--steps", str(o.steps)])
            extra += [] if o.mux else ["--no-mux"]
            out.append(Phase(f"pipeline:{route}", "pipeline",
                             (*_rsi(o), "run-pipeline", "--prompt", o.prompt, *SIZES[route][o.size], *extra,
                              "--kernels", "verified", "--out", str(work / f"pipeline-{route}.mp4"),
                              "--json", str(raw)), raw))
    if "search" in o.kinds:
        sroot = o.out / "search-root"
        for op in o.ops:
            raw = work / f"search-{op}.json"
            out.append(Phase(f"search:{op}", "search",
                             (sys.executable, "-m", "rsi", "--root", str(sroot), "--db", str(sroot / "rsi.db"),
                              "search", "--op-group", op, *gpu, "--budget", o.budget, "--quiet", "--summary-out",
                              str(raw)), raw))
    return out
