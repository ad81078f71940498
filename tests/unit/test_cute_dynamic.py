"""K.cute_launch_dynamic: tensors with a unit stride go to cute.compile with dynamic layouts, so one compile serves
every shape of the same dtypes, ranks, unit-stride modes and alignments; the static checker holds it to
K.cute_launch's rules. Runs without the CuTe DSL (a stand-in for from_dlpack records what is asked of it)."""

from __future__ import annotations

import types

import pytest
import torch

from rsi import kernel as K
from rsi.harness.judge import Judge
from rsi.harness.static import check_source
from rsi.refs import get_op_group


class _Dl:
    """from_dlpack's stand-in: remembers the alignment and the leading dim a dynamic layout was asked with."""

    def __init__(self, t, assumed_align):
        self.shape, self.align, self.lead = tuple(t.shape), assumed_align, None

    def mark_layout_dynamic(self, leading_dim=None):
        self.lead = leading_dim
        return self


def _fn(a, b, stream):
    pass


def _key(*args, dynamic):
    return K._cute_args(_fn, args, {}, "stream", _Dl, dynamic)


def test_dynamic_keys_ignore_shapes_and_strides():
    a, b = torch.empty(300, 4, 128), torch.empty(7, 2, 128)
    assert _key(a, b, dynamic=True)[0] == _key(b, a, dynamic=True)[0]
    assert _key(a, b, dynamic=False)[0] != _key(b, a, dynamic=False)[0]
    strided = torch.empty(300, 12, 128)[:, 4:8]          # a column view of a fused buffer: still stride 1 inside
    assert _key(strided, b, dynamic=True)[0] == _key(a, b, dynamic=True)[0]
    _, positional = _key(strided, b, dynamic=True)
    assert [p.lead for p in positional[:2]] == [2, 2] and positional[-1] == "stream"


def test_dynamic_keys_keep_what_the_layout_cannot_hide():
    a = torch.empty(64, 4, 128)
    assert _key(a, a, dynamic=True)[0] != _key(a.double(), a, dynamic=True)[0]           # dtype
    assert _key(a, a, dynamic=True)[0] != _key(a[0], a, dynamic=True)[0]                 # rank
    assert _key(a, a, dynamic=True)[0] != _key(a.transpose(0, 2), a, dynamic=True)[0]    # the unit-stride mode
    odd = torch.empty(64 * 4 * 128 + 1)[1:].view(64, 4, 128)
    assert _key(a, a, dynamic=True)[0] != _key(odd, a, dynamic=True)[0]                  # alignment
    assert _key(a, a, dynamic=True)[0] != _key(a, a, dynamic=False)[0]


def test_a_tensor_without_a_unit_stride_stays_static():
    every_other = torch.empty(20, dtype=torch.int32)[::2]
    key, positional = _key(every_other, every_other, dynamic=True)
    assert positional[0].lead is None and (torch.int32, (10,), (2,)) == key[3][:3]
    assert K._unit_mode(torch.empty(1, 5)) == 1 and K._unit_mode(torch.empty(5, 1)) == 0


def _tma_readable(x: torch.Tensor) -> bool:
    """attention_cute's _packed test: what it passes on as it is (else a contiguous copy)."""
    return (x.stride(-1) == 1 and x.stride(0) > 0 and x.stride(0) % 8 == 0 and x.stride(1) % 8 == 0
            and x.storage_offset() % 8 == 0)


def _compiles(dynamic: bool) -> tuple[int, int]:
    op = get_op_group("attention")
    fake = types.SimpleNamespace(opt=types.SimpleNamespace(backend="cuda", drawn_shapes=2, huge=True), run_seed=1,
                                 seeds=(11, 12, 13, 14, 15))
    plan = Judge.trial_plan(fake, op)
    keys = set()
    for shape, layout, seed, _special, _refill in plan:
        q, k, v, cq, ck = op.make_inputs(shape, seed, "meta", layout)
        qkv = [x if _tma_readable(x) else torch.empty(x.shape, dtype=x.dtype, device="meta") for x in (q, k, v)]
        keys.add(_key(*qkv, torch.empty(q.shape, dtype=q.dtype, device="meta"), cq, ck, dynamic=dynamic)[0])
    return len(plan), len(keys)


def test_the_judges_attention_plan_compiles_five_times_instead_of_29():
    """The number docs and the template quote: the CuTe attention kernel's compiles over one verdict's correctness
    plan (on the GPU: named, odd, drawn and huge shapes, three layouts)."""
    assert _compiles(False) == (119, 29)
    assert _compiles(True) == (119, 5)


_HEAD = '''import cutlass
from cutlass import cute

from rsi import kernel as K


@cute.kernel
def _k(x: cute.Tensor, y: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    y[(tidx,)] = x[(tidx,)]


@cute.jit
def _host(x: cute.Tensor, y: cute.Tensor, stream):
    _k(x, y).launch(grid=(1, 1, 1), block=(32, 1, 1), stream=stream)


def launch(x):
    y = K.empty((32,), dtype=x.dtype, device=x.device)
'''


@pytest.mark.parametrize("body, ok", [
    ("    K.cute_launch_dynamic(_host, x, y)\n    return y\n", True),
    ("    z = K.cute_launch_dynamic(_host, x, y)\n    return y\n", False),
    ("    K.cute_launch_dynamic(_k, x, y)\n    return y\n", False),
    ("    K.cute_launch_dynamic(_host, x, y, BLOCK=3)\n    return y\n", False),
])
def test_static_rules_of_the_dynamic_launch(body, ok):
    r = check_source(_HEAD + body)
    assert r.ok == ok, r.reason
    if not ok:
        assert "cute_launch" in r.reason
