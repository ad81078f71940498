"""Verified kernels as torch custom ops: hashed namespaces, fake (meta) shapes, torch.compile(fullgraph=True).

The kernel itself runs under the Triton interpreter on the CPU, in a subprocess started with TRITON_INTERPRET=1, so
this file runs in the plain unit-test session too.
"""

from __future__ import annotations

import hashlib

import torch

from rsi import ops_library
from rsi.contract import Candidate, sha256_text
from rsi.refs import get_op_group, op_names
from rsi.spaces import template_source
from rsi.verified import lock_kernel, write_record

ENV = {"compute_capability": None, "triton": "3.6.0", "driver": "", "torch": torch.__version__, "cuda": None}


def _promote(root, config):
    """A minimal verified swiglu record (as `rsi search` would write it) in a temporary verified_kernels/."""
    import triton

    cand = Candidate("swiglu", template_source("swiglu"), config)
    record = {"schema": 1, "op": "swiglu", "candidate_hash": cand.hash, "source_sha256": sha256_text(cand.source),
              "config": dict(cand.config), "env": {**ENV, "triton": triton.__version__}, "search": {"parent": None},
              "shapes": [{"shape": {"name": "tiny", "dims": {"rows": 3, "ffn": 96}}, "bucket": "tiny",
                          "dtype": "bfloat16"}]}
    d = write_record(root, cand, "swiglu", record)
    lock_kernel(root, "h200", "swiglu", d)
    return cand, d


def test_fakes_match_reference_shapes_and_dtypes():
    """Every op group's fake allocates what its reference returns (shape, dtype, contiguity)."""
    for name in op_names():
        op = get_op_group(name)
        assert name in ops_library.SCHEMAS and name in ops_library.FAKES
        shape = op.interp_shapes[-1]
        inputs = op.make_inputs(shape, 0, "cpu")
        if name == "lora_consumer":  # its reference is a Triton kernel; swiglu's has the same output
            refs = (get_op_group("swiglu").reference(inputs[0]),)
        else:
            ref = op.reference(*inputs)
            refs = ref if isinstance(ref, tuple) else (ref,)
        fake = ops_library.FAKES[name](*inputs)
        fakes = fake if isinstance(fake, tuple) else (fake,)
        assert len(fakes) == len(refs), name
        for f, r in zip(fakes, refs):
            assert f.shape == r.shape and f.dtype == r.dtype and f.is_contiguous(), name
        # argument names of the schema are the op group's input names
        args = ops_library.SCHEMAS[name].split("->")[0]
        assert [a.split()[-1] for a in args.strip("() ").split(",")] == list(op.input_names), name


# Runs in a fresh interpreter with TRITON_INTERPRET=1 from the start: triton.language's own @jit helpers (tl.sum,
# tl.cdiv) are decorated when triton is first imported, so the variable cannot be switched on inside this process.
_E2E = r"""
import json, sys
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from rsi import ops_library
from rsi.harness.interp import patch_interpreter_rounding
from rsi.refs import get_op_group
from rsi.verified import locked_kernel

patch_interpreter_rounding()
root, env = sys.argv[1], json.loads(sys.argv[2])
registered, refused = ops_library.register_verified(root, "h200", env=env)
reg = registered["swiglu"]
again, _ = ops_library.register_verified(root, "h200", env=env)
x = torch.randn(5, 2 * 96, dtype=torch.bfloat16)
want = locked_kernel(root, "h200", "swiglu").load()(x)
got = reg.fn(x)
ref = get_op_group("swiglu").reference(x)
with FakeTensorMode() as mode:
    fo = reg.fn(mode.from_tensor(torch.empty(7, 2 * 40, dtype=torch.bfloat16)))


def f(t):
    return reg.fn(t * 2.0) + 1.0


compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
out = compiled(x)
print(json.dumps({
    "refused": refused, "registered": sorted(registered), "reg": reg.to_json(), "same_again": again["swiglu"] == reg,
    "op_equals_kernel": torch.equal(got.view(torch.int16), want.view(torch.int16)),
    "close_to_reference": torch.allclose(got.float(), ref.float(), rtol=2e-2, atol=1e-2),
    "fake": [list(fo.shape), str(fo.dtype)],
    "compiled_equals_eager": torch.equal(out.view(torch.int16), f(x).view(torch.int16)),
}))
"""


def test_register_verified_namespace_fake_and_compile(tmp_path):
    import json
    import os
    import subprocess
    import sys

    import triton

    _, d = _promote(tmp_path, {"FLAT": 0, "BLOCK_F": 64, "ROWS": 2, "num_warps": 2})
    env = {**ENV, "triton": triton.__version__}
    proc = subprocess.run([sys.executable, "-c", _E2E, str(tmp_path), json.dumps(env)], capture_output=True,
                          text=True, timeout=300, check=False, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["refused"] == {} and r["registered"] == ["swiglu"]
    rec_sha = hashlib.sha256((d / "record.json").read_bytes()).hexdigest()
    assert r["reg"]["qualname"] == f"rsi_{rec_sha[:12]}::swiglu"  # the record's hash, never a version
    assert r["reg"]["record_sha256"] == rec_sha and r["reg"]["kernel"] == d.name
    assert r["same_again"] and r["op_equals_kernel"] and r["close_to_reference"]
    assert r["fake"] == [[7, 40], "torch.bfloat16"]
    assert r["compiled_equals_eager"]  # fullgraph=True: no graph break around the op


def test_hard_mismatch_and_missing_lock_are_refused(tmp_path):
    _promote(tmp_path, {"FLAT": 1, "BLOCK_F": 128, "num_warps": 2})
    registered, refused = ops_library.register_verified(tmp_path, "h200", ops=["swiglu", "modulate"],
                                                        env={**ENV, "triton": "4.0.0"})
    assert registered == {}
    assert "Triton major" in refused["swiglu"] and "no kernel locked" in refused["modulate"]
    registered, refused = ops_library.register_verified(tmp_path, "b200", env={**ENV, "triton": "3.6.0"})
    assert registered == {} and refused == {}
