"""A run-pipeline request and everything checked before any work: flags, shapes, output paths, the checkpoint and
LoRA headers against the model's shapes (on the meta device), and the sampling schedule. A bad request raises
RequestError naming the flag, key or file; nothing has been built, loaded or sampled at that point."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from runtime.checkpoint import CheckpointError, check_dit
from runtime.config import CONFIGS, get_config
from runtime.kernels import MODES as KERNEL_MODES
from runtime.lora import MODES as LORA_MODES
from runtime.lora_format import QKV_LAYOUTS, AdapterError, check_adapter
from runtime.model import build_dit
from runtime.packing import RequestError, ShapePlan, canvas_for_aspect, plan_request
from runtime.release import release_metadata, video_vae_stats
from runtime.sampler import AUDIO_SHIFT, VIDEO_SHIFT, Schedule, make_schedule

TEXT_ENCODERS = ("hash", "qwen3vl")
SCHEDULES = ("auto", "base", "fasth3")
DEFAULT_STEPS = 4


@dataclass
class Request:
    prompt: str
    duration_s: float = 5.0
    width: int = 672
    height: int = 384
    aspect: tuple[float, float] | None = None    # set: width x height come from the canvas rule for this ratio
    steps: int | None = None        # None: the checkpoint's base_schedule length, else 4
    schedule: str = "auto"          # auto: the checkpoint's schedule; else fasth3 for 4 steps on random weights;
                                    # else the uniform base schedule with steps + 1 points
    seed: int = 0
    config: str = "tiny"
    kernels: str = "reference"
    weights: str | None = None
    out: str = "out.mp4"
    json: str | None = None         # summary JSON path (checked here; the CLI writes it)
    text_encoder: str = "hash"
    lora: str | None = None
    lora_mode: str = "merged"
    lora_strength: float = 1.0
    lora_qkv_layout: str = "interleaved"
    device: str = "auto"
    root: str = "."
    mux: bool = True
    two_stage: bool = False         # H3 draft at half size -> upscaler -> adapter -> LTX-2 refiner -> LTX VAE
    stage2_prompt: str = "generic"  # generic: one cached context for every request (the report's); prompt: encode it
    prompt_cache: str = ".rsi/prompt_cache"
    warmup: bool = False            # one untimed pass of every stage (JIT, backend choice) before the request
    repeat: int = 1                 # requests in this process: the first is reported as first_request, the last
                                    # as the steady state
    refiner: str | None = None      # diffusers LTX2VideoTransformer3DModel folder (else random weights)
    adapter: str | None = None      # h3_ltx_adapter_safetensors_v1 file or folder (else random weights)
    ltx_vae: str | None = None      # diffusers AutoencoderKLLTX2Video folder (else random weights)
    attention: str = "dense"        # dense | fp8 | sol (runtime/attention.py)
    precision: str = "bf16"         # bf16 | fp8: the transformer blocks' linears (runtime/precision.py)
    sol_taus: tuple[float, ...] = (1.0, 1.25, 1.5)   # sol: threshold per refiner update (the last holds after)
    sol_dense_layers: int | None = None   # sol: refiner layers kept dense (None: 2 on full, 1 on tiny)
    sol_block: int | None = None    # sol: selection block (None: 128, the sol_attn op group's; 8 on tiny)
    gpus: int = 1                   # Ulysses ranks (runtime/ulysses.py); > 1 runs under torchrun, one process each
    wire: str = "bf16"              # the Ulysses exchanges' format: bf16 | int8 | fp8 (runtime/wire.py; lossy)


def resolve_device(name: str) -> torch.device:
    """``auto``: cuda if visible, else cpu; under torchrun a bare ``cuda`` is this rank's GPU (LOCAL_RANK)."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device(name)


def check_gpus(req: Request, heads: int) -> None:
    """--gpus N: N Ulysses ranks need N to divide the heads, and N GPUs when the run is on CUDA."""
    n = req.gpus
    from runtime.wire import WIRES

    if req.wire not in WIRES:
        raise RequestError(f"--wire {req.wire!r}: use one of {', '.join(WIRES)}")
    if req.wire != "bf16" and n == 1:
        raise RequestError(f"--wire {req.wire} compresses the Ulysses exchanges: it needs --gpus 2 or more")
    if n < 1:
        raise RequestError(f"--gpus {n}: at least 1")
    if n == 1:
        return
    if heads % n:
        raise RequestError(f"--gpus {n}: Ulysses splits the {heads} attention heads evenly; use a divisor of {heads}")
    if req.device != "cpu" and torch.cuda.is_available() and torch.cuda.device_count() < n:
        raise RequestError(f"--gpus {n}: only {torch.cuda.device_count()} GPU(s) visible")


