"""FP8 attention through cuDNN's fused FP8 SDPA (``sdpa_fp8`` of nvidia-cudnn-frontend; Hopper and later).

A library path, like ``Fp8Linear``'s ``torch._scaled_mm``: the ``attention_fp8`` op's signature and class
(rsi/refs/attention_fp8.py: q, k, v [S, H, D] bf16 with any strides, cu_seqlens int32 [n_docs + 1] -> contiguous
[S, H, D] bf16; e4m3 inputs, lossy), judged as its incumbent ``cudnn_fp8`` (rsi/refs/attention_baselines.py) and
run by ``--attention fp8`` where no verified kernel serves (runtime/attention.py).

cuDNN's graph takes one scalar descale per tensor, while the op quantises per head (q's heads may lie 2^16 apart,
beyond e4m3's range). Per-head range is kept with scalar descales:

* per head h, over every row: ``aq_h, ak_h, av_h = max |q|, max |k|, max |v|`` (``head_amax``; NaN or Inf when the
  head holds one);
* q and k share the score's scale: with ``p_h = aq_h ak_h`` and ``P = max p_h`` over the finite heads, head h is
  quantised with ``sq_h = aq_h / t_h`` and ``sk_h = ak_h / t_h``, ``t_h = 448 sqrt(p_h / P)``, so that
  ``sq_h sk_h = P / 448^2 = c`` for every head: the scores are ``c (q8 . k8) / sqrt(D)`` with one descale c (computed
  in fp64, then fp32, floored at 2^-100: below it |scores| < 2^-79, whose exp is exactly 1 in fp32, so the softmax
  is uniform either way (for D <= 256); cuDNN gave NaN for every output with a descale of 2^-126, fp32's smallest normal, and none
  with 1: runs 38-40, reports/h200/probe40.py; scales below 2^-100 are also lifted by 2^64, exactly, for the
  quotient and the output's product, ``_lifted``). The
  head with the largest |q||k| uses e4m3's whole range; a head whose product is r times smaller loses sqrt(r) of
  range on q and on k (still e4m3's 3-bit mantissa while its values stay above 2^-6 of the scale). A head with
  ``p_h = 0`` (q or k all zero: scores 0) uses ``max / 448`` or 1 per tensor.
* v per head as the op: ``sv_h = av_h / 448`` (1 for a zero head), descale 1 in the graph; the output is e4m3 with
  ``scale_o`` 1 (on Hopper cuDNN's FP8 attention writes FP8 only: "HALF/BFLOAT16 output is only supported on
  Blackwell", H200 run 37; |O| <= max |v8| <= 448, so it never saturates), then ``bf16(O8 * sv_h)`` per head
  (``_dequantise_kernel``). That output rounding (e4m3's 3-bit mantissa once more) is on top of the op's own error;
* P (the probabilities, at most 1 before the softmax's final division) enters the PV product as e4m3 with scale
  ``S_SCALE`` = 256 (FA3's scheme; cuDNN's ``scale_s`` / ``descale_s``), accumulation in fp32;
* a head whose q, k or v holds a NaN or Inf: every output of that head is NaN (as the op).

Quantisation: Triton kernels for the per-head amax (on bf16 bit patterns: NaN > Inf > finite), the quotient
``x / s_h`` rounded to e4m3 (nearest even, saturating at 448, NaN kept) and the output's per-head scale. cuDNN
runs per document, one graph per (rows, heads, head dim) built once and cached with every execution plan cuDNN's heuristics offer; the first
call with a document of at least ``TUNE_ROWS`` rows times them and keeps the fastest (``plans()`` lists what was
chosen; shorter documents keep the heuristics' first plan). A document is a [1, H, n, D] view of the contiguous
e4m3 buffers and of the output. A document shape cuDNN has no plan for (one row on Hopper) runs the same
arithmetic in torch (fp32 P) when its scores fit ``EMULATE_MAX``, else ``Unsupported`` is raised (the runtime then
runs the op group's reference, with a warning). ``available()`` says whether this path can run here and why not.
"""

from __future__ import annotations

import functools
import itertools
import math

import torch
import triton
import triton.language as tl

