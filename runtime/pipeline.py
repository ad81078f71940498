"""The single-stage H3 text-to-video+audio pipeline: text -> packed sequence -> AdaLN precompute -> Euler loop ->
video VAE + audio VAE -> MP4. Timed per stage; every fused op goes through runtime.kernels.

The two-stage path (H3 draft -> x2 latent upscaler -> H3->LTX adapter -> LTX-2.5 refine, H3_SPEC.md section 6)
slots in after ``denoise``: it takes the Stage-1 latents ``[24, T, Hl, Wl]`` and the audio latents this module
produces, and replaces ``decode_video`` with the LTX VAE; see docs/runtime.md.
"""

from __future__ import annotations

import logging
import math
import os
import resource
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from runtime.adaln import AdaLNCache
from runtime.attention import Attention
from runtime.attention import describe as describe_attention
from runtime.checkpoint import FP8_ATTR, load_dit, transformer_dir
from runtime.config import RuntimeConfig, get_config
from runtime.kernels import Kernels, lock_sha256
from runtime.lora import apply_adapter, load_adapter
from runtime.model import H3DiT, build_dit, param_counts
from runtime.packing import (
    AUDIO_CH,
    RequestError,
    ShapePlan,
    build_sequence,
    patchify_video,
    unpack_audio,
    unpatchify_video,
)
from runtime.precision import describe as describe_precision
from runtime.precision import to_fp8_
from runtime.release import video_vae_stats
from runtime.request import (  # noqa: F401 (API)
    TEXT_ENCODERS,
    Request,
    attention_config,
    pick_schedule,
    resolve_device,
    validate,
)
from runtime.sampler import VIDEO_COND_AUG, Schedule, condition_noise, euler_step, initial_noise
from runtime.text import make_text_encoder
from runtime.vae import KINDS, VAEDecoder, build_decoder, set_latent_stats, vae_folder

log = logging.getLogger("runtime.pipeline")


# ------------------------------------------------------------------------------------------------ timing
class Timer:
    """Wall time per stage; synchronizes the GPU at both ends of a stage so the times are honest."""

    def __init__(self, device: torch.device):
        self.device, self.stages = device, {}

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    @contextmanager
    def __call__(self, name: str):
        self.sync()
        t0 = time.perf_counter()
        yield
        self.sync()
        dt = time.perf_counter() - t0
        if isinstance(self.stages.get(name), list):
            self.stages[name].append(dt)
        else:
            self.stages[name] = dt

    def steps(self, name: str) -> None:
        self.stages[name] = []


