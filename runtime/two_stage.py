"""The two-stage H3 route (H3_SPEC.md section 6, the Sol-H3 report's latent-only route):

    H3 draft at half resolution (672x384 for 1344x768), FastH3 4 steps -> H3 latent [24, 37, 24, 42]
    -> H3 x2 latent upscaler            (runtime/upscaler.py)  -> [1, 24, 37, 48, 84]
    -> H3->LTX adapter                  (runtime/adapter.py)   -> [1, 128, 17, 24, 42], first 16 latent frames kept
    -> LTX-2 refiner, 3 Euler updates   (runtime/refiner.py; diffusers' LTX2VideoTransformer3DModel)
    -> LTX-2 video VAE decode           (diffusers' AutoencoderKLLTX2Video) -> 121 frames at 1344x768
    -> the H3 audio (H3 audio VAE on the draft's audio latents) muxed -> MP4

Phases, each timed on its own: ``build`` (models resident on the device, random weights from the seed),
``prepare`` (AdaLN tables of the draft schedule, then the AdaLN release), ``warmup`` (optional: one pass of every
stage on the request's shapes with one forward per transformer, so Triton JIT and backend selection happen
outside the request; Triton's on-disk cache makes later processes start warm) and one or more ``requests``. The
first request is reported as ``first_request`` and the last as the steady state.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

import torch

from runtime.adaln import AdaLNCache
from runtime.adapter import AdapterConfig, build_adapter, load_adapter_checkpoint
from runtime.attention import Attention
from runtime.attention import describe as attention_backend
from runtime.config import get_config
from runtime.kernels import Kernels, lock_sha256
from runtime.packing import ShapePlan, build_sequence, plan_request
from runtime.pipeline import (
    PARTS,
    Result,
    Timer,
    attention_rows,
    build_model,
    denoise,
    peak_memory,
    run_env,
    weights_report,
)
from runtime.precision import describe as describe_precision
from runtime.precision import to_fp8_
from runtime.prompt_cache import stage2_context
from runtime.refiner import SIGMAS, Refiner, build_refiner, refine
from runtime.request import Request, attention_config, pick_schedule
from runtime.text import make_text_encoder
from runtime.upscaler import UpscalerConfig, build_upscaler
from runtime.vae import build_decoder, build_ltx_vae, decode_ltx, vae_folder

LTX_AUDIO_LATENTS_PER_S = 25          # LTX-2 audio: 16 kHz, hop 160, 4x temporal compression
LTX_AUDIO_CH = 128                    # 8 latent channels x 16 mel bins, packed


def draft_plan(plan: ShapePlan) -> ShapePlan:
    """The stage-1 plan: half the width and height (the draft's latent is upscaled x2), same duration."""
    return plan_request(plan.duration_s, plan.width // 2, plan.height // 2)


def ltx_latent_frames(plan: ShapePlan) -> int:
    """LTX latent frames kept: the longest 8k+1 pixel frames within the planned frames (124 -> 121 -> 16)."""
    return (plan.frames - 1) // 8 + 1


def ltx_audio_frames(plan: ShapePlan) -> int:
    return round((8 * (ltx_latent_frames(plan) - 1) + 1) / plan.fps * LTX_AUDIO_LATENTS_PER_S)


class TwoStage:
    """Every model of the route, resident on one device (the memory plan: H3 after the AdaLN release, LTX-2,
    upscaler, adapter and both decoders together; the stage-2 text encoder only exists on a prompt-cache miss)."""

    def __init__(self, req: Request, plan: ShapePlan, device: torch.device, timer: Timer,
                 progress: Callable[[str], None]):
        self.req, self.plan, self.device, self.progress = req, plan, device, progress
        self.p1 = draft_plan(plan)
        cfg = get_config(req.config)
        self.cfg, self.kernels = cfg, Kernels(req.kernels, root=req.root)
        from runtime.pipeline import ulysses_for

        self.kernels.sp = ulysses_for(req, device)
        self.kernels.attention = Attention(attention_config(req), self.kernels)
        self.schedule = pick_schedule(req)
        with timer("build_text_encoder"):
            self.encoder = make_text_encoder(req.text_encoder, cfg, device, req.seed)
        with timer("build_dit"):
            self.dit, self.model_info = build_model(req, cfg, device)
        self.text_len = None
        # the AdaLN tables and release before the refiner arrives: the H3 DiT is at its largest (13B AdaLN
        # parameters) only until then (run 16 built both first and peaked at 134.5 GiB)
        self.prepare(self.encoder.encode(req.prompt), timer)
        with timer("build_vaes"):
            # the H3 audio VAE (as the single-stage route builds it); video decodes with the LTX VAE
            self.audio_vae = build_decoder("h3_audio", cfg.audio_vae, device, req.seed + 102,
                                           vae_folder(req.weights, "h3_audio"))
            self.ltx_vae = build_ltx_vae(req.config, device, req.seed + 103, folder=req.ltx_vae)
        full = req.config == "full"
        with timer("build_upscaler_adapter"):
            self.upscaler = build_upscaler(UpscalerConfig.full() if full else UpscalerConfig.tiny(), device,
                                           req.seed + 104)
            dt = torch.bfloat16 if device.type == "cuda" else torch.float32
            acfg = AdapterConfig.full() if full else AdapterConfig.tiny()
            self.adapter = (load_adapter_checkpoint(req.adapter, device, acfg, dtype=dt) if req.adapter else
                            build_adapter(acfg, device, req.seed + 105, dtype=dt))
        with timer("build_refiner"):
            self.refiner = Refiner(build_refiner(req.config, device, req.seed + 106, folder=req.refiner),
                                   self.kernels)
        self.precision = {}
        if req.precision == "fp8":           # after the AdaLN release (prepare) and every weight is in place
            with timer("to_fp8"):
                from runtime.checkpoint import FP8_ATTR

                self.precision = {"h3": to_fp8_(self.dit.blocks, self.kernels,
                                                quantized=getattr(self.dit, FP8_ATTR, None)),
                                  "refiner": to_fp8_(self.refiner.m.transformer_blocks, self.kernels)}
                if device.type == "cuda":
                    torch.cuda.empty_cache()

    def prepare(self, cond: torch.Tensor, timer: Timer) -> dict[str, Any]:
        """The draft's packed sequence and AdaLN tables, then the AdaLN release (once: tables are reused by every
        request with the same schedule and text length)."""
        self.seq = build_sequence(self.p1, cond.shape[0]).to(self.device)
        self.text_len = cond.shape[0]
        with timer("adaln_precompute"):
            self.cache = AdaLNCache(self.dit, self.seq, self.schedule)
            rel = AdaLNCache.release(self.dit)
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
        self.adaln = {"released_params": rel["params"], "released_gib": rel["bytes"] / 2**30,
                      "table_gib": self.cache.nbytes() / 2**30}
        return self.adaln

    # ------------------------------------------------------------------------------------------ per request
    def request(self, timer: Timer, steps1: int | None = None, steps2: int | None = None, mux: bool = True
                ) -> dict[str, Any]:
        """One request end to end (``steps1``/``steps2`` truncate the schedules: the warm-up's one forward each)."""
        req, p, dev = self.req, self.plan, self.device
        self.kernels.attention.reset()
        self.kernels.reset_times()
        with timer("text"):
            cond = self.encoder.encode(req.prompt)
        if cond.shape[0] != self.text_len:
            raise ValueError("the prompt's text length changed between requests of one process")
        dit, k = self.dit, self.kernels
        rope = dit.rope.table(self.seq.positions)
        with timer("text_refiner"):
            text_h = dit.encode_text(cond, k)
        sched = self.schedule if steps1 is None else _truncate(self.schedule, steps1)
        timer.steps("denoise_steps")
        zv, za = denoise(dit, text_h, self.seq, rope, self.cache, sched, self.p1, req.seed, k, timer,
                         on_step=lambda i, dt: self.progress(f"stage 1 step {i + 1}/{sched.steps}: {dt:.3f} s"))
        timer.stages["stage1_steps"] = timer.stages.pop("denoise_steps")
        timer.stages["stage1"] = sum(timer.stages["stage1_steps"])
        with timer("upscale"):
            z2 = self.upscaler.upscale(zv[None])                                       # [1, 24, T, 2H, 2W]
        with timer("adapt"):
            zl = self.adapter.adapt(z2, keep=ltx_latent_frames(p))                     # [1, 128, F, H/2, W/2]
        with timer("stage2_text"):
            ctx, actx, ctx_info = stage2_context(req.prompt, req.stage2_prompt == "generic", req.config, dev,
                                                 req.seed, req.prompt_cache)
        F_, H, W = zl.shape[2:]
        na = ltx_audio_frames(p)
        with timer("stage2_prepare"):                  # RoPE tables, prompt projection, text K/V of every block
            st = self.refiner.prepare(ctx, actx, F_, H, W, na, fps=p.fps)
        g = torch.Generator().manual_seed(req.seed + 3)     # no clean LTX audio latent: sigma_0 * eps (z = 0)
        audio_in = (SIGMAS[0] * torch.randn(1, na, LTX_AUDIO_CH, generator=g)).to(dev)
        sig = SIGMAS if steps2 is None else SIGMAS[:steps2] + (0.0,)
        timer.steps("stage2_steps")
        zr, _ = refine(self.refiner, zl, audio_in, st, req.seed, sigmas=sig, timer=timer,
                       on_step=lambda i, dt: self.progress(f"stage 2 step {i + 1}/{len(sig) - 1}: {dt:.3f} s"))
        timer.stages["stage2"] = sum(timer.stages["stage2_steps"])
        with timer("decode_video"):
            frames = decode_ltx(self.ltx_vae, zr).cpu().numpy()
        sr = self.cfg.audio_vae.sample_rate
        with timer("decode_audio"):              # the H3 audio, cut to the refined video's length
            wave = self.audio_vae.decode(za)[:, : round(frames.shape[0] / p.fps * sr)].cpu().numpy()
        mp4 = None
        if mux and req.mux:
            from runtime.mux import check_mp4, write_mp4

            with timer("mux"):
                mp4 = write_mp4(req.out, frames, p.fps, wave, sr,
                                check=lambda tmp: check_mp4(tmp, frames.shape[0], p.fps, wave.shape[1] / sr,
                                                            name=req.out, source=frames))
        return {"frames": frames, "wave": wave, "z_draft": zv, "z_audio": za, "z_upscaled": z2, "z_ltx": zl,
                "z_refined": zr, "mp4": mp4, "stage2_context": ctx_info, "attention": self.kernels.attention.report(),
                "ops": self.kernels.op_times()}


def _truncate(schedule, steps: int):
    """The first ``steps`` updates, then straight to sigma 0 (the warm-up's one forward; the AdaLN tables of
    those steps stay valid)."""
    def cut(t: torch.Tensor) -> torch.Tensor:
        return torch.cat([t[:steps], t.new_zeros(1)])

    return replace(schedule, video=cut(schedule.video), audio=cut(schedule.audio))


REQUEST_STAGES = ("text", "text_refiner", "stage1", "upscale", "adapt", "stage2_text", "stage2_prepare", "stage2",
                  "decode_video", "decode_audio", "mux")


def request_total(stages: dict[str, Any]) -> float:
    return sum(stages[k] for k in REQUEST_STAGES if isinstance(stages.get(k), float))


def run_two_stage(req: Request, plan: ShapePlan, device: torch.device, progress: Callable[[str], None]) -> Result:
    build = Timer(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    ts = TwoStage(req, plan, device, build, progress)
    warm = None
    if req.warmup:
        progress("warm-up: one pass of every stage on the request's shapes (one forward per transformer)")
        wt = Timer(device)
        t0 = time.perf_counter()
        ts.request(wt, steps1=1, steps2=1, mux=False)
        warm = {"seconds": time.perf_counter() - t0, "stages": wt.stages}
    runs = []
    out = None
    for i in range(req.repeat):
        rt = Timer(device)
        rt.sync()
        t0 = time.perf_counter()
        out = ts.request(rt)                  # every request muxes (--out is replaced atomically each time)
        rt.sync()
        rt.stages["request_wall"] = time.perf_counter() - t0          # the named stages plus the glue between
        rt.stages["request_total"] = request_total(rt.stages)
        rt.stages["request_total_no_mux"] = rt.stages["request_total"] - rt.stages.get("mux", 0.0)
        rt.stages["stage2_context_hit"] = out["stage2_context"]["hit"]
        rt.stages["attention"] = out["attention"]
        rt.stages["ops"] = out["ops"]                   # seconds per (op, dims) in this request
        runs.append(rt.stages)
        progress(f"request {i + 1}/{req.repeat}: {rt.stages['request_total']:.3f} s")
    steady = dict(runs[-1])
    timings = {**build.stages, **steady, "first_request": runs[0], "requests": runs}
    if warm:
        timings["warmup"] = warm
    enc_name = ts.encoder.name
    weights = weights_report(req, ts.model_info, enc_name)
    weights.pop("video_vae", None)                          # not built: the LTX VAE decodes the video
    def part(path, what, seed):
        return ({"source": "checkpoint", "detail": f"{path} ({what})"} if path else
                {"source": "random", "detail": f"{what}, seed {seed}"})
    weights["ltx_refiner"] = part(req.refiner, f"diffusers LTX2VideoTransformer3DModel ({req.config})", req.seed + 106)
    weights["ltx_vae"] = part(req.ltx_vae, "diffusers AutoencoderKLLTX2Video", req.seed + 103)
    weights["upscaler"] = part(None, "LatentResizer3D (runtime/upscaler.py)", req.seed + 104)
    weights["adapter"] = part(req.adapter, "H3->LTX adapter (runtime/adapter.py)", req.seed + 105)
    weights["stage2_text"] = {"source": "random", "detail": "hash-embedding stand-in for Gemma-3 (untrained) + "
                                                            f"diffusers LTX2TextConnectors, seed {req.seed + 201}"}
    ctx = out["stage2_context"]
    notes = [(f"two-stage route: H3 draft at {ts.p1.width}x{ts.p1.height} -> x2 upscaler -> H3->LTX adapter -> "
              f"LTX-2 refiner ({len(SIGMAS) - 1} updates) -> LTX-2 VAE; H3 audio muxed"),
             "attention: " + attention_backend(ts.kernels.attention.cfg),
             (f"stage-2 prompt context: {ctx['kind']} ({'cache hit' if ctx['hit'] else 'made and cached'} at "
              f"{ctx['path']}); UNTRAINED stand-in for Gemma-3"),
             ("stage-2 audio stream: seeded noise at sigma_0 (no LTX audio VAE encode); its output is discarded, the "
             "H3 audio is muxed"),
             "refiner input noised to sigma_0 as s0*eps + (1-s0)*z (UNCONFIRMED mix, H3_SPEC.md section 6)"]
    if ts.precision:
        notes.append(describe_precision(ts.precision))
    from runtime.pipeline import fp8_checkpoint_notes

    notes += fp8_checkpoint_notes(ts.model_info)
    if ts.kernels.sp is not None:
        from runtime.pipeline import describe_ulysses

        notes.append(describe_ulysses(ts.kernels.sp))
        if ts.refiner.sp_note:
            notes.append(ts.refiner.sp_note)
    names = {**PARTS, "ltx_refiner": "LTX-2 refiner", "ltx_vae": "LTX-2 VAE decoder", "upscaler": "upscaler",
             "adapter": "adapter", "stage2_text": "stage-2 text encoder"}
    random_parts = [names.get(k, k) for k, v in weights.items() if v["source"] == "random"]
    notes.append(f"random weights: {', '.join(random_parts)}; the output is noise")
    return Result(
        request=asdict(req), plan={**plan.to_json(), "draft": ts.p1.to_json(),
                                   "ltx_latent": list(out["z_refined"].shape),
                                   "h3_draft_latent": list(out["z_draft"].shape),
                                   "upscaled_latent": list(out["z_upscaled"].shape)},
        schedule={**ts.schedule.to_json(), "stage2_sigmas": list(SIGMAS)}, device=str(device),
        timings_s=timings, memory=peak_memory(device), adaln=ts.adaln or {},
        model={**ts.model_info, "precision": {"mode": req.precision, **ts.precision}},
        text_encoder=enc_name, kernels=ts.kernels.summary(), lock_sha256=lock_sha256(req.root), weights=weights,
        mp4=out["mp4"], notes=notes, env=run_env(), outputs=out)


def run_pipeline_two_stage(req: Request, progress: Callable[[str], None] = lambda s: None) -> Result:
    """As runtime.pipeline.run_pipeline, for the two-stage route: validate first, then build and run."""
    from runtime.pipeline import denormals_flushed, setup_triton_interpreter
    from runtime.request import resolve_device, validate

    plan = validate(req)
    setup_triton_interpreter()
    device = resolve_device(req.device)
    with torch.no_grad(), denormals_flushed(device):
        return run_two_stage(req, plan, device, progress)


BUILD_STAGES = ("build_text_encoder", "build_dit", "build_vaes", "build_upscaler_adapter", "build_refiner",
                "adaln_precompute", "to_fp8")


def summary_rows(res: Result) -> list[tuple[str, str]]:
    """(stage, seconds): build phase, warm-up, then the steady-state request stage by stage with per-step rows,
    its total and the first request's total."""
    t = res.timings_s
    rows = [(k, f"{t[k]:.3f}") for k in BUILD_STAGES if k in t]
    if "warmup" in t:
        rows.append(("warm-up (all stages, 1 forward each)", f"{t['warmup']['seconds']:.3f}"))
    for k in REQUEST_STAGES:
        if k in ("stage1", "stage2"):
            for i, s in enumerate(t.get(f"{k}_steps", [])):
                rows.append((f"{k} step {i + 1}", f"{s:.3f}"))
        if k in t:
            rows.append((k, f"{t[k]:.3f}"))
    rows += attention_rows(t)
    rows.append(("request total (steady state, sum of the stages)", f"{t['request_total']:.3f}"))
    rows.append(("  of which generation (all but mux)", f"{t['request_total_no_mux']:.3f}"))
    rows.append(("request wall time (stages + untimed glue)", f"{t['request_wall']:.3f}"))
    rows.append(("first request total", f"{t['first_request']['request_total']:.3f}"))
    return rows
