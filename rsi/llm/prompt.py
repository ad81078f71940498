"""Prompt assembly for LLM and agent proposers: a pure function of a :class:`PromptContext`.

One prompt is one self-contained message (no chat history): the contract, the reference and its math, the shapes,
the GPU's facts, the current best with its timings, the last attempts with their verdicts, and memory from earlier
runs. The same evidence gives the same text byte for byte (no clocks, no run ids), which is what lets the response
cache serve a resumed run. The contract's rules are read from ``rsi.harness.static`` and the op group, so the prompt
cannot drift from what the harness enforces.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rsi.contract import ENTRY_POINT, OpGroup, canonical_json, sha256_text
from rsi.harness import static
from rsi.llm.reply import MAX_TUNABLES, MAX_VALUES, TUNABLE_NAME

# SM counts from the datasheets (rsi.targets has no SM count); a CUDA run uses the count measured in its env
SM_COUNT = {"gb200": 148, "b200": 148, "h200": 132, "h100": 132, "gb10": 48, "rtx5090": 170}
ERROR_CHARS = 900
SOURCE_LINES = 160


@dataclass(frozen=True)
class Prompt:
    system: str
    user: str

    @property
    def chars(self) -> int:
        return len(self.system) + len(self.user)

    @property
    def sha256(self) -> str:
        return sha256_text(canonical_json({"system": self.system, "user": self.user}))

    def as_markdown(self) -> str:
        return f"# Instructions\n\n{self.system}\n\n---\n\n{self.user}"


@dataclass(frozen=True)
class GpuFacts:
    backend: str                      # "cuda" | "interpret"
    target: str | None = None
    arch: str = ""
    compute_capability: str = ""
    sm_count: int | None = None
    sm_source: str = ""
    hbm_tbps: float | None = None
    bf16_tflops: float | None = None
    features: tuple[str, ...] = ()
    copy_gbps: float | None = None    # measured in this run (None: not yet, or interpreter)


@dataclass(frozen=True)
class ShapeTime:
    bucket: str
    p50_us: float
    gbps: float | None = None
    pct_copy: float | None = None
    speedups: Mapping[str, float] = field(default_factory=dict)  # baseline -> baseline time / this time


@dataclass(frozen=True)
class Best:
    label: str
    source: str
    config: Mapping[str, Any]
    times: tuple[ShapeTime, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class Attempt:
    label: str                        # "reply 3", "tuning of reply 2", ...
    config: Mapping[str, Any]
    status: str                       # accepted | rejected
    stage: str
    reason: str
    error: str = ""                   # trimmed compile error / traceback lines of the candidate
    stats: Mapping[str, Any] = field(default_factory=dict)  # correctness error statistics when it failed on them
    times: tuple[ShapeTime, ...] = ()
    objective: float | None = None


@dataclass(frozen=True)
class Memory:
    slow_fast: tuple[Mapping[str, Any], ...] = ()          # rsi_memory "slow_fast" rows of other runs
    failures: tuple[tuple[str, int], ...] = ()             # (signature, count) of other runs' rejections


@dataclass(frozen=True)
class PromptContext:
    op: OpGroup
    reference_source: str
    gpu: GpuFacts
    best: Best | None = None
    starting_point: str = ""          # the op group's template, shown when there is no best yet
    attempts: tuple[Attempt, ...] = ()
    stage_counts: Mapping[str, int] = field(default_factory=dict)  # this run's rejections by stage
    memory: Memory = Memory()
    last_code: tuple[str, str] | None = None  # (label, source) of the latest rejected reply, so it can be fixed


# ------------------------------------------------------------------------------------------------ evidence helpers
def gpu_facts(target_name: str | None, backend: str, run_env: Mapping[str, Any],
              copy_bw: Mapping[str, Any] | None) -> GpuFacts:
    if backend != "cuda" or target_name is None:
        return GpuFacts(backend=backend)
    from rsi.targets import get_target

    t = get_target(target_name)
    measured = run_env.get("sm_count")
    return GpuFacts(backend=backend, target=t.name, arch=t.arch, compute_capability="{}.{}".format(*t.compute_capability),
                    sm_count=measured or SM_COUNT.get(t.name), sm_source="measured" if measured else "datasheet",
                    hbm_tbps=t.hbm_tbps, bf16_tflops=t.bf16_tflops, features=tuple(sorted(t.features)),
                    copy_gbps=(copy_bw or {}).get("gbps"))


def times_from_verdict(rows: Sequence[Mapping[str, Any]]) -> tuple[ShapeTime, ...]:
    return tuple(ShapeTime(r["bucket"], r["p50_us"], r.get("gbps"), r.get("pct_copy"),
                           {k: b["speedup"] for k, b in r.get("baselines", {}).items() if "speedup" in b})
                 for r in rows)


def times_from_record(record: Mapping[str, Any]) -> tuple[ShapeTime, ...]:
    return tuple(ShapeTime(r["bucket"], r["p50_us"], r.get("gbps"), r.get("pct_copy"),
                           {k: v["speedup"] for k, v in r.get("vs", {}).items() if k != "best"})
                 for r in record.get("timings", []))


def trim_error(details: Mapping[str, Any], limit: int = ERROR_CHARS) -> str:
    """The candidate's own frames and the final exception lines of a traceback, worker paths removed."""
    tb = str(details.get("traceback", ""))
    if not tb:
        return ""
    lines = tb.splitlines()
    keep: list[str] = []
    for i, line in enumerate(lines):
        if "rsi_kernel_" in line and line.strip().startswith("File"):  # the producer's copy of the candidate
            keep.append(re.sub(r'File ".*?rsi_kernel_\w+\.py"', 'File "candidate.py"', line.strip()))
            if i + 1 < len(lines):
                keep.append("    " + lines[i + 1].strip())
    errors = [ln.strip() for ln in lines if re.match(r"^[A-Za-z_.]+(Error|Exception)\b", ln.strip())]
    text = "\n".join(keep + errors[-3:])
    return text if len(text) <= limit else text[: limit // 2] + "\n...\n" + text[-limit // 2:]


def failure_signature(stage: str, reason: str) -> str:
    """Group rejections that differ only in numbers, shapes or hashes."""
    reason = re.sub(r"\bat shape \S+( layout \d+)?( case \S+)?", "", reason)
    reason = re.sub(r"0x[0-9a-f]+|\b[0-9a-f]{10,}\b|\d+(\.\d+)?(e-?\d+)?", "N", reason)
    return f"[{stage}] {reason.strip()[:140]}"


# ------------------------------------------------------------------------------------------------------- sections
def _fmt_config(config: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in config.items()) or "(no config)"


def _fmt_times(times: Sequence[ShapeTime]) -> list[str]:
    out = []
    for t in times:
        bw = f", {t.gbps:.0f} GB/s = {t.pct_copy:.1f}% of copy bandwidth" if t.gbps and t.pct_copy is not None else ""
        vs = ", ".join(f"{v:.3f}x vs {k}" for k, v in sorted(t.speedups.items()))
        out.append(f"- {t.bucket}: p50 {t.p50_us:.1f} us{bw}" + (f" ({vs})" if vs else ""))
    return out


def _block(source: str) -> str:
    lines = source.rstrip("\n").splitlines()
    if len(lines) > SOURCE_LINES:
        lines = lines[:SOURCE_LINES] + [f"# ... ({len(lines) - SOURCE_LINES} more lines)"]
    return "```python\n" + "\n".join(lines) + "\n```"


def system_text(op: OpGroup) -> str:
    names = ", ".join(op.input_names) or "*inputs"
    return "\n".join([
        (f"You are a GPU kernel engineer. You write one Triton kernel module for the op group `{op.name}`: a faster "
         "realization of a fixed reference, judged by a fail-closed harness that compiles it in an isolated process, "
         "checks it against the reference, times it against the current best and rejects anything that breaks the "
         "contract, however fast."),
        "",
        "Reply format (anything else is rejected and the reason is sent back to you):",
        ("- Exactly one fenced ```python code block holding the complete module. Explanations outside it are ignored; "
         "do not put any other code block in the reply."),
        (f"- The module defines `def {ENTRY_POINT}({names}, NAME=default, ...)`: the positional arguments are the op "
         "group's inputs, every keyword argument with a literal default is a parameter. It allocates its outputs "
         "with the kernel API (`from rsi import kernel as K`; `K.empty(shape, dtype, device)`, `K.empty_like(t)`), "
         "launches @triton.jit kernels and returns the output. The module imports only triton, triton.language and "
         "rsi.kernel (not torch)."),
        (f"- Optionally `{TUNABLE_NAME} = ((\"NAME\", (v1, v2, ...)), ...)` at module level (tuples only) declares "
         f"which parameters an optimizer may tune and their values; each default must be one of its values "
         f"(at most {MAX_TUNABLES} parameters, {MAX_VALUES} values each). Example: "
         f"`{TUNABLE_NAME} = ((\"BLOCK\", (512, 1024, 2048)), (\"num_warps\", (4, 8)))`."),
    ])


def contract_section(op: OpGroup) -> str:
    tol = op.tolerance
    doc = inspect.cleandoc(type(tol).__doc__ or "")
    bounds = ", ".join(f"{k}={v}" for k, v in tol.describe().items() if k != "class")
    return "\n".join([
        "## Contract (fixed)",
        ("You may change *how* the op is computed: tiling, program mapping, vector widths, warps and stages, "
         "eviction hints, fusion and evaluation order inside the kernel where the tolerance class allows it."),
        ("You may not change *what* is computed: the reference below is the definition; input and output shapes, "
         "dtypes and layouts are fixed; inputs must never be written."),
        "",
        ("Static checks (on the source, before anything runs). They are an allow-list: anything not listed here is "
         "rejected, and the reason says what is allowed:"),
        *static.contract_rules(),
        "",
        ("Runtime checks (isolated worker): every shape x 5 seeds plus special inputs (zeros, half-zero, huge, "
         "subnormal, NaN/Inf); inputs unchanged; two identical calls bitwise equal; outputs of the right shape, dtype "
         "and strides, aliasing no input and no earlier output. Timing interleaves the candidate with eager, "
         "torch.compile and the current best, L2 flushed before every call; a physics gate rejects bandwidth above "
         "the copy bandwidth measured in the same run, and work hidden from the timed stream."),
        "",
        f"Tolerance class `{tol.name}` ({bounds}):",
        doc,
    ])


def reference_section(ctx: PromptContext) -> str:
    op = ctx.op
    return "\n".join([
        f"## Reference `{op.name}` (the definition; its docstrings give the math)",
        f"Inputs: {', '.join(op.input_names) or '(see make_inputs)'}; notes: {op.notes or '-'}",
        _block(ctx.reference_source),
    ])


def shapes_section(ctx: PromptContext) -> str:
    op = ctx.op
    lines = ["## Shapes"]
    for s in op.shapes:
        lines.append(f"- timed `{s.name}`: {dict(s.dims)}, {op.bytes_moved(s) / 1e6:.1f} MB compulsory traffic")
    lines.append("- correctness only (awkward sizes the op admits): "
                 + "; ".join(f"`{s.name}` {dict(s.dims)}" for s in op.odd_shapes))
    if ctx.gpu.backend != "cuda":
        lines.append("- this run is judged by the Triton interpreter on the CPU on small shapes only: "
                     + "; ".join(f"`{s.name}` {dict(s.dims)}" for s in op.interp_shapes)
                     + " (masking must handle sizes that are not multiples of your block)")
    return "\n".join(lines)


def gpu_section(g: GpuFacts) -> str:
    if g.backend != "cuda" or g.target is None:
        return ("## Target GPU\nNone in this run: the Triton interpreter on the CPU judges correctness only and "
                "measures no time. Write code for NVIDIA sm90/sm100 GPUs all the same; it will be timed there later.")
    copy = f"{g.copy_gbps:.0f} GB/s" if g.copy_gbps else "not measured yet in this run (the first timed candidate " \
                                                         "measures it)"
    return "\n".join([
        f"## Target GPU `{g.target}`",
        (f"- architecture {g.arch} (compute capability {g.compute_capability}), {g.sm_count or 'unknown'} SMs "
         f"({g.sm_source})"),
        (f"- memory bandwidth {g.hbm_tbps} TB/s (datasheet); device-to-device copy bandwidth measured in this run: "
         f"{copy}"),
        f"- dense bf16 tensor-core peak {g.bf16_tflops} TFLOP/s (datasheet); features: {', '.join(g.features)}",
    ])


def best_section(ctx: PromptContext) -> str:
    b = ctx.best
    if b is None:
        if not ctx.starting_point:
            return "## Current best\nNone yet."
        return "\n".join(["## Current best",
                          ("None accepted yet in this run. The op group's parametric template, a correct starting "
                           "point:"), _block(ctx.starting_point)])
    lines = [f"## Current best: {b.label}", f"Config: {_fmt_config(b.config)}"]
    if b.note:
        lines.append(b.note)
    lines += _fmt_times(b.times) or ([] if b.note else ["- per-shape time: not measured"])
    lines.append(_block(b.source))
    return "\n".join(lines)


def attempts_section(ctx: PromptContext) -> str:
    lines = ["## Last attempts (oldest first)"]
    if not ctx.attempts:
        lines.append("None yet in this run.")
    for a in ctx.attempts:
        head = f"- {a.label} [{_fmt_config(a.config)}]: {a.status}"
        if a.status != "accepted":
            head += f" at stage `{a.stage}`: {a.reason[:400]}"
        elif a.objective is not None and a.times:
            head += f", objective {a.objective:.3f} (geomean time / best baseline; lower is better)"
        lines.append(head)
        lines += ["  " + t for t in _fmt_times(a.times)]
        if a.error:
            lines.append("  error:\n" + "\n".join("    " + ln for ln in a.error.splitlines()))
        if a.stats:
            lines.append("  error statistics: " + ", ".join(
                f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in a.stats.items()))
    if ctx.stage_counts:
        lines.append("Rejections in this run by stage: "
                     + ", ".join(f"{k}: {v}" for k, v in sorted(ctx.stage_counts.items())))
    if ctx.last_code:
        label, source = ctx.last_code
        lines += [f"The code of {label} (rejected; fix it or try another structure):", _block(source)]
    return "\n".join(lines)


def memory_section(m: Memory) -> str:
    lines = ["## Memory from earlier runs (this and other op groups)"]
    if not m.slow_fast and not m.failures:
        return "\n".join(lines + ["Nothing recorded yet."])
    if m.slow_fast:
        lines.append("Slow -> fast pairs (a candidate that beat the best of its time):")
        for p in m.slow_fast:
            lines.append(f"- {p.get('op')} `{p.get('key')}`: {p.get('slow_us', 0):.1f} us -> {p.get('fast_us', 0):.1f} "
                         f"us with config {_fmt_config(p.get('config', {}))}")
    if m.failures:
        lines.append("Failure signatures (count: signature):")
        lines += [f"- {n}x {sig}" for sig, n in m.failures]
    return "\n".join(lines)


def task_section() -> str:
    return ("## Task\nPropose one new candidate that is faster than the current best on the timed shapes while "
            "passing every check. Prefer a different structure to another block size: the optimizer tunes the "
            f"parameters you declare in {TUNABLE_NAME} after your reply is judged. Reply with exactly one ```python "
            "block.")


def build_prompt(ctx: PromptContext) -> Prompt:
    user = "\n\n".join([contract_section(ctx.op), reference_section(ctx), shapes_section(ctx), gpu_section(ctx.gpu),
                        best_section(ctx), attempts_section(ctx), memory_section(ctx.memory), task_section()])
    return Prompt(system=system_text(ctx.op), user=user + "\n")
