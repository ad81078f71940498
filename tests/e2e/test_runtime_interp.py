"""Under the Triton interpreter the runtime itself applies the exact-rounding patch (rsi.harness.interp) before any
Triton kernel runs, so ``--lora-mode consumer`` equals ``native`` bitwise without the tests' session-wide patch
(tests/conftest.py). Runs in a subprocess: TRITON_INTERPRET must be set before Triton is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = r"""
import json, sys
import torch
from triton.runtime import interpreter
from runtime.pipeline import Request, run_pipeline
from tests.e2e.adapters import write_peft

before = getattr(interpreter, "_rsi_rne_patch", False)          # importing the runtime patches nothing
write_peft(sys.argv[1] + "/l.safetensors")
out = {}
for mode in ("native", "consumer"):
    res = run_pipeline(Request(prompt="p", duration_s=0.2, width=64, height=32, steps=1, mux=False,
                               lora=sys.argv[1] + "/l.safetensors", lora_mode=mode, out=sys.argv[1] + "/o.mp4"))
    out[mode] = res
z = {m: r.outputs["z_video"] for m, r in out.items()}
print(json.dumps({"patched_at_import": before, "patched": getattr(interpreter, "_rsi_rne_patch", False),
                  "ops": sorted({c["op"] for c in out["consumer"].kernels}),
                  "differ": float((z["consumer"] != z["native"]).double().mean())}))
"""


def test_consumer_equals_native_under_interpreter_without_conftest(tmp_path):
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], cwd=root, env=env, capture_output=True,
                       text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert "lora_consumer" in r["ops"] and r["differ"] == 0.0          # without the patch every element differs
    assert r["patched_at_import"] is False and r["patched"] is True
