"""K.cute_launch with RSI_CUTE_FFI=1 (rsi.kernel._launch_ffi): the function is compiled once per key with
``--enable-tvm-ffi`` and then called with the torch tensors themselves: no CuTe tensor per call, no stream argument
(tvm-ffi passes torch's current stream), the Constexpr config compiled in. Runs without the CuTe DSL: stand-ins for
cute.compile, from_dlpack and make_fake_stream record what is asked of them."""

import importlib.util
import sys
import types

import pytest
import torch

from rsi import kernel as K

# the annotation K._cute_bind reads (cutlass.Constexpr); where the CuTe DSL is absent, a stand-in module holds it
# during each test (_fresh_cache)
_REAL = importlib.util.find_spec("cutlass") is not None
CONST = __import__("cutlass").Constexpr if _REAL else type("Constexpr", (), {})


def _host(x, out, n, stream, BLOCK: CONST = 128):
    pass


class _Lib:
    def __init__(self):
        self.compiles, self.calls, self.wrapped = [], [], []

    def compile(self, fn, *args, options=""):
        self.compiles.append((fn, args, options))
        return lambda *a: self.calls.append(a)

    def from_dlpack(self, t, assumed_align=None, enable_tvm_ffi=False):
        self.wrapped.append((tuple(t.shape), assumed_align, enable_tvm_ffi))
        return ("cute", tuple(t.shape))

    @staticmethod
    def make_fake_stream(use_tvm_ffi_env_stream=False):
        return ("env stream", use_tvm_ffi_env_stream)


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    monkeypatch.setattr(K, "_cute_compiled", {})
    if not _REAL:
        monkeypatch.setitem(sys.modules, "cutlass", types.SimpleNamespace(Constexpr=CONST))


def _launch(lib, *args, **consts):
    K._launch_ffi(lib.compile, lib.from_dlpack, lib.make_fake_stream, _host, args, consts, False)


def test_compiled_once_then_called_with_the_torch_tensors():
    lib = _Lib()
    x, y = torch.zeros(4, 64, dtype=torch.bfloat16), torch.empty(4, 64, dtype=torch.bfloat16)
    for _ in range(3):
        _launch(lib, x, y, 4, BLOCK=256)
    assert len(lib.compiles) == 1 and len(lib.wrapped) == 2  # the CuTe tensors made once, to compile
    fn, args, options = lib.compiles[0]
    assert fn is _host and options == "--enable-tvm-ffi"
    assert args == (("cute", (4, 64)), ("cute", (4, 64)), 4, ("env stream", True), 256)
    assert all(w[2] for w in lib.wrapped)  # tensors made for tvm-ffi
    assert len(lib.calls) == 3
    assert all(c[0] is x and c[1] is y and c[2] == 4 and len(c) == 3 for c in lib.calls)  # no stream, no BLOCK


def test_a_new_shape_config_or_alignment_compiles_again():
    lib = _Lib()
    base = torch.zeros(8 * 64 + 1, dtype=torch.bfloat16)
    x, y = base[:256].view(4, 64), torch.empty(4, 64, dtype=torch.bfloat16)
    _launch(lib, x, y, 4)
    _launch(lib, x, y, 4, BLOCK=64)
    _launch(lib, torch.zeros(8, 64, dtype=torch.bfloat16), torch.empty(8, 64, dtype=torch.bfloat16), 8)
    _launch(lib, base[1:257].view(4, 64), y, 4)  # 2-byte aligned: the compiled wrapper checks 16
    assert len(lib.compiles) == 4
    assert [w[1] for w in lib.wrapped[-2:]] == [2, 16]


def test_the_tvm_ffi_path_is_cached_apart_from_the_default_one():
    x = torch.zeros(4, 64)
    assert ("tvm-ffi", *K._cute_key(_host, (x, x, 4), {}, False)) != K._cute_key(_host, (x, x, 4), {}, False)
    lib = _Lib()
    K._cute_compiled[K._cute_key(_host, (x, x, 4), {}, False)] = ("default", ())
    _launch(lib, x, x, 4)
    assert len(lib.compiles) == 1
