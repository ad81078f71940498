"""Wire formats of the Ulysses exchanges (H3_SPEC.md section 5, vllm-omni's records), and their projected time.

* ``bf16``: the packed tensors as they are (exact). QKV 768 B and output 256 B per (token, head).
* ``int8`` (lossy): UE5M3 block-int8 records. QKV, 400 B per (token, head): Q codes [0, 128), K [128, 256),
  V [256, 384), then the four group scales of Q [384, 388), K [388, 392), V [392, 396), zero [396, 400). Output,
  144 B: 128 values, 4 scales, 12 zero bytes (16-byte aligned; 0.5625x bf16).
* ``fp8`` (lossy): the output as 128 B of raw e4m3fn saturated at +-448, no scale; QKV stays bf16.

UE5M3 block-int8, per group of 32 values: ``scale = amax / 127`` with its mantissa rounded *up* to 3 bits, stored as
one byte ``(e + 15) << 3 | m`` (e in [-15, 16]) that decodes as ``2^(e) (1 + m / 8)``; values ``round-half-away(x /
scale)`` clamped to +-127 and stored as ``q + 127`` (uint8). Rounding the scale up keeps ``|x| / scale <= 127``, so
the clamp only acts at the exponent range's ends. The group's error is at most half a step, ``scale / 2``, i.e.
about ``amax / 254`` (x 1.125 for the rounded-up mantissa). The records have no NaN or Inf: a NaN is sent as 0 and
an Inf makes its group's scale the largest (2^16 x 1.875) and itself +-127 steps of it, so a non-finite activation
does not survive an int8 wire as it does the bf16 one (a lossy wire's stated limit).

Projection: at a link bandwidth B (bytes/s per GPU, each direction), the exchange of one rank takes about
``bytes_out / B``; ``projected_seconds`` says so for a wire's byte count. It is a projection from bytes, not a
measurement, and is labelled as such wherever it is reported.
"""

from __future__ import annotations

import torch

GROUP = 32
HEAD_DIM = 128
QKV_RECORD = 400
OUT_RECORD = 144
FP8_OUT_RECORD = 128
E_MIN, E_MAX = -15, 16
WIRES = ("bf16", "int8", "fp8")
BYTES_PER_TOKEN_HEAD = {"bf16": (3 * HEAD_DIM * 2, HEAD_DIM * 2), "int8": (QKV_RECORD, OUT_RECORD),
                        "fp8": (3 * HEAD_DIM * 2, FP8_OUT_RECORD)}   # (QKV exchange, output exchange)


# ------------------------------------------------------------------------------------------------ UE5M3 scales
def ue5m3_encode(amax: torch.Tensor) -> torch.Tensor:
    """fp32 group amax -> the scale byte (uint8): amax / 127 with the mantissa rounded up to 3 bits."""
    s = amax.float() / 127.0
    tiny = s <= 2.0 ** E_MIN
    m_, e_ = torch.frexp(torch.where(tiny, torch.ones_like(s), s))       # s = m_ 2^e_, m_ in [0.5, 1)
    e = e_.to(torch.int32) - 1                                            # s = (2 m_) 2^e, 2 m_ in [1, 2)
    frac = (2.0 * m_ - 1.0) * 8.0                                         # in [0, 8)
    m = torch.ceil(frac).to(torch.int32)
    e = torch.where(m == 8, e + 1, e)
    m = torch.where(m == 8, torch.zeros_like(m), m)
    over = e > E_MAX
    e = torch.clamp(e, E_MIN, E_MAX)
    m = torch.where(over, torch.full_like(m, 7), m)                       # the largest scale (clamped values)
    e = torch.where(tiny, torch.full_like(e, E_MIN), e)
    m = torch.where(tiny, torch.zeros_like(m), m)
    return (((e + 15) << 3) | m).to(torch.uint8)


def ue5m3_decode(code: torch.Tensor) -> torch.Tensor:
    """scale byte -> fp32 scale 2^(code >> 3 - 15) (1 + (code & 7) / 8)."""
    c = code.to(torch.int32)
    return torch.ldexp(1.0 + (c & 7).float() / 8.0, (c >> 3) - 15)


