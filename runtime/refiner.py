"""Stage 2: the LTX-2 refiner. diffusers 0.42.1's ``LTX2VideoTransformer3DModel`` holds the weights and every
module (at its full config: 48 layers, video 32 x 128 heads, audio 32 x 64, caption features 3840; 18.88B
parameters); this module runs its forward with our own block loop so that

- the block's memory-bound chains go through ``runtime.kernels`` (op groups ``ltx_modulate``,
  ``ltx_gate_residual_modulate``, ``ltx_qk_norm_rope``, ``gelu_tanh``), resolved per shape to a verified kernel
  or the reference;
  each block's closing gated residual is fused with the next block's norm1 modulation, as in the H3 blocks;
- every attention call goes through the run's ``runtime.attention.Attention`` (``kernels.attention``): the
  video self-attention may run Sol-Attn (``--attention sol``), self-attention FP8 (``--attention fp8``);
- the text cross-attention K/V (the prompt context does not change across steps) are computed once per request
  (``RefinerState.text_kv``: the reference-KV cache), not once per step.

With the reference ops the forward equals diffusers' own ``forward`` (tests/e2e/test_refiner.py compares them on a
tiny config). Supported: the LTX-2.0 block (``cross_attn_mod``/``gated_attn``/``perturbed_attn`` off), one
timestep per stream (a plain refine, no conditioning tokens), batch 1; both RoPE layouts (diffusers' class
default ``interleaved``, which ``full`` uses and the ``ltx_qk_norm_rope`` op group serves, and ``split``, which
diffusers' conversion script writes for the LTX-2.x releases: its QK-norm + RoPE run as diffusers' own code, no
op group yet). Any other value of the keys in ``UNSUPPORTED``/``REQUIRED`` is refused by name.

Sampling (H3_SPEC.md section 6): sigmas (0.909375, 0.725, 0.421875, 0), 3 Euler updates ``x += (s' - s) v``, the
model called at ``timestep = 1000 s``; the input is noised to sigma_0 as ``s0 * eps + (1 - s0) * z`` (the spec marks
this mix UNCONFIRMED).
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch
from diffusers import LTX2VideoTransformer3DModel
from diffusers.models.transformers.transformer_ltx2 import apply_interleaved_rotary_emb, apply_split_rotary_emb

from runtime import diffusers_folder
from runtime.checkpoint import CheckpointError
from runtime.model import init_random_

SIGMAS = (0.909375, 0.725, 0.421875, 0.0)
BF16 = torch.bfloat16

FULL: dict[str, Any] = {}                     # diffusers' defaults are the LTX-2 48-layer config
TINY: dict[str, Any] = {"num_layers": 2, "num_attention_heads": 2, "attention_head_dim": 32, "cross_attention_dim": 64,
                            "audio_num_attention_heads": 2, "audio_attention_head_dim": 16, "audio_cross_attention_dim": 32,
                            "caption_channels": 48}        # latent channels stay 128 (the LTX VAE's, the adapter's)
UNSUPPORTED = ("cross_attn_mod", "audio_cross_attn_mod", "gated_attn", "audio_gated_attn", "perturbed_attn")
# what the block loop and the ltx_* op groups assume (a config with another value is refused by name)
REQUIRED = {"norm_eps": 1e-6, "activation_fn": "gelu-approximate", "qk_norm": "rms_norm_across_heads",
            "norm_elementwise_affine": False, "patch_size": 1, "patch_size_t": 1, "audio_patch_size": 1,
            "audio_patch_size_t": 1, "use_prompt_embeddings": True}
ROPE_TYPES = ("interleaved", "split")


def refiner_config(name: str) -> dict[str, Any]:
    if name not in ("full", "tiny"):
        raise ValueError(f"unknown refiner config {name!r}; use full or tiny")
    return dict(FULL if name == "full" else TINY)


def _meta_model(kw: dict[str, Any]) -> LTX2VideoTransformer3DModel:
    bad = [f"{k}={kw[k]!r}" for k in UNSUPPORTED if kw.get(k)]
    bad += [f"{k}={kw[k]!r} (needs {v!r})" for k, v in REQUIRED.items() if k in kw and kw[k] != v]
    if kw.get("rope_type", "interleaved") not in ROPE_TYPES:
        bad.append(f"rope_type={kw['rope_type']!r}")
    if bad:
        raise NotImplementedError(f"refiner config {', '.join(bad)} is not supported by runtime/refiner.py")
    with torch.device("meta"):
        return LTX2VideoTransformer3DModel(**kw)


def check_refiner_folder(folder: str) -> tuple[dict[str, Any], dict]:
    """A diffusers ``transformer/`` folder of LTX-2, checked from its config and headers only (no tensor read):
    (constructor arguments, load plan). Errors name the file and the key."""
    cfg = diffusers_folder.read_config(folder, LTX2VideoTransformer3DModel.__name__, "LTX-2 transformer")
    kw, _unused, _ = LTX2VideoTransformer3DModel.extract_init_dict(cfg)    # keys diffusers does not know: ignored
    try:
        meta = _meta_model(kw)
    except (TypeError, ValueError, NotImplementedError) as e:
        raise CheckpointError(f"{folder}/config.json: {e}") from None
    return kw, diffusers_folder.check_tensors(meta, folder, what="LTX2VideoTransformer3DModel")


def build_refiner(config: str | dict[str, Any], device: torch.device, seed: int | None, folder: str | None = None
                  ) -> LTX2VideoTransformer3DModel:
    """The diffusers model on the meta device, then materialized on ``device`` with seeded random weights, or
    with the tensors of a diffusers ``folder`` (its config replaces ``config``). bf16 on CUDA, fp32 on the CPU."""
    plan = None
    if folder is not None:
        config, plan = check_refiner_folder(folder)
    model = _meta_model(refiner_config(config) if isinstance(config, str) else dict(config))
    model.to_empty(device=device)
    torch.nn.Module.to(model, BF16 if device.type == "cuda" else torch.float32)      # (ModelMixin.to warns)
    with torch.no_grad():
        if plan is not None:
            diffusers_folder.load_tensors(model, folder, plan)
        elif seed is not None:
            init_random_(model, seed, scale=lambda n: 0.5 if "scale_shift_table" in n else 1.0)
    return model.eval().requires_grad_(False)


def pack_video(z: torch.Tensor) -> torch.Tensor:
    """[1, C, F, H, W] -> [1, F*H*W, C] (patch size 1, diffusers' _pack_latents order)."""
    return z.flatten(2).transpose(1, 2)


def unpack_video(x: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    B, C, F_, H, W = shape
    return x.transpose(1, 2).reshape(B, C, F_, H, W)


@dataclass
class RefinerState:
    """Per request: RoPE tables, projected prompt context and the text K/V of every block (reference-KV cache)."""
    rope: tuple
    audio_rope: tuple
    ca_rope: tuple
    ca_audio_rope: tuple
    text_kv: list = field(default_factory=list)          # per block: (k, v, audio_k, audio_v)
    ca_rope_q: tuple | None = None     # Ulysses: ca_rope cut to this rank's video rows (the a2v queries)


def _rows_of(t: torch.Tensor, rows: slice, n: int) -> torch.Tensor:
    """t with its row dimension (the first of size n after the batch) cut to ``rows``."""
    for dim in range(1, t.dim()):
        if t.shape[dim] == n:
            return t[(slice(None),) * dim + (rows,)]
    return t


class Refiner:
    """``prepare`` once per request, then ``forward`` per step. ``kernels`` is a runtime.kernels.Kernels."""

    def __init__(self, model: LTX2VideoTransformer3DModel, kernels):
        self.m, self.k = model, kernels
        self.dtype = next(model.parameters()).dtype
        self.sp = None              # this forward's runtime.ulysses.Ulysses when the video rows are split (forward)
        self.sp_note = ""

    # ------------------------------------------------------------------------------------------ per request
    @torch.no_grad()
    def prepare(self, ctx: torch.Tensor, audio_ctx: torch.Tensor, frames: int, height: int, width: int,
                audio_frames: int, fps: float = 24.0) -> RefinerState:
        m, dev = self.m, ctx.device
        vc = m.rope.prepare_video_coords(1, frames, height, width, dev, fps=fps)
        ac = m.audio_rope.prepare_audio_coords(1, audio_frames, dev)
        st = RefinerState(m.rope(vc, device=dev), m.audio_rope(ac, device=dev),
                          m.cross_attn_rope(vc[:, 0:1, :], device=dev),
                          m.cross_attn_audio_rope(ac[:, 0:1, :], device=dev))
        c = m.caption_projection(ctx.to(self.dtype))                                        # [1, L, D]
        ca = m.audio_caption_projection(audio_ctx.to(self.dtype))                           # [1, L, Da]
        for blk in m.transformer_blocks:
            st.text_kv.append((*self._kv(blk.attn2, c), *self._kv(blk.audio_attn2, ca)))
        return st

    @staticmethod
    def _kv(attn, ctx):
        return attn.norm_k(attn.to_k(ctx)), attn.to_v(ctx)

    # ------------------------------------------------------------------------------------------ per step
    def _temb(self, sigma: float, B: int = 1):
        m, dt = self.m, self.dtype
        t = torch.full((B,), 1000.0 * sigma, device=m.proj_in.weight.device)
        temb, emb = m.time_embed(t, batch_size=B, hidden_dtype=dt)
        atemb, aemb = m.audio_time_embed(t, batch_size=B, hidden_dtype=dt)
        gate_f = m.config.cross_attn_timestep_scale_multiplier / m.config.timestep_scale_multiplier
        vss, _ = m.av_cross_attn_video_scale_shift(t, batch_size=B, hidden_dtype=dt)
        vg, _ = m.av_cross_attn_video_a2v_gate(t * gate_f, batch_size=B, hidden_dtype=dt)
        ass, _ = m.av_cross_attn_audio_scale_shift(t, batch_size=B, hidden_dtype=dt)
        ag, _ = m.av_cross_attn_audio_v2a_gate(t * gate_f, batch_size=B, hidden_dtype=dt)
        v = lambda x: x.view(B, -1, x.shape[-1])
        return {"temb": v(temb), "emb": v(emb), "atemb": v(atemb), "aemb": v(aemb), "vss": v(vss), "vg": v(vg), "ass": v(ass),
                    "ag": v(ag)}

    @torch.no_grad()
    def forward(self, video: torch.Tensor, audio: torch.Tensor, sigma: float, st: RefinerState
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """video [1, Nv, C], audio [1, Na, Ca] -> velocities of the same shapes (fp32)."""
        m = self.m
        te = self._temb(sigma)
        x = m.proj_in(video.to(self.dtype))[0]                                             # [Nv, D]
        self.sp, st = self._split(x.shape[0], st)
        if self.sp is not None:
            x = x[self.sp.rows(x.shape[0])]                                                # [Nv / W, D]
        a = m.audio_proj_in(audio.to(self.dtype))[0]                                       # [Na, Da]
        blocks = list(m.transformer_blocks)
        mods = [self._mods(b, te) for b in blocks]
        h = self._mod(x, mods[0]["v"][1], mods[0]["v"][0])
        ha = self._mod(a, mods[0]["a"][1], mods[0]["a"][0])
        for i, blk in enumerate(blocks):
            self.k.attention.at(layer=i)
            nxt = mods[i + 1] if i + 1 < len(blocks) else None
            x, a, h, ha = self._block(blk, x, a, h, ha, mods[i], nxt, st, st.text_kv[i])
        out = self._final(x, m.scale_shift_table, te["emb"], m.norm_out, m.proj_out)
        if self.sp is not None:
            out = self.sp.gather_rows(out)
        aout = self._final(a, m.audio_scale_shift_table, te["aemb"], m.audio_norm_out, m.audio_proj_out)
        return out[None].float(), aout[None].float()

    def _split(self, nv: int, st: RefinerState):
        """Ulysses over the video rows (runtime/ulysses.py) when kernels.sp has more than one rank and the rows and
        heads divide: (sp, the state with the video RoPE tables cut to this rank's rows for its queries; the full
        ``ca_rope`` stays for the video keys of video-to-audio attention). Else (None, st), noted once."""
        sp = getattr(self.k, "sp", None)
        if sp is None or sp.world <= 1:
            return None, st
        heads = self.m.transformer_blocks[0].attn1.heads
        if nv % sp.world or heads % sp.world:
            self.sp_note = (f"LTX-2 refiner replicated on every rank: {nv} video rows / {heads} heads do not split "
                            f"{sp.world} ways")
            return None, st
        self.sp_note = (f"LTX-2 refiner: video rows split {sp.world} ways (Ulysses self-attention; video rows "
                        "all-gathered for video-to-audio attention; audio rows replicated)")
        rows = sp.rows(nv)
        cut = lambda rope: tuple(_rows_of(t, rows, nv) for t in rope)
        return sp, dataclasses.replace(st, rope=cut(st.rope), ca_rope_q=cut(st.ca_rope))

    @staticmethod
    def _final(x, table, emb, norm, proj):
        ss = table[None, None] + emb[:, :, None]
        shift, scale = ss[0, :, 0], ss[0, :, 1]
        return proj(norm(x) * (1 + scale) + shift)

    @staticmethod
    def _mods(blk, te) -> dict[str, Any]:
        """The block's modulation vectors, each [D] (one timestep): video/audio 6 params, a2v/v2a scale/shift,
        gates (diffusers ``get_mod_params``)."""
        def params(table, temb):
            return [p[0, 0] for p in blk.get_mod_params(table, temb, 1)]
        v, a = params(blk.scale_shift_table, te["temb"]), params(blk.audio_scale_shift_table, te["atemb"])
        vca = params(blk.video_a2v_cross_attn_scale_shift_table[:4], te["vss"])
        vg = params(blk.video_a2v_cross_attn_scale_shift_table[4:], te["vg"])[0]
        aca = params(blk.audio_a2v_cross_attn_scale_shift_table[:4], te["ass"])
        ag = params(blk.audio_a2v_cross_attn_scale_shift_table[4:], te["ag"])[0]
        return {"v": v, "a": a, "vca": vca, "vg": vg, "aca": aca, "ag": ag}

    # ------------------------------------------------------------------------------------------ fused ops
    def _mod(self, x, scale, shift):
        return self.k.call("ltx_modulate", x, scale, shift)

    def _grm(self, x, branch, gate, scale, shift):
        return self.k.call("ltx_gate_residual_modulate", x, branch, gate, scale, shift)

    def _ff(self, ff, h):
        """diffusers FeedForward (GELU(proj, tanh) -> dropout -> Linear) with the activation through ``gelu_tanh``."""
        return ff.net[2](self.k.call("gelu_tanh", ff.net[0].proj(h)))

    def _attn(self, attn, hq, hkv=None, rope=None, krope=None, kv=None, sparse=False):
        """diffusers' LTX2AudioVideoAttnProcessor on 2-D rows; QK-norm + RoPE of self-attention through the
        ``ltx_qk_norm_rope`` op, cross-modal RoPE and norm-only paths in torch as diffusers does them."""
        q = attn.to_q(hq)
        if kv is not None:                                   # text cross-attention: cached K (normed) and V
            k, v = kv[0][0], kv[1][0]
            q = attn.norm_q(q)
        else:
            src = hq if hkv is None else hkv
            k, v = attn.to_k(src), attn.to_v(src)
            if rope is not None and krope is None and attn.rope_type == "interleaved":
                q, k = self.k.call("ltx_qk_norm_rope", q, k, attn.norm_q.weight, attn.norm_k.weight,
                                   rope[0][0], rope[1][0])
            else:                    # cross-modal RoPE, or the split layout (no op group for it yet)
                q, k = attn.norm_q(q), attn.norm_k(k)
                if rope is not None:
                    apply = apply_interleaved_rotary_emb if attn.rope_type == "interleaved" else apply_split_rotary_emb
                    q = apply(q[None], rope)[0]
                    k = apply(k[None], krope or rope)[0]
        H = attn.heads
        if kv is None and hkv is None:                       # self-attention: one document
            at, n = self.k.attention, q.shape[0]
            if sparse and self.sp is not None:               # the video rows are split: Ulysses around it
                at.sp, n = self.sp, n * self.sp.world
            try:
                o = at.self_attn(*(t.unflatten(-1, (H, -1)) for t in (q, k, v)), [0, n], sparse=sparse)  # [S, H*d]
            finally:
                at.sp = None
        else:
            o = self.k.attention.cross(*(t.unflatten(-1, (H, -1)) for t in (q, k, v)))            # [S, H * d]
        return attn.to_out[0](o.to(q.dtype))

    def _block(self, blk, x, a, h, ha, md, nxt, st: RefinerState, text_kv):
        """One LTX-2.0 block in diffusers' order; ``h``/``ha`` are this block's norm1-modulated inputs (fused into
        the previous block's closing residual). Returns x, a and the next block's h, ha (None for the last)."""
        _sh, sc, g_msa, sh_mlp, sc_mlp, g_mlp = md["v"]
        _ash, asc, ag_msa, ash_mlp, asc_mlp, ag_mlp = md["a"]
        zero, azero = torch.zeros_like(sc), torch.zeros_like(asc)
        # 1. self-attention, then the gated residual fused with norm2 (no modulation in LTX-2.0)
        x, n2 = self._grm(x, self._attn(blk.attn1, h, rope=st.rope, sparse=True), g_msa, zero, zero)
        a, an2 = self._grm(a, self._attn(blk.audio_attn1, ha, rope=st.audio_rope), ag_msa, azero, azero)
        # 2. text cross-attention (ungated residual) with the cached K/V
        x = x + self._attn(blk.attn2, n2, kv=(text_kv[0], text_kv[1]))
        a = a + self._attn(blk.audio_attn2, an2, kv=(text_kv[2], text_kv[3]))
        # 3. audio-to-video and video-to-audio cross-attention
        v_a2v_sc, v_a2v_sh, v_v2a_sc, v_v2a_sh = md["vca"]
        a_a2v_sc, a_a2v_sh, a_v2a_sc, a_v2a_sh = md["aca"]
        hv_a2v, hv_v2a = self._mod(x, v_a2v_sc, v_a2v_sh), self._mod(x, v_v2a_sc, v_v2a_sh)
        ha_a2v, ha_v2a = self._mod(a, a_a2v_sc, a_a2v_sh), self._mod(a, a_v2a_sc, a_v2a_sh)
        if self.sp is not None:                              # audio attends to every video row
            hv_v2a = self.sp.gather_rows(hv_v2a)
        a2v = self._attn(blk.audio_to_video_attn, hv_a2v, ha_a2v, rope=st.ca_rope_q or st.ca_rope,
                         krope=st.ca_audio_rope)
        v2a = self._attn(blk.video_to_audio_attn, ha_v2a, hv_v2a, rope=st.ca_audio_rope, krope=st.ca_rope)
        x, h3 = self._grm(x, a2v, md["vg"], sc_mlp, sh_mlp)
        a, ha3 = self._grm(a, v2a, md["ag"], asc_mlp, ash_mlp)
        # 4. feed-forward; its gated residual fused with the next block's norm1 modulation
        ff, aff = self._ff(blk.ff, h3), self._ff(blk.audio_ff, ha3)
        if nxt is None:
            return x + ff * g_mlp, a + aff * ag_mlp, None, None
        x, h = self._grm(x, ff, g_mlp, nxt["v"][1], nxt["v"][0])
        a, ha = self._grm(a, aff, ag_mlp, nxt["a"][1], nxt["a"][0])
        return x, a, h, ha


def refine(refiner: Refiner, z: torch.Tensor, audio: torch.Tensor, st: RefinerState, seed: int,
           sigmas=SIGMAS, timer=None, on_step=None, trace: list | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """z: LTX latent [1, 128, F, H, W] (the adapter's output), audio: packed audio latents [1, Na, 128] (noise).
    Noised to sigma_0 from a CPU generator (seed + 2), then len(sigmas) - 1 Euler updates. fp32 in and out.
    ``timer``: a runtime.pipeline.Timer; each update is appended to its ``stage2_steps`` list. ``trace``: the
    video latent [1, 128, F, H, W] after each update is appended to it (runtime/attention_quality.py)."""
    g = torch.Generator().manual_seed(seed + 2)
    eps = torch.randn(z.shape, generator=g).to(z.device)
    x = pack_video(sigmas[0] * eps + (1 - sigmas[0]) * z.float())
    a = audio.float()
    attn = refiner.k.attention
    for i, (s, s2) in enumerate(itertools.pairwise(sigmas)):
        t0 = time.perf_counter()
        attn.at("stage2", step=i)
        with timer("stage2_steps") if timer else nullcontext():
            v, va = refiner.forward(x, a, s, st)
            x, a = x + (s2 - s) * v, a + (s2 - s) * va
        if on_step:
            on_step(i, time.perf_counter() - t0)
        if trace is not None:
            trace.append(unpack_video(x, tuple(z.shape)).clone())
    attn.at("other")
    return unpack_video(x, tuple(z.shape)), a
