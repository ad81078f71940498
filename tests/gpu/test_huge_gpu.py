"""The GPU-only int32 cheat at a > 2**31-element shape (``JudgeOptions(huge=True)``): index arithmetic in int32
overflows there, so the judge must reject it at that shape (correctness or a crash) while the honest kernel passes.

A module of its own: the judges that tests/gpu/test_adversarial_gpu.py keeps for its whole module hold GPU memory,
and next to them this test's huge trials ran out of it (H200 run 55: the judge failed with a CUDA out-of-memory error
on the second candidate; run 19: the same test failed in that file and passed alone). Here no other judge is alive.
"""

from __future__ import annotations

import gc

import pytest
import torch

from rsi.refs import get_op_group
from tests.adversarial import cheats
from tests.adversarial.verdicts import expect_rejected
from tests.gpu.test_adversarial_gpu import _judge, evaluate

pytestmark = pytest.mark.gpu


def test_int32_index_overflow_at_huge_shape():
    op = get_op_group("swiglu")
    if not getattr(op, "huge_shapes", ()):
        pytest.skip("swiglu has no huge shapes yet")
    gc.collect()
    torch.cuda.empty_cache()
    with _judge(measure=False, huge=True) as j:
        assert evaluate(j, cheats.HONEST)["status"] == "accepted"
        v = evaluate(j, cheats.GPU_INT32_INDEX)
    names = tuple(f"{s.name}[" for s in op.huge_shapes)
    expect_rejected(v, ("correctness", "crash"), names)