def peak_memory(device: torch.device) -> dict[str, float | None]:
    gpu = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
    return {"peak_gpu_gib": gpu, "peak_host_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}


# ------------------------------------------------------------------------------------------------ building
def build_vaes(cfg: RuntimeConfig, device: torch.device, seed: int, weights: str | None = None
               ) -> tuple[VAEDecoder, VAEDecoder]:
    """diffusers' H3 video and audio VAE decoders (runtime/vae.py): loaded from the partition's diffusers-layout
    folders when --weights has them (``vae/`` or ``video_vae/``, ``audio_vae/`` with a config.json naming the
    class), else random weights from seed + 101 / + 102, the video latent statistics then coming from
    ``video_vae/config.json`` when present. Video decodes in bf16 on the GPU, audio in fp32."""
    vf, af = vae_folder(weights, "h3_video"), vae_folder(weights, "h3_audio")
    video = build_decoder("h3_video", cfg.video_vae, device, seed + 101, vf)
    audio = build_decoder("h3_audio", cfg.audio_vae, device, seed + 102, af)
    stats = video_vae_stats(weights) if vf is None else None
    if stats is not None:
        set_latent_stats(video.vae, stats[1]["latents_mean"], stats[1]["latents_std"])
    return video, audio


def build_model(req: Request, cfg: RuntimeConfig, device: torch.device) -> tuple[H3DiT, dict[str, Any]]:
    info: dict[str, Any] = {}
    model = build_dit(cfg.dit, device, seed=None if req.weights else req.seed)
    info["params"] = param_counts(model)
    if req.weights:
        info["checkpoint"] = load_dit(model, transformer_dir(req.weights))
        fp8 = info["checkpoint"].get("fp8")
        if fp8:
            use = req.precision == "fp8"
            if not use:                   # bf16 run: the dequantised parameters only; drop the e4m3 copies
                delattr(model, FP8_ATTR)
            fp8["note"] = (f"FP8 checkpoint ({fp8['format']}): {fp8['linears']} block linears stored in e4m3, "
                           + ("used as stored (--precision fp8)" if use else "dequantised to bf16 (--precision bf16; "
                              f"{fp8['bf16_inexact_elements']} weights not exact in bf16)")
                           + "; its input_scale values are not used (activations are quantised per row)")
    else:
        info["checkpoint"] = f"random weights, seed {req.seed}"
    if req.lora:
        info["lora"] = apply_adapter(model, load_adapter(req.lora, model, req.lora_qkv_layout), req.lora_mode,
                                     req.lora_strength)
    return model, info


def vae_report(req: Request) -> dict[str, dict[str, str]]:
    """The VAE rows of ``weights_report``: a diffusers folder of the partition, or random weights."""
    out = {}
    for part, kind, offset in (("video_vae", "h3_video", 101), ("audio_vae", "h3_audio", 102)):
        cls, folder = KINDS[kind].cls.__name__, vae_folder(req.weights, kind)
        if folder is not None:
            out[part] = {"source": "checkpoint", "detail": f"{folder} (diffusers {cls}, decoder only)"}
            continue
        detail = f"diffusers {cls} decoder, seed {req.seed + offset}"
        if kind == "h3_video":
            stats = video_vae_stats(req.weights)
            detail += "; latent mean/std " + (f"from {stats[0]}" if stats else "0/1 (no video_vae/config.json)")
        out[part] = {"source": "random", "detail": detail}
    return out


PARTS = {"dit": "DiT", "video_vae": "video VAE decoder", "audio_vae": "audio VAE decoder",
         "text_encoder": "text encoder"}


def weights_report(req: Request, model_info: dict[str, Any], encoder_name: str) -> dict[str, dict[str, str]]:
    """Per part of the model: {"source": "checkpoint" | "random" | "file", "detail"}. The DiT and the VAEs (their
    diffusers folders, when the partition has them) load from --weights."""
    ck = model_info["checkpoint"]
    dit = ({"source": "checkpoint", "detail": f"{transformer_dir(req.weights)} ({ck['layout']} layout, "
                                              f"{ck['tensors']} tensors in {ck['files']} file(s))"}
           if req.weights else {"source": "random", "detail": f"seed {req.seed}"})
    out = {"dit": dit, **vae_report(req),
           "text_encoder": {"source": "random", "detail": f"{encoder_name}, seed {req.seed}"}}
    if req.lora:
        out["lora"] = {"source": "file", "detail": f"{req.lora} ({model_info['lora']['format']}, "
                                                   f"{req.lora_mode}, strength {req.lora_strength:g})"}
    return out


# ------------------------------------------------------------------------------------------------ denoising
def denoise(model: H3DiT, text_h: torch.Tensor, seq, rope: torch.Tensor, cache: AdaLNCache, schedule: Schedule,
            plan: ShapePlan, seed: int, kernels: Kernels, timer: Timer | None = None,
            on_step: Callable[[int, float], None] | None = None,
            cond_latents: list[torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Euler loop from seeded noise; returns (video latents [24, T, Hl, Wl], audio latents [2, 32, T_a]) fp32.
    ``cond_latents``: FL2VA keyframe latents [24, 1, Hl, Wl] in packed order; their rows are noised to t = 0.999
    once per condition (runtime.sampler.condition_noise) and held for every step."""
    device = text_h.device
    cond = None if not cond_latents else condition_noise(cond_latents, seed, VIDEO_COND_AUG).to(device)
    vz, a = initial_noise(plan.latent_shape, plan.audio_rows, AUDIO_CH, seed)
    v, a = patchify_video(vz).to(device), a.to(device)                                      # [V, 96], [A, 32]
    attn = kernels.attention                   # runtime.attention: the denoising blocks attend in --attention's class
    for k in range(schedule.steps):
        t0 = time.perf_counter()
        attn.at("stage1", step=k)
        with timer("denoise_steps") if timer else _null():
            vv, va = model(v, a, text_h, seq, rope, cache[k], kernels, cond=cond)
            v = euler_step(v, vv, schedule.video[k], schedule.video[k + 1])
            a = euler_step(a, va, schedule.audio[k], schedule.audio[k + 1])
        if on_step:
            on_step(k, time.perf_counter() - t0)
    attn.at("other")
    if not (torch.isfinite(v).all() and torch.isfinite(a).all()):
        raise FloatingPointError("non-finite latents after denoising")
    return unpatchify_video(v, plan), unpack_audio(a)


@contextmanager
def _null():
    yield


def generate(model: H3DiT, video_vae: VAEDecoder, audio_vae: VAEDecoder, cond: torch.Tensor, seq,
             cache: AdaLNCache, schedule: Schedule, plan: ShapePlan, seed: int, kernels: Kernels, timer: Timer,
             progress: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Text rows -> refiner -> Euler loop -> both decoders. Returns host arrays: frames [F, H, W, 3] uint8,
    wave [2, samples] fp32, and the final latents (for two-stage hand-off and tests)."""
    rope = model.rope.table(seq.positions)                                                  # [S, 96] bf16
    with timer("text_refiner"):
        text_h = model.encode_text(cond, kernels)                                           # [L, H] bf16
    timer.steps("denoise_steps")
    z_video, z_audio = denoise(model, text_h, seq, rope, cache, schedule, plan, seed, kernels, timer,
                               on_step=lambda k, dt: progress(f"step {k + 1}/{schedule.steps}: {dt:.3f} s"))
    timer.stages["denoise"] = sum(timer.stages["denoise_steps"])
    with timer("decode_video"):
        frames = video_vae.decode(z_video).cpu().numpy()                  # uint8 on the device; bytes cross only
    with timer("decode_audio"):
        wave = audio_vae.decode(z_audio).cpu().numpy()                                      # [2, samples]
    return {"frames": frames, "wave": wave, "z_video": z_video, "z_audio": z_audio}


# ------------------------------------------------------------------------------------------------ the pipeline
@dataclass
class Result:
    request: dict[str, Any]
    plan: dict[str, Any]
    schedule: dict[str, Any]
    device: str
    timings_s: dict[str, Any]
    memory: dict[str, Any]
    adaln: dict[str, Any]
    model: dict[str, Any]
    text_encoder: str
    kernels: list[dict[str, Any]]
    lock_sha256: str | None
    weights: dict[str, dict[str, str]] = field(default_factory=dict)   # part -> {"source", "detail"}
    mp4: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    env: dict[str, Any] = field(default_factory=dict)                 # rsi.env.capture(): versions, GPU, commit
    outputs: dict[str, Any] | None = field(default=None, repr=False)     # latents and arrays; not in the JSON
    latent_sha256: str | None = None   # sha256 of the final video latent's bytes: equal runs have equal hashes

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("outputs")
        return d


def setup_triton_interpreter() -> bool:
    """Under TRITON_INTERPRET=1, Triton kernels (the ``lora_consumer`` reference) run in the interpreter, whose
    float conversions do not round like the GPU: apply the exact-rounding patch the tests use
    (rsi.harness.interp). Explicit, at run time; importing the runtime patches nothing. True when applied."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return False
    from rsi.harness.interp import patch_interpreter_rounding

    return patch_interpreter_rounding()


def flushing_denormals() -> bool:
    """Whether this thread's float unit flushes subnormals now (torch has no getter for the flag): a subnormal fp32
    value times one is zero only then."""
    return bool((torch.tensor([1e-40], dtype=torch.float32) * 1.0 == 0).item())


@contextmanager
def denormals_flushed(device: torch.device):
    """On the CPU, flush subnormals for the run (Snake's sin^2 makes them; x86 slows ~30x on them) and give the
    caller back its own mode afterwards: the flag is process-wide, and left set it changes every later subnormal
    result in the caller's process (it once broke three fp8 byte tests run after a pipeline in one test worker)."""
    if device.type != "cpu":
        yield
        return
    was = flushing_denormals()
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(was)


def ulysses_for(req: Request, device: torch.device):
    """--gpus N under torchrun: this rank's runtime.ulysses.Ulysses (the process group made here); else None."""
    if req.gpus <= 1:
        return None
    from runtime.ulysses import init_from_env

    sp = init_from_env(device.type, req.wire)
    if sp is None or sp.world != req.gpus:
        raise RequestError(f"--gpus {req.gpus}: run under torchrun with {req.gpus} processes (rsi run-pipeline does "
                           f"this itself; WORLD_SIZE here is {sp.world if sp else 1})")
    return sp


def fp8_checkpoint_notes(model_info: dict[str, Any]) -> list[str]:
    ck = model_info.get("checkpoint")
    return [ck["fp8"]["note"]] if isinstance(ck, dict) and "fp8" in ck else []


def describe_ulysses(sp) -> str:
    wire = "bf16 wire" if sp.wire == "bf16" else f"{sp.wire} wire (LOSSY: runtime/wire.py)"
    return (f"Ulysses sequence parallelism: {sp.world} ranks, the H3 blocks' rows split {sp.world} ways, {wire} "
            f"({sp.bytes_sent / 2**20:.1f} MiB sent by rank {sp.rank}); the token refiner, the VAEs and (two-stage) "
            "the LTX-2 refiner run replicated on every rank")


def run_pipeline(req: Request, progress: Callable[[str], None] = lambda s: None) -> Result:
    """Validate, build, generate, mux; every stage timed. Raises RequestError before any work on a bad request.
    ``req.two_stage``: the two-stage route (runtime/two_stage.py)."""
    if req.two_stage:
        from runtime.two_stage import run_pipeline_two_stage

        return run_pipeline_two_stage(req, progress)
    plan = validate(req)
    setup_triton_interpreter()
    device = resolve_device(req.device)
    threads = torch.get_num_threads()
    if device.type == "cpu" and req.config == "tiny":
        torch.set_num_threads(1)           # tiny tensors gain nothing from intra-op threads; OMP barriers cost
    try:
        with torch.no_grad(), denormals_flushed(device):
            return _run(req, plan, device, progress)
    finally:
        torch.set_num_threads(threads)


def _run(req: Request, plan: ShapePlan, device: torch.device, progress: Callable[[str], None]) -> Result:
    cfg = get_config(req.config)
    schedule = pick_schedule(req)
    kernels = Kernels(req.kernels, root=req.root)
    kernels.attention = Attention(attention_config(req), kernels)
    kernels.sp = ulysses_for(req, device)
    timer = Timer(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)

    with timer("build_text_encoder"):
        encoder = make_text_encoder(req.text_encoder, cfg, device, req.seed)
    with timer("text"):
        cond = encoder.encode(req.prompt)                                                   # [L, text_dim] bf16
    encoder_name, trained = encoder.name, encoder.trained
    del encoder                                         # the encoder is done: free it before the DiT arrives
    progress(f"text: {cond.shape[0]} tokens x {cond.shape[1]}")

    with timer("build_dit"):
        model, model_info = build_model(req, cfg, device)
        video_vae, audio_vae = build_vaes(cfg, device, req.seed, req.weights)
    seq = build_sequence(plan, cond.shape[0]).to(device)
    with timer("adaln_precompute"):
        cache = AdaLNCache(model, seq, schedule)
        released = AdaLNCache.release(model)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    adaln = {"released_params": released["params"], "released_gib": released["bytes"] / 2**30,
             "table_gib": cache.nbytes() / 2**30, "saved_gib": (released["bytes"] - cache.nbytes()) / 2**30}
    precision = {}
    if req.precision == "fp8":
        with timer("to_fp8"):
            precision["h3"] = to_fp8_(model.blocks, kernels, quantized=getattr(model, FP8_ATTR, None))
            if device.type == "cuda":
                torch.cuda.empty_cache()
    progress(f"adaln: released {released['params'] / 1e9:.3f}B params ({adaln['released_gib']:.2f} GiB), "
             f"tables {adaln['table_gib'] * 1024:.1f} MiB")

    out = generate(model, video_vae, audio_vae, cond, seq, cache, schedule, plan, req.seed, kernels, timer, progress)
    mp4 = None
    if req.mux:
        from runtime.mux import check_mp4, write_mp4

        audio_s = out["wave"].shape[1] / cfg.audio_vae.sample_rate
        with timer("mux"):             # written beside --out, checked, then renamed onto it
            mp4 = write_mp4(req.out, out["frames"], plan.fps, out["wave"], cfg.audio_vae.sample_rate,
                            check=lambda tmp: check_mp4(tmp, plan.frames, plan.fps, audio_s, name=req.out,
                                                            source=out["frames"]))
    weights = weights_report(req, model_info, encoder_name)
    notes = [(f"packed rows S={seq.total} (used {seq.used}, text {seq.text_len}); pad rows are their own "
             "attention document"),
             "the token refiner runs once: text rows have no timestep dependence"]
    if not trained:
        notes.append(f"text conditioning is UNTRAINED ({encoder_name})")
    notes += fp8_checkpoint_notes(model_info)
    random_parts = [PARTS[k] for k, v in weights.items() if v["source"] == "random"]
    if random_parts:
        notes.append(f"random weights: {', '.join(random_parts)}; "
                     + ("only the DiT is loaded from --weights, so " if req.weights else "")
                     + "the output is noise")
    timer.stages["attention"] = kernels.attention.report()
    timer.stages["ops"] = kernels.op_times()                  # seconds per (op, dims) in the request
    notes.append("attention: " + describe_attention(kernels.attention.cfg))
    if kernels.sp is not None:
        notes.append(describe_ulysses(kernels.sp))
    if precision:
        notes.append(describe_precision(precision))
    model_info = {**model_info, "precision": {"mode": req.precision, **precision}}
    return Result(
        request=asdict(req), plan=plan.to_json(), schedule=schedule.to_json(), device=str(device),
        timings_s=timer.stages, memory=peak_memory(device), adaln=adaln, model=model_info,
        text_encoder=encoder_name, kernels=kernels.summary(), lock_sha256=lock_sha256(req.root), weights=weights,
        mp4=mp4, notes=notes, env=run_env(), outputs=out, latent_sha256=tensor_sha256(out["z_video"]))


def tensor_sha256(t: torch.Tensor) -> str:
    import hashlib

    return hashlib.sha256(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()


def run_env() -> dict[str, Any]:
    from rsi.env import capture

    return capture()


def summary_rows(res: Result) -> list[tuple[str, str]]:
    """(stage, seconds) rows for the timing table, per-step rows included."""
    t = res.timings_s
    rows = [(k, f"{t[k]:.3f}") for k in ("build_text_encoder", "text", "build_dit", "text_refiner",
                                         "adaln_precompute", "to_fp8") if k in t]
    for i, s in enumerate(t.get("denoise_steps", [])):
        rows.append((f"denoise step {i + 1}", f"{s:.3f}"))
    rows += [(k, f"{t[k]:.3f}") for k in ("denoise", "decode_video", "decode_audio", "mux") if k in t]
    rows += attention_rows(t)
    return rows


def attention_rows(t: dict[str, Any]) -> list[tuple[str, str]]:
    """Attention seconds per stage (runtime.attention: CUDA events or the host clock), part of the stage rows."""
    a = t.get("attention") or {}
    names = {"stage1": "stage 1 (H3 denoising)", "stage2": "stage 2 (refiner)", "other": "outside the denoising loops"}
    mode = a.get("mode", "dense")
    label = {"stage1": "fp8" if mode == "fp8" else "dense", "stage2": mode}   # sol: only the refiner's
    rows = [(f"  attention, {names.get(k, k)} ({label.get(k, 'dense')})", f"{v:.3f}")
            for k, v in sorted(a.get("seconds", {}).items())]
    for step, d in a.get("density_per_step", {}).items():
        rows.append((f"  sol density, refiner step {int(step) + 1}", f"{d:.3f}"))
    return rows


def fmt_gib(x: float | None) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f} GiB"