E4M3_MAX = 448.0
S_SCALE = 256.0          # P (<= 1) -> e4m3 for the PV product
BLOCK_S = 64             # rows per program of the Triton kernels
TUNE_ROWS = 1024         # documents of at least this many rows time every cuDNN plan on their first call
TUNE_CALLS = 3
LIFT, LIFT_BELOW = 2.0 ** 64, 2.0 ** -100
EMULATE_MAX = 2 ** 26      # scores a document without a cuDNN plan may have for the torch stand-in (256 MiB)
C_MIN = 2.0 ** -100      # the score descale's floor: below it |scores| < 2^-79 and every exp is exactly 1 either way

# graph tensor uids
_Q, _K, _V, _O, _DQ, _DK, _DV, _DS, _SS, _SO, _AS, _AO = range(12)


@triton.jit
def _amax_kernel(x_ptr, out_ptr, S, H, D, sxs, sxh, sxd,
                 BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr):
    """out[pid_s, h] = max over BLOCK_S rows and D columns of head h of |x|'s bf16 bits (int16, sign cleared)."""
    pid_s, h = tl.program_id(0), tl.program_id(1)
    rows = pid_s * BLOCK_S + tl.arange(0, BLOCK_S)
    cols = tl.arange(0, BLOCK_D)
    m = (rows[:, None] < S) & (cols[None, :] < D)
    ptr = x_ptr + rows.to(tl.int64)[:, None] * sxs + h.to(tl.int64) * sxh + cols.to(tl.int64)[None, :] * sxd
    x = tl.load(ptr, mask=m, other=0.0)
    bits = x.to(tl.int16, bitcast=True) & 0x7FFF
    tl.store(out_ptr + pid_s * H + h, tl.max(tl.max(bits, axis=1), axis=0))


@triton.jit
def _quantise_kernel(x_ptr, s_ptr, lift_ptr, y_ptr, S, H, D, sxs, sxh, sxd,
                     BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr):
    """y[r, h, :] = e4m3((x[r, h, :] * lift[h]) / s[h]), y contiguous [S, H, D]; saturating at 448, NaN kept. s is
    the scale times lift (a power of two: the same quotient, with no subnormal divisor for the GPU to flush)."""
    pid_s, h = tl.program_id(0), tl.program_id(1)
    rows = pid_s * BLOCK_S + tl.arange(0, BLOCK_S)
    cols = tl.arange(0, BLOCK_D)
    m = (rows[:, None] < S) & (cols[None, :] < D)
    r64, c64 = rows.to(tl.int64)[:, None], cols.to(tl.int64)[None, :]
    x = tl.load(x_ptr + r64 * sxs + h.to(tl.int64) * sxh + c64 * sxd, mask=m, other=0.0).to(tl.float32)
    q = tl.div_rn(x * tl.load(lift_ptr + h), tl.load(s_ptr + h))
    q = tl.where(q == q, tl.minimum(tl.maximum(q, -448.0), 448.0), q)  # noqa: PLR0124 (NaN stays NaN)
    tl.store(y_ptr + (r64 * H + h) * D + c64, q.to(tl.float8e4nv), mask=m)


@triton.jit
def _dequantise_kernel(o_ptr, s_ptr, unlift_ptr, y_ptr, S, H, D, BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr):
    """y[r, h, :] = bf16((o[r, h, :] * s[h]) * unlift[h]) for contiguous [S, H, D] o (e4m3) and y (bf16); s is the
    scale times lift, as in _quantise_kernel, unlift = 1 / lift (exact: a power of two)."""
    pid_s, h = tl.program_id(0), tl.program_id(1)
    rows = pid_s * BLOCK_S + tl.arange(0, BLOCK_S)
    cols = tl.arange(0, BLOCK_D)
    m = (rows[:, None] < S) & (cols[None, :] < D)
    off = (rows.to(tl.int64)[:, None] * H + h) * D + cols.to(tl.int64)[None, :]
    o = tl.load(o_ptr + off, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + off, ((o * tl.load(s_ptr + h)) * tl.load(unlift_ptr + h)).to(tl.bfloat16), mask=m)


def _grid(S: int, H: int) -> tuple[int, int]:
    return (triton.cdiv(S, BLOCK_S), H)


def head_amax(x: torch.Tensor) -> torch.Tensor:
    """x [S, H, D] bf16 (any strides) -> fp32 [H]: max |x| per head (NaN if the head holds a NaN, else Inf if an
    Inf); 0 for no rows."""
    S, H, D = x.shape
    if S == 0 or D == 0:
        return torch.zeros(H, dtype=torch.float32, device=x.device)
    part = torch.empty((triton.cdiv(S, BLOCK_S), H), dtype=torch.int16, device=x.device)
    _amax_kernel[_grid(S, H)](x, part, S, H, D, *x.stride(), BLOCK_S=BLOCK_S, BLOCK_D=triton.next_power_of_2(D))
    return part.amax(0).view(torch.bfloat16).float()