def _writable(flag: str, value: str, suffix: str | None = None) -> None:
    p = Path(value)
    if suffix and p.suffix.lower() != suffix:
        raise RequestError(f"{flag} {value}: the output must be a {suffix} file")
    if p.is_dir():
        raise RequestError(f"{flag} {value} is a folder, not a file")
    folder = p.parent
    if not folder.exists():
        raise RequestError(f"{flag} {value}: folder {folder} does not exist")
    if not folder.is_dir():
        raise RequestError(f"{flag} {value}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise RequestError(f"{flag} {value}: not writable")


def attention_config(req: Request):
    """The run's runtime.attention.AttentionConfig (ValueError naming the flag when a value is bad)."""
    from runtime.attention import AttentionConfig

    return AttentionConfig(req.attention, tuple(req.sol_taus), sol_default(req.sol_dense_layers, "dense_layers",
                                                                           req.config),
                           sol_default(req.sol_block, "block", req.config))


SOL_DEFAULTS = {"dense_layers": {"full": 2, "tiny": 1}, "block": {"full": 128, "tiny": 8}}


def sol_default(value: int | None, key: str, config: str) -> int:
    """Sol-Attn settings left unset: the full model's (2 dense layers, 128-row blocks), or the tiny model's (its
    refiner has 2 layers and a few hundred rows: 1 dense layer, 8-row blocks)."""
    return SOL_DEFAULTS[key].get(config, SOL_DEFAULTS[key]["full"]) if value is None else value


def validate(req: Request) -> ShapePlan:
    """Every check, before any work: a bad request fails here with RequestError (exit 2 in the CLI)."""
    if not req.prompt.strip():
        raise RequestError("--prompt is empty")
    for flag, value, allowed in (("--config", req.config, CONFIGS), ("--kernels", req.kernels, KERNEL_MODES),
                                 ("--schedule", req.schedule, SCHEDULES), ("--text-encoder", req.text_encoder,
                                                                           TEXT_ENCODERS),
                                 ("--lora-mode", req.lora_mode, LORA_MODES),
                                 ("--lora-qkv-layout", req.lora_qkv_layout, QKV_LAYOUTS)):
        if value not in allowed:
            raise RequestError(f"{flag} {value!r}: use one of {', '.join(allowed)}")
    try:
        attention_config(req)
    except ValueError as e:
        raise RequestError(str(e)) from None
    if req.precision not in ("bf16", "fp8"):
        raise RequestError(f"--precision {req.precision!r}: use bf16 or fp8 (MXFP8 and NVFP4 are sm100 formats, "
                           "not served on this runtime's targets)")
    if req.precision == "fp8" and req.lora and req.lora_mode != "merged":
        raise RequestError(f"--precision fp8 quantises the merged weights: use --lora-mode merged, not "
                           f"{req.lora_mode!r}")
    if req.attention == "sol" and not req.two_stage:
        raise RequestError("--attention sol sparsifies the LTX-2 refiner's video self-attention (stage 2): add "
                           "--two-stage (the default at 1344x768)")
    if req.steps is not None and not 1 <= req.steps <= 200:
        raise RequestError(f"--steps {req.steps}: use 1..200 (4 = FastH3 schedule, 49 = the base schedule)")
    if req.schedule == "fasth3" and req.steps not in (None, 4):
        raise RequestError(f"--schedule fasth3 has exactly 4 steps, not {req.steps}")
    if not math.isfinite(req.lora_strength):
        raise RequestError(f"--lora-strength {req.lora_strength}: use a finite number")
    if req.aspect is not None:
        req.width, req.height = canvas_for_aspect(*req.aspect)
    plan = plan_request(req.duration_s, req.width, req.height, canvas=req.aspect is not None)
    if req.two_stage:
        _check_two_stage(req, plan)
    if req.repeat < 1:
        raise RequestError(f"--repeat {req.repeat}: use 1 or more")
    check_gpus(req, get_config(req.config).dit.heads)
    if req.mux:
        _writable("--out", req.out, ".mp4")
    elif Path(req.out).suffix.lower() != ".mp4":
        raise RequestError(f"--out {req.out}: the output must be an .mp4 file")
    if req.json is not None:
        _writable("--json", req.json)
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", req.device):
        raise RequestError(f"--device {req.device!r}: use auto, cpu, cuda or cuda:N")
    if req.device.startswith("cuda") and not torch.cuda.is_available():
        raise RequestError(f"--device {req.device}: no CUDA GPU is visible")
    if req.config == "full" and resolve_device(req.device).type != "cuda":
        raise RequestError("--config full is the 33B model (66 GB of bf16 weights): it needs a CUDA GPU; use "
                           "--config tiny on the CPU")
    if req.weights is not None or req.lora is not None:
        shapes = build_dit(get_config(req.config).dit, "meta")             # shapes only, no memory
        if req.weights is not None:
            try:
                check_dit(shapes, req.weights)
            except CheckpointError as e:
                raise RequestError(f"--weights {req.weights}: {e}") from None
        if req.lora is not None:
            if not Path(req.lora).exists():
                raise RequestError(f"--lora {req.lora} does not exist")
            try:
                check_adapter(req.lora, shapes, req.lora_qkv_layout)
            except AdapterError as e:
                raise RequestError(f"--lora {req.lora}: {e}") from None
    pick_schedule(req)
    try:
        video_vae_stats(req.weights)
    except CheckpointError as e:
        raise RequestError(f"--weights {req.weights}: {e}") from None
    if req.mux:
        try:
            import av  # noqa: F401
        except ImportError:
            raise RequestError("writing MP4 needs PyAV (pip install av)") from None
    return plan


STAGE2_PROMPTS = ("generic", "prompt")


def _check_two_stage(req: Request, plan: ShapePlan) -> None:
    """The draft runs at half the width and height (its latent is upscaled x2 and the LTX latent is /32): both
    edges must be multiples of 64. The prompt cache folder must be creatable and writable."""
    if plan.width % 64 or plan.height % 64:
        raise RequestError(f"--two-stage at {plan.width}x{plan.height}: width and height must be multiples of 64 "
                           "(the H3 draft runs at half size, on a 32-pixel grid); e.g. 1344x768")
    plan_request(plan.duration_s, plan.width // 2, plan.height // 2)
    if req.stage2_prompt not in STAGE2_PROMPTS:
        raise RequestError(f"--stage2-prompt {req.stage2_prompt!r}: use one of {', '.join(STAGE2_PROMPTS)}")
    d = Path(req.prompt_cache)
    while not d.exists() and d != d.parent:
        d = d.parent
    if not d.is_dir() or not os.access(d, os.W_OK | os.X_OK):
        raise RequestError(f"--prompt-cache {req.prompt_cache}: {d} is not a writable folder")
    _check_components(req)


def _check_components(req: Request) -> None:
    """The stage-2 component checkpoints, from their configs and headers only (no tensor is read)."""
    from runtime.adapter import AdapterConfig, check_adapter_checkpoint
    from runtime.prompt_cache import context_channels
    from runtime.refiner import check_refiner_folder
    from runtime.vae import build_vae, check_vae_weights

    def refiner(f: str) -> None:
        kw, _ = check_refiner_folder(f)
        want = context_channels(req.config)
        if kw.get("caption_channels", 3840) != want:
            raise CheckpointError(f"{f}/config.json: caption_channels {kw.get('caption_channels', 3840)} but the "
                                  f"--config {req.config} stage-2 context has {want} features")

    checks = {"--refiner": (req.refiner, refiner),
              "--adapter": (req.adapter, lambda f: check_adapter_checkpoint(
                  f, AdapterConfig.full() if req.config == "full" else AdapterConfig.tiny())),
              "--ltx-vae": (req.ltx_vae, lambda f: check_vae_weights(build_vae("ltx_video", None, "meta", 0, f), f,
                                                                     "ltx_video"))}
    for flag, (path, check) in checks.items():
        if path is None:
            continue
        if not Path(path).exists():
            raise RequestError(f"{flag} {path} does not exist")
        try:
            check(path)
        except CheckpointError as e:
            raise RequestError(f"{flag} {path}: {e}") from None


def pick_schedule(req: Request) -> Schedule:
    """--schedule auto: the checkpoint's ``base_schedule`` when it declares one (--steps must then match or be
    left out); else FastH3 for 4 steps on random weights; else the uniform base schedule. Shifts: the checkpoint's
    (``sigma_shift_scales`` or the diffusers scheduler configs), else 12 / 3."""
    try:
        rel = release_metadata(req.weights) if req.weights else {}
    except CheckpointError as e:
        raise RequestError(f"--weights {req.weights}: {e}") from None
    shifts = {"video_shift": rel.get("video_shift", VIDEO_SHIFT), "audio_shift": rel.get("audio_shift", AUDIO_SHIFT),
              "shift_source": rel.get("shift_source", "built-in")}
    base = rel.get("base_schedule")
    if req.schedule == "auto" and base is not None:
        n = len(base) - 1
        if req.steps is not None and req.steps != n:
            raise RequestError(f"--steps {req.steps}: {rel['schedule_source']} _minimax_h3.base_schedule has {n} "
                               f"steps; leave --steps out, pass --steps {n}, or pick --schedule base|fasth3")
        return make_schedule("checkpoint", n, base=base, source=rel["schedule_source"],
                             why="auto: the checkpoint declares base_schedule", **shifts)
    steps = DEFAULT_STEPS if req.steps is None else req.steps
    if req.schedule == "auto":
        if req.weights:
            kind, why = "base", "auto: the checkpoint declares no base_schedule (uniform path)"
        else:
            kind = "fasth3" if steps == 4 else "base"
            why = f"auto: {steps} steps on random weights"
    else:
        kind, why = req.schedule, f"--schedule {req.schedule}"
    return make_schedule(kind, steps, why=why, **shifts)
