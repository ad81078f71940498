"""H3 -> LTX latent adapter (``h3_ltx_adapter_safetensors_v1``, H3_SPEC.md section 6), random weights from a seed.

Geometry (``pack_geometry``, no weights): the upscaled H3 latent [B, 24, T, H, W] becomes [B, 384, T_ltx, H/2, W/2].
H3 token k sits at pixel frame ``clip*17 + token*4`` (section 3; the last frame of ``vae_video.token_frames(k)``,
restated here so the adapter does not import the VAE), so T tokens cover F = position(T-1) + 1 frames (37 -> 124).
LTX latent i sits at frame 8i, with F padded up to 8k+1 frames (124 -> 129), so T_ltx = ceil((F - 1)/8) + 1
(37 -> 17, 9 -> 5). Channels are [linear 24 | slot0 24 | slot1 24 | slot2 24] = 96, then pixel-unshuffle x2 -> 384
(torch.pixel_unshuffle order: channel c*4 + 2*dy + dx).
- Linear: frame 8i is interpolated between the two H3 tokens whose positions bracket it; past the last token
  (frames 124..128 at full size) the last token is repeated (clamp, no extrapolation).
- Slots (our reading; the spec does not say which tokens): slot s of LTX latent i takes the H3 token nearest to
  frame ``8i - 8 + 8(s+1)/3`` (s = 0, 1, 2: three evenly spaced points of the frames (8i-8, 8i] that LTX latent i
  covers), ties to the lower token, so targets outside the token range clamp to the first/last token.

Model (spec): ``skip`` 1^3 conv 384 -> 128 plus the main path ``stem`` 3^3 conv 384 -> 752, 22 blocks, ``final_norm``
(GroupNorm) -> SiLU -> ``head`` 1^3 conv -> 128. Block: GN16 (eps 1e-6) -> SiLU -> ``spatial`` 1x3x3 ->
``temporal`` depthwise 3x1x1 -> SiLU -> ``in_proj`` 1^3 -> [value | gate] (2 x 1504) -> value * silu(gate) ->
``out_proj`` 1504 -> 752, added to the block input. Our readings: every conv has a bias (this gives 194,759,504
parameters, 194.8M as the spec says; without biases it would be 194.6M); ``final_norm`` is GN16 eps 1e-6 as in the
blocks; zero padding in space and time. Weights: ``runtime.model.init_random_``; fp32 (bf16 allowed on CUDA).

``adapt(z, keep=16)`` returns the first ``keep`` LTX frames (the Sol-H3 pipeline keeps 16 of 17); ``keep=None``
returns all. The input is taken as the pipeline's (normalised) H3 latent and the output is the LTX latent as the
head produces it: no statistics are applied here.

Checkpoint (``save_adapter`` / ``load_adapter_checkpoint``): one ``.safetensors`` whose metadata holds
``format = "h3_ltx_adapter_safetensors_v1"`` and ``manifest`` (JSON: format, config, tensors), keys = module names;
or a directory holding ``model.safetensors`` + ``manifest.json`` (the same JSON; in a directory the manifest.json
beside the file is the one checked). Loading checks everything from the
headers before reading a tensor and raises ``CheckpointError`` naming the file and key.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import SafetensorError
from safetensors.torch import save_file
from torch import nn

from runtime.checkpoint import CheckpointError, open_safetensors
from runtime.model import init_random_

FORMAT = "h3_ltx_adapter_safetensors_v1"
CLIP_LENGTH, CLIP_TOKENS, TOKEN_STRIDE = 17, 5, 4          # H3 VAE: a 17-frame clip is 5 tokens, 4 frames apart


@dataclass(frozen=True)
class AdapterConfig:
    in_ch: int = 384                 # 4 * (24 + 3*24) from the geometry
    out_ch: int = 128
    width: int = 752
    hidden: int = 1504
    blocks: int = 22
    groups: int = 16
    eps: float = 1e-6

    @classmethod
    def full(cls) -> AdapterConfig:
        return cls()

    @classmethod
    def tiny(cls) -> AdapterConfig:
        return cls(width=32, hidden=64, blocks=2, groups=8)


# ---------------------------------------------------------------------------------------------------- geometry
def h3_positions(T: int) -> list[int]:
    """Pixel frame of each of T H3 tokens: clip*17 + token*4 (= vae_video.token_frames(k)[1] - 1)."""
    return [(k // CLIP_TOKENS) * CLIP_LENGTH + (k % CLIP_TOKENS) * TOKEN_STRIDE for k in range(T)]


def ltx_frames(T: int) -> int:
    """LTX latent frames for T H3 tokens: their h3_positions(T)[-1] + 1 pixel frames padded to 8k+1
    (37 tokens -> 124 frames -> 129 -> 17)."""
    return -(-h3_positions(T)[-1] // 8) + 1


def resample_positions(T: int) -> tuple[list[int], list[int], list[float], list[list[int]]]:
    """For LTX latents i < ltx_frames(T): (lo, hi, w, slots). Linear: out[i] = (1-w[i]) z[lo[i]] + w[i] z[hi[i]];
    slots[i]: the 3 nearest-token indices. Integer arithmetic in thirds of a frame, so ties are exact."""
    pos = h3_positions(T)
    lo, hi, w, slots = [], [], [], []
    for i in range(ltx_frames(T)):
        p = 8 * i
        k = max(j for j in range(T) if pos[j] <= p)
        k1 = min(k + 1, T - 1)                                                  # past the last token: clamp
        lo.append(k)
        hi.append(k1)
        w.append((p - pos[k]) / (pos[k1] - pos[k]) if k1 > k else 0.0)
        targets3 = [24 * i - 24 + 8 * (s + 1) for s in range(3)]                 # 3 * (8i - 8 + 8(s+1)/3)
        slots.append([min(range(T), key=lambda j: (abs(3 * pos[j] - t3), j)) for t3 in targets3])
    return lo, hi, w, slots


def pack_geometry(z: torch.Tensor) -> torch.Tensor:
    """z: [B, C, T, H, W] (H, W even) -> [B, 16C, ltx_frames(T), H/2, W/2] in z's dtype (384 channels for C=24)."""
    B, C, T, H, W = z.shape
    lo, hi, w, slots = resample_positions(T)
    lo, hi, s = (torch.tensor(v, device=z.device) for v in (lo, hi, slots))    # s: [Tl, 3]
    wt = torch.tensor(w, dtype=z.dtype, device=z.device)[:, None, None]
    lin = (1 - wt) * z[:, :, lo] + wt * z[:, :, hi]                             # [B, C, Tl, H, W]
    packed = torch.cat([lin, *(z[:, :, s[:, j]] for j in range(3))], dim=1)     # [B, 4C, Tl, H, W]
    Tl = packed.shape[2]
    x = packed.transpose(1, 2).reshape(B * Tl, 4 * C, H, W)
    x = F.pixel_unshuffle(x, 2).reshape(B, Tl, 16 * C, H // 2, W // 2)
    return x.transpose(1, 2)


# ---------------------------------------------------------------------------------------------------- model
class AdapterBlock(nn.Module):
    def __init__(self, c: AdapterConfig):
        super().__init__()
        self.norm = nn.GroupNorm(c.groups, c.width, eps=c.eps)
        self.spatial = nn.Conv3d(c.width, c.width, (1, 3, 3), padding=(0, 1, 1))
        self.temporal = nn.Conv3d(c.width, c.width, (3, 1, 1), padding=(1, 0, 0), groups=c.width)
        self.in_proj = nn.Conv3d(c.width, 2 * c.hidden, 1)
        self.out_proj = nn.Conv3d(c.hidden, c.width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.silu(self.temporal(self.spatial(F.silu(self.norm(x)))))
        value, gate = self.in_proj(h).chunk(2, dim=1)
        return x + self.out_proj(value * F.silu(gate))


class H3LTXAdapter(nn.Module):
    def __init__(self, c: AdapterConfig):
        super().__init__()
        self.c = c
        self.skip = nn.Conv3d(c.in_ch, c.out_ch, 1)
        self.stem = nn.Conv3d(c.in_ch, c.width, 3, padding=1)
        self.blocks = nn.ModuleList(AdapterBlock(c) for _ in range(c.blocks))
        self.final_norm = nn.GroupNorm(c.groups, c.width, eps=c.eps)
        self.head = nn.Conv3d(c.width, c.out_ch, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [B, 384, Tl, H, W] packed geometry -> [B, 128, Tl, H, W]."""
        h = self.stem(x)
        for blk in self.blocks:
            h = blk(h)
        return self.skip(x) + self.head(F.silu(self.final_norm(h)))

    @torch.no_grad()
    def adapt(self, z: torch.Tensor, keep: int | None = 16) -> torch.Tensor:
        """z: [B, 24, T, H, W] upscaled H3 latent -> [B, 128, min(keep, ltx_frames(T)), H/2, W/2] fp32."""
        if z.dim() != 5 or 16 * z.shape[1] != self.c.in_ch or z.shape[3] % 2 or z.shape[4] % 2:
            raise ValueError(f"adapt expects [B, {self.c.in_ch // 16}, T, H, W] with even H, W, got {list(z.shape)}")
        y = self(pack_geometry(z.float()).to(self.stem.weight.dtype)).float()
        return y if keep is None else y[:, :, :keep]


def build_adapter(cfg: AdapterConfig, device: torch.device | str = "cpu", seed: int | None = 0,
                  dtype: torch.dtype = torch.float32) -> H3LTXAdapter:
    """Construct on the meta device, then materialise on ``device`` (in ``dtype``) and init from ``seed``;
    ``device="meta"`` returns shapes only, ``seed=None`` leaves the memory uninitialised (for loading)."""
    with torch.device("meta"):
        model = H3LTXAdapter(cfg)
    if str(device) == "meta":
        return model
    model.to_empty(device=device)
    if seed is not None:
        init_random_(model, seed)
    return model.to(dtype).eval().requires_grad_(False)


# ---------------------------------------------------------------------------------------------------- checkpoint
def manifest(model: H3LTXAdapter) -> dict:
    return {"format": FORMAT, "config": asdict(model.c), "tensors": len(model.state_dict())}


def save_adapter(path: str | os.PathLike, model: H3LTXAdapter) -> Path:
    """Write ``path`` (a ``.safetensors`` file), or ``path/model.safetensors`` + ``path/manifest.json`` when
    ``path`` does not end in ``.safetensors``. Returns the safetensors file."""
    p, man = Path(path), manifest(model)
    if p.suffix != ".safetensors":
        p.mkdir(parents=True, exist_ok=True)
        (p / "manifest.json").write_text(json.dumps(man, indent=2))
        p = p / "model.safetensors"
    tensors = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    save_file(tensors, str(p), metadata={"format": FORMAT, "manifest": json.dumps(man)})
    return p


def _read_manifest(f: Path, meta: dict, beside: Path | None) -> dict:
    if beside is not None:
        try:
            return json.loads(beside.read_text())
        except (OSError, ValueError) as e:
            raise CheckpointError(f"{beside}: not a readable JSON manifest ({e})") from None
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{f}: metadata key 'format' is {meta.get('format')!r}, expected {FORMAT!r}")
    try:
        return json.loads(meta["manifest"])
    except (KeyError, ValueError) as e:
        raise CheckpointError(f"{f}: metadata key 'manifest' is missing or not JSON ({e!r})") from None


def _config(src: Path, man: dict, expect: AdapterConfig | None) -> AdapterConfig:
    if not isinstance(man, dict) or man.get("format") != FORMAT:
        got = man.get("format") if isinstance(man, dict) else man
        raise CheckpointError(f"{src}: manifest key 'format' is {got!r}, expected {FORMAT!r}")
    cfg, names = man.get("config"), {f.name for f in fields(AdapterConfig)}
    if not isinstance(cfg, dict):
        raise CheckpointError(f"{src}: manifest key 'config' is missing or not an object")
    odd = sorted(names ^ set(cfg))
    if odd:
        why = "missing" if odd[0] in names else "unexpected"
        raise CheckpointError(f"{src}: manifest key 'config.{odd[0]}' is {why}")
    for k in sorted(names):
        v, d = cfg[k], getattr(AdapterConfig, k)
        if not isinstance(v, type(d)) or isinstance(v, bool) or v <= 0:
            raise CheckpointError(f"{src}: manifest key 'config.{k}' = {v!r} is not a positive {type(d).__name__}")
    c = AdapterConfig(**cfg)
    if expect is not None:
        for k in sorted(names):
            if getattr(c, k) != getattr(expect, k):
                raise CheckpointError(f"{src}: manifest key 'config.{k}' = {getattr(c, k)!r}, the caller expects "
                                      f"{getattr(expect, k)!r}")
    return c


@torch.no_grad()
def check_adapter_checkpoint(path: str | os.PathLike, expect: AdapterConfig | None = None
                             ) -> tuple[AdapterConfig, Path]:
    """Header-only check of a file or directory written by ``save_adapter``: the format, manifest (and
    ``expect``, if given), tensor count, key set and every shape. Returns (config, the safetensors file)."""
    p = Path(path)
    if not p.exists():
        raise CheckpointError(f"adapter checkpoint {p} does not exist")
    f, beside = (p / "model.safetensors", p / "manifest.json") if p.is_dir() else (p, None)
    if not f.is_file():
        raise CheckpointError(f"{f}: missing (an adapter directory holds model.safetensors + manifest.json)")
    with open_safetensors(f) as h:
        man = _read_manifest(f, h.metadata() or {}, beside)
        cfg = _config(beside or f, man, expect)
        shapes = {k: tuple(h.get_slice(k).get_shape()) for k in h.keys()}  # noqa: SIM118 (not a dict)
    try:
        want = {k: tuple(v.shape) for k, v in build_adapter(cfg, "meta").state_dict().items()}
    except ValueError as e:                                 # e.g. width not divisible by groups
        raise CheckpointError(f"{beside or f}: manifest key 'config' describes no valid adapter ({e})") from None
    for k, shape in want.items():
        if k not in shapes:
            raise CheckpointError(f"{f}: missing key {k!r}")
        if shapes[k] != shape:
            raise CheckpointError(f"{f}: key {k!r} has shape {shapes[k]}, the config expects {shape}")
    for k in shapes:
        if k not in want:
            raise CheckpointError(f"{f}: unexpected key {k!r}")
    if man.get("tensors") != len(shapes):
        raise CheckpointError(f"{beside or f}: manifest key 'tensors' = {man.get('tensors')!r}, {f} holds "
                              f"{len(shapes)} tensors")
    return cfg, f


def load_adapter_checkpoint(path: str | os.PathLike, device: torch.device | str = "cpu",
                            expect: AdapterConfig | None = None, dtype: torch.dtype = torch.float32) -> H3LTXAdapter:
    """Load a file or directory written by ``save_adapter``, after ``check_adapter_checkpoint``."""
    cfg, f = check_adapter_checkpoint(path, expect)
    model = build_adapter(cfg, device, seed=None, dtype=dtype)
    with open_safetensors(f) as h:
        for k, dst in model.state_dict().items():
            try:
                dst.copy_(h.get_tensor(k))
            except (SafetensorError, OSError, RuntimeError) as e:
                raise CheckpointError(f"{f}: key {k!r} could not be read ({e})") from None
    return model