def _lifted(scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(scale * lift, lift) with lift = 2^64 where |scale| < 2^-100 (a margin above fp32's subnormals, which the
    GPU may flush), else 1; both exact. The quotient and the output's product use the lifted scale."""
    lift = torch.where(scale.abs() < LIFT_BELOW, torch.full_like(scale, LIFT), torch.ones_like(scale))
    return scale * lift, lift


def quantise(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x [S, H, D] bf16 (any strides), scale fp32 [H] -> contiguous float8_e4m3fn [S, H, D] (module docstring)."""
    S, H, D = x.shape
    y = torch.empty((S, H, D), dtype=torch.float8_e4m3fn, device=x.device)
    if S and D:
        _quantise_kernel[_grid(S, H)](x, *_lifted(scale), y, S, H, D, *x.stride(),
                                      BLOCK_S=BLOCK_S, BLOCK_D=triton.next_power_of_2(D))
    return y


def dequantise(o8: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """o8 contiguous float8_e4m3fn [S, H, D], scale fp32 [H] -> contiguous bf16 [S, H, D], o8 * scale_h."""
    if not o8.is_contiguous():
        raise ValueError("dequantise reads o8 as a contiguous [S, H, D] tensor")
    S, H, D = o8.shape
    y = torch.empty((S, H, D), dtype=torch.bfloat16, device=o8.device)
    if S and D:
        lifted, lift = _lifted(scale)
        _dequantise_kernel[_grid(S, H)](o8, lifted, 1.0 / lift, y, S, H, D, BLOCK_S=BLOCK_S,
                                        BLOCK_D=triton.next_power_of_2(D))
    return y


def scales(aq: torch.Tensor, ak: torch.Tensor, av: torch.Tensor):
    """Per-head amax fp32 [H] of q, k, v -> (sq, sk, sv fp32 [H], c fp32 [1], bad bool [H]) (module docstring)."""
    aq, ak, av = aq.double(), ak.double(), av.double()
    bad = ~(torch.isfinite(aq) & torch.isfinite(ak) & torch.isfinite(av))
    p = torch.where(bad, torch.zeros_like(aq), aq * ak)
    pmax = p.max()
    c = torch.where(pmax > 0, (pmax / E4M3_MAX ** 2).clamp(min=C_MIN), torch.ones_like(pmax))
    t = E4M3_MAX * torch.sqrt(p / torch.where(pmax > 0, pmax, torch.ones_like(pmax)))
    one = torch.ones_like(aq)

    def own(a):                          # a head with p = 0: the op's per-tensor rule
        return torch.where(a > 0, a / E4M3_MAX, one)

    sq = torch.where(p > 0, aq / torch.where(p > 0, t, one), own(aq))
    sk = torch.where(p > 0, ak / torch.where(p > 0, t, one), own(ak))
    sq, sk = (torch.where(bad, one, s) for s in (sq, sk))
    sv = torch.where(bad, one, own(av))
    return sq.float(), sk.float(), sv.float(), c.float().reshape(1), bad


def available(device: torch.device | None = None) -> tuple[bool, str]:
    """(True, "") where cuDNN's FP8 attention can run on ``device`` (default: the current CUDA device); the answer
    is computed once per device (the runtime asks on every attention call)."""
    if not torch.cuda.is_available():
        return False, "no CUDA device"
    dev = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
    if dev.type != "cuda":
        return False, f"device {dev} is not CUDA"
    return _available(dev.index if dev.index is not None else torch.cuda.current_device())


@functools.cache
def _available(index: int) -> tuple[bool, str]:
    if torch.cuda.get_device_capability(index)[0] < 9:
        return False, "cuDNN's FP8 attention needs compute capability 9.0 (Hopper) or later"
    try:
        import cudnn  # noqa: F401
    except ImportError as e:
        return False, f"nvidia-cudnn-frontend is not installed ({e}); pip install nvidia-cudnn-frontend"
    return True, ""


@functools.cache
def _handle(device_index: int):
    import cudnn

    with torch.cuda.device(device_index):
        return cudnn.create_handle()


class _Doc:
    """cuDNN's graph for documents of n rows (q, k, v and out e4m3 [1, H, n, D] with row stride H * D, scalar
    descales, no mask, scale 1 / sqrt(D), no softmax stats), every execution plan its heuristics offer built, and
    the fastest of them on the first call with at least ``TUNE_ROWS`` rows (CUDA events, ``TUNE_CALLS`` calls per
    plan after one warm-up; below that the heuristics' first plan). ``graph`` is None where cuDNN has no plan for
    this shape (one query row on Hopper: "s_q=1 on Hopper should go into sm80", whose engines take no FP8)."""

    def __init__(self, n: int, H: int, D: int, device_index: int):
        import cudnn

        self.n, self.plan, self.plans, self.why = n, 0, [], ""
        g = cudnn.pygraph(io_data_type=cudnn.data_type.FP8_E4M3, intermediate_data_type=cudnn.data_type.FLOAT,
                          compute_data_type=cudnn.data_type.FLOAT, handle=_handle(device_index))
        dim, stride = (1, H, n, D), (n * H * D, D, H * D, 1)
        q, k, v = (g.tensor(uid=u, dim=dim, stride=stride, data_type=cudnn.data_type.FP8_E4M3)
                   for u in (_Q, _K, _V))
        one = {"dim": (1, 1, 1, 1), "stride": (1, 1, 1, 1), "data_type": cudnn.data_type.FLOAT}
        dq, dk, dv, ds, ss, so = (g.tensor(uid=u, **one) for u in (_DQ, _DK, _DV, _DS, _SS, _SO))
        o, _, amax_s, amax_o = g.sdpa_fp8(q=q, k=k, v=v, descale_q=dq, descale_k=dk, descale_v=dv, descale_s=ds,
                                          scale_s=ss, scale_o=so, generate_stats=False,
                                          attn_scale=1.0 / math.sqrt(D), use_causal_mask=False)
        o.set_uid(_O).set_output(True).set_dim(dim).set_stride(stride).set_data_type(cudnn.data_type.FP8_E4M3)
        for t, u in ((amax_s, _AS), (amax_o, _AO)):
            t.set_uid(u).set_output(True).set_dim((1, 1, 1, 1)).set_stride((1, 1, 1, 1)).set_data_type(
                cudnn.data_type.FLOAT)
        try:
            g.validate()
            g.build_operation_graph()
            g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
            g.check_support()
        except cudnn.cudnnGraphNotSupportedError as e:
            self.graph, self.why = None, str(e).splitlines()[0]
            return
        self.failed: dict[int, str] = {}
        for i in range(g.get_execution_plan_count()):
            try:
                g.build_plan_at_index(i)
            except Exception as e:          # noqa: BLE001 - a plan cuDNN cannot build here is skipped, and kept
                self.failed[i] = str(e).splitlines()[0] if str(e) else type(e).__name__
            else:
                self.plans.append(i)
        if not self.plans:
            self.graph, self.why = None, "no execution plan could be built"
            return
        self.graph, self.plan, self.tuned = g, self.plans[0], n < TUNE_ROWS or len(self.plans) == 1
        self.names = {i: g.get_plan_name_at_index(i) for i in self.plans}
        size = max(g.get_workspace_size_plan_at_index(i) for i in self.plans)
        self.ws = torch.empty(size, dtype=torch.uint8, device=torch.device("cuda", device_index))
        self.timings_ms: dict[str, float] = {}

    def run(self, pack: dict, handle) -> None:
        if not self.tuned:
            self._tune(pack, handle)
        self.graph.execute_plan_at_index(pack, self.ws, self.plan, handle=handle)

    def _tune(self, pack: dict, handle) -> None:
        for i in self.plans:
            self.graph.execute_plan_at_index(pack, self.ws, i, handle=handle)
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
            ev[0].record()
            for _ in range(TUNE_CALLS):
                self.graph.execute_plan_at_index(pack, self.ws, i, handle=handle)
            ev[1].record()
            ev[1].synchronize()
            self.timings_ms[self.names[i]] = ev[0].elapsed_time(ev[1]) / TUNE_CALLS
        self.plan = min(self.plans, key=lambda i: self.timings_ms[self.names[i]])
        self.tuned = True


_DOCS: dict[tuple[int, int, int, int], _Doc] = {}      # (rows, heads, head dim, device) -> graph and plans


def plans() -> list[dict]:
    """Per document shape served so far: the plan in use and every plan's tuning time (ms), or why cuDNN has none."""
    return [{"rows": d.n, "why_none": d.why} if d.graph is None else
            {"rows": d.n, "plan": d.names[d.plan], "tuning_ms": dict(d.timings_ms)} for d in _DOCS.values()]


def _emulated(q8, k8, v8, c, D: int) -> torch.Tensor:
    """One document the graph cannot take, in torch with the graph's arithmetic but for P (fp32 here): [n, H, D]
    e4m3 in, e4m3 out."""
    qd, kd, vd = (t.float().transpose(0, 1) for t in (q8, k8, v8))
    p = torch.softmax((qd @ kd.transpose(1, 2)) * (c * (1.0 / math.sqrt(D))), dim=-1)
    o = (p @ vd).transpose(0, 1)
    return torch.where(o.isnan(), o, o.clamp(-E4M3_MAX, E4M3_MAX)).to(torch.float8_e4m3fn).contiguous()


@functools.cache
def _constants(device_index: int) -> dict[int, torch.Tensor]:
    """The graph's fixed scalars (descales 1, P's scale and descale, output scale 1) and its two amax outputs,
    which nothing reads, once per device."""
    def f(x):
        return torch.full((1,), x, dtype=torch.float32, device=torch.device("cuda", device_index))

    return {_DQ: f(1.0), _DV: f(1.0), _DS: f(1.0 / S_SCALE), _SS: f(S_SCALE), _SO: f(1.0), _AS: f(0.0), _AO: f(0.0)}


class Unsupported(RuntimeError):
    """A document cuDNN has no plan for and too large for the torch stand-in (``EMULATE_MAX`` scores)."""


def _check_bounds(bounds: list[int], S: int) -> None:
    if not bounds or bounds[0] < 0 or bounds[-1] > S or any(b < a for a, b in itertools.pairwise(bounds)):
        raise ValueError(f"cu_seqlens must rise from >= 0 to <= {S} rows, not {bounds[:8]}")


def attention_fp8(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens) -> torch.Tensor:
    """The attention_fp8 op through cuDNN (module docstring). cu_seqlens: int32 tensor or list of bounds. Raises
    ``Unsupported`` for a document cuDNN cannot take that is too large to run in torch."""
    with torch.cuda.device(q.device):
        return _attention_fp8(q, k, v, cu_seqlens)


def _attention_fp8(q, k, v, cu_seqlens) -> torch.Tensor:
    import cudnn

    S, H, D = q.shape
    if S == 0:
        return torch.empty((S, H, D), dtype=torch.bfloat16, device=q.device)
    bounds = cu_seqlens if isinstance(cu_seqlens, list) else [int(b) for b in cu_seqlens.tolist()]
    _check_bounds(bounds, S)
    o8 = torch.empty((S, H, D), dtype=torch.float8_e4m3fn, device=q.device)
    o8[:bounds[0]] = 0
    o8[bounds[-1]:] = 0       # rows outside every document: 0 (as the op's reference), but for non-finite heads
    sq, sk, sv, c, bad = scales(head_amax(q), head_amax(k), head_amax(v))
    q8, k8, v8 = quantise(q, sq), quantise(k, sk), quantise(v, sv)
    dev = q.device.index if q.device.index is not None else torch.cuda.current_device()
    consts = {**_constants(dev), _DK: c}
    handle = _handle(dev)
    cudnn.set_stream(handle=handle, stream=torch.cuda.current_stream(q.device).cuda_stream)
    for a, b in itertools.pairwise(bounds):
        if b <= a:
            continue
        key = (b - a, H, D, dev)
        d = _DOCS.get(key) or _DOCS.setdefault(key, _Doc(*key))
        if d.graph is None:
            if (b - a) ** 2 * H > EMULATE_MAX:
                raise Unsupported(f"cuDNN has no FP8 attention plan for {b - a} rows x {H} heads ({d.why})")
            o8[a:b] = _emulated(q8[a:b], k8[a:b], v8[a:b], c, D)
        else:
            d.run({_Q: q8[a:b], _K: k8[a:b], _V: v8[a:b], _O: o8[a:b], **consts}, handle)
    # a non-finite head is NaN throughout (every row of every document, as the op)
    return dequantise(o8, torch.where(bad, torch.full_like(sv, math.nan), sv))