def _round_half_away(x: torch.Tensor) -> torch.Tensor:
    return torch.sign(x) * torch.floor(x.abs() + 0.5)


def int8_groups(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., 128] -> (value bytes uint8 [..., 128], scale bytes uint8 [..., 4])."""
    g = torch.nan_to_num(x.float().unflatten(-1, (-1, GROUP)), nan=0.0)   # [..., 4, 32]; NaN -> 0 (no NaN code)
    codes = ue5m3_encode(g.abs().amax(-1))                                 # [..., 4]
    q = _round_half_away(g / ue5m3_decode(codes)[..., None]).clamp(-127, 127)
    return (q + 127).to(torch.uint8).flatten(-2), codes


def int8_ungroup(vals: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """(value bytes [..., 128], scale bytes [..., 4]) -> fp32 [..., 128]."""
    q = vals.to(torch.int32).float().unflatten(-1, (-1, GROUP)) - 127.0
    return (q * ue5m3_decode(codes)[..., None]).flatten(-2)


# ------------------------------------------------------------------------------------------------ records
def encode_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """q, k, v [..., 128] -> the 400 B records uint8 [..., 400]."""
    out = torch.zeros((*q.shape[:-1], QKV_RECORD), dtype=torch.uint8, device=q.device)
    for i, t in enumerate((q, k, v)):
        vals, codes = int8_groups(t)
        out[..., i * HEAD_DIM:(i + 1) * HEAD_DIM] = vals
        out[..., 3 * HEAD_DIM + 4 * i:3 * HEAD_DIM + 4 * (i + 1)] = codes
    return out


def decode_qkv(rec: torch.Tensor, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """[..., 400] -> [..., 384] (q | k | v) in ``dtype``."""
    parts = [int8_ungroup(rec[..., i * HEAD_DIM:(i + 1) * HEAD_DIM],
                          rec[..., 3 * HEAD_DIM + 4 * i:3 * HEAD_DIM + 4 * (i + 1)]) for i in range(3)]
    return torch.cat(parts, -1).to(dtype)


def encode_out(o: torch.Tensor) -> torch.Tensor:
    """o [..., 128] -> the 144 B records uint8 [..., 144]."""
    out = torch.zeros((*o.shape[:-1], OUT_RECORD), dtype=torch.uint8, device=o.device)
    vals, codes = int8_groups(o)
    out[..., :HEAD_DIM], out[..., HEAD_DIM:HEAD_DIM + 4] = vals, codes
    return out


def decode_out(rec: torch.Tensor, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    return int8_ungroup(rec[..., :HEAD_DIM], rec[..., HEAD_DIM:HEAD_DIM + 4]).to(dtype)


def encode_fp8_out(o: torch.Tensor) -> torch.Tensor:
    """o [..., 128] -> 128 B of e4m3fn (saturated at +-448, no scale), as uint8."""
    return o.float().clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(torch.uint8)


def decode_fp8_out(rec: torch.Tensor, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    return rec.view(torch.float8_e4m3fn).to(dtype)


# ------------------------------------------------------------------------------------------------ projection
def exchange_bytes(wire: str, rows_per_rank: int, heads: int, world: int) -> dict[str, int]:
    """Bytes one rank sends to the others in one block's two exchanges (its own block stays local)."""
    if wire not in WIRES:
        raise ValueError(f"wire {wire!r}: use one of {', '.join(WIRES)}")
    qkv, out = BYTES_PER_TOKEN_HEAD[wire]
    share = (world - 1) / world
    return {"qkv": int(rows_per_rank * heads * qkv * share), "out": int(rows_per_rank * heads * out * share)}


def projected_seconds(nbytes: int, link_gbps: float) -> float:
    """A PROJECTION: seconds to move ``nbytes`` out of one GPU at ``link_gbps`` GB/s (1e9 bytes/s), no latency."""
    if link_gbps <= 0:
        raise ValueError(f"link bandwidth {link_gbps} GB/s: must be positive")
    return nbytes / (link_gbps * 1e9)
