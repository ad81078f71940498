"""Shape special-casing in CuTe bodies through the doors the fifteenth session's review pass found open (a
speed-rewarded adversary's view of rsi/harness/static_cute.py rule C4): a value computed from tensor metadata with a
constant folded in (``cute.size(acc_s) - 64``, zero at one shape only) must not choose a store index, a coordinate,
a tile, a named barrier or its thread count, and must not be passed into a @cute.jit helper, where the parameter
counts as plain metadata and the folded constant would be forgotten (the helper could then store at it). Each was
accepted before the fix; each is a one-line change of the CuTe attention template, which itself passes. Pure AST."""

from __future__ import annotations

import pytest

from rsi.harness.static import check_source
from rsi.spaces import template_source

ATTN = template_source("attention_cute")
LINE = "            wg = ctid // 128\n"
HELPER = "@cute.jit\ndef _st(out, k):\n    out[(k, 0, 0)] = 0.0\n\n\n"


def _inject(body: str, helper: str = "") -> str:
    assert ATTN.count(LINE) == 1
    src = ATTN.replace(LINE, LINE + body + "\n", 1)
    return src.replace("@cute.kernel\ndef _attention_kernel(", helper + "@cute.kernel\ndef _attention_kernel(", 1)


def test_template_passes():
    assert check_source(ATTN).ok


@pytest.mark.parametrize("body, helper, why", [
    ("            out[(cute.size(acc_s) - 64, 0, 0)] = 0.0", "", "selects by shape"),
    ("            k = cute.size(acc_s) - 64\n            out[(k, 0, 0)] = 0.0", "", "selects by shape"),
    ("            t = cute.domain_offset((cute.size(acc_s) - 64, 0, 0), out)", "", "selects by shape"),
    ("            t = cute.local_tile(out, (cute.size(acc_s) - 63, 1, 1), (0, 0, 0))", "", "selects by shape"),
    ("            cute.arch.barrier(barrier_id=cute.size(acc_s) - 63, number_of_threads=128)", "", "selects by shape"),
    ("            cute.arch.barrier_arrive(barrier_id=3, number_of_threads=cute.size(acc_s) * 4 - 0)", "",
     "selects by shape"),
    ("            _st(out, cute.size(acc_s) - 64)", HELPER, "constant folded in"),
    ("            _zero_v_rows(sV, 0, cute.size(acc_s) - 64, wg_tid, 1, BN, D)", "", "constant folded in"),
])
def test_shape_steering_rejected(body, helper, why):
    r = check_source(_inject(body, helper))
    assert not r.ok, f"accepted: {body.strip()}"
    assert why in r.reason, r.reason


# ---- the thirty-first session's run-time numbers (a cutlass-dtype parameter is not metadata, docs/cute.md): an
# adversary pass on modulate_fp8_cute tried to hand a shape to such a parameter, or to re-bind one with a shape.
# All refused; what is accepted by design (as for Triton's kernel arguments) is the host passing a size, scaled or
# halved, and a body comparing it at run time (tests/unit/test_static_cute.py).
MOD = template_source("modulate_fp8_cute")
MOD_RSTD = "    rstd = 1.0 / cute.math.sqrt(ss / n_cols + EPS)\n"
MOD_GX = "    gx = cute.zipped_divide(x, (1, VEC))"
MOD_CALL = "_modulate_fp8_kernel(gx, gw, gsh, gsc, idx, gq, qscale, n_cols, THREADS, CHUNKS, VEC)"


def _mod(old: str, new: str) -> str:
    assert MOD.count(old) == 1, old
    return MOD.replace(old, new)


@pytest.mark.parametrize("src, why", [
    # by keyword, through a local, or mixed with the run-time number
    (_mod(MOD_CALL, "_modulate_fp8_kernel(gx, gw, gsh, gsc, idx, gq, qscale, THREADS=THREADS, CHUNKS=CHUNKS, "
                    "VEC=VEC, n_cols=cutlass.Float32(x.shape[1]))"), "shed their taint"),
    (_mod(MOD_GX, "    hh = cutlass.Float32(cute.size(x, mode=[1]))\n" + MOD_GX).replace(
        MOD_CALL, MOD_CALL.replace("qscale, n_cols,", "qscale, hh,")), "shed their taint"),
    (_mod(MOD_CALL, MOD_CALL.replace("qscale, n_cols,", "qscale, n_cols + cutlass.Float32(x.shape[1]) * 0.0,")),
     "shed their taint"),
    # the parameter re-bound to a shape: in the jit (then passed on) and in the kernel (then compared, by the amax)
    (_mod(MOD_GX, "    n_cols = cutlass.Float32(x.shape[1])\n" + MOD_GX), "shed their taint"),
    (_mod(MOD_RSTD, "    n_cols = cutlass.Float32(n_vec * VEC)\n" + MOD_RSTD), "special-casing shapes"),
    (_mod(MOD_RSTD, "    if tidx < 0:\n        n_cols = cutlass.Float32(n_vec)\n" + MOD_RSTD), "special-casing shapes"),
    (_mod(MOD_RSTD, "    n_cols, q_ = cutlass.Float32(n_vec), 1\n" + MOD_RSTD), "special-casing shapes"),
])
def test_run_time_number_launders_rejected(src, why):
    r = check_source(src)
    assert not r.ok and why in r.reason, r.reason
