"""The tiny pipeline end to end on the CPU: MP4 written and decoded back, CLI exit codes, --weights in both
layouts reproducing the random-weight run, LoRA modes, and the H200 bench script's CPU smoke mode."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from runtime import cli
from runtime.checkpoint import save_dit
from runtime.config import get_config
from runtime.kernels import Kernels
from runtime.model import build_dit
from runtime.mux import probe_mp4
from runtime.pipeline import Request, run_pipeline
from tests.e2e.adapters import write_peft

SMALL = {"prompt": "a red fox runs through snow, wind noise", "duration_s": 0.5, "width": 128, "height": 64}


def test_tiny_pipeline_writes_valid_mp4(tmp_path):
    res = run_pipeline(Request(**SMALL, out=str(tmp_path / "o.mp4")))
    info = probe_mp4(tmp_path / "o.mp4")
    assert info["codec"] == "h264" and info["audio_codec"] == "aac" and info["audio_channels"] == 2
    assert info["frames"] == 22 and info["fps"] == 24 and (info["width"], info["height"]) == (128, 64)
    assert info["audio_duration_s"] == pytest.approx(37 * 800 / 32000, abs=0.05)       # T_a = round(22/24*40)
    assert info["video_std"] > 1 and info["audio_std"] > 1e-3
    assert res.mp4["frames"] == 22 and res.plan["latent"] == [24, 7, 4, 8]
    t = res.timings_s
    assert len(t["denoise_steps"]) == 4 and all(k in t for k in ("text", "decode_video", "decode_audio", "mux"))
    assert res.adaln["released_params"] == 2 * (128 * 18 * 256 + 18 * 256) + 128 * 512 + 512
    assert {c["kernel"] for c in res.kernels} == {"reference"}
    assert {c["op"] for c in res.kernels} == {"modulate", "gate_residual_modulate", "qk_norm_rope", "swiglu"}
    assert res.schedule["name"] == "fasth3" and any("UNTRAINED" in n for n in res.notes)
    assert res.outputs["frames"].dtype.name == "uint8"


def test_cli_table_and_json(tmp_path, capsys):
    out = tmp_path / "c.mp4"
    rc = cli.main(["run-pipeline", "--prompt", "waves on rocks", "--duration", "0.2", "--resolution", "64x32",
                   "--steps", "3", "--seed", "2", "--out", str(out), "--kernels", "verified"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "denoise step 3" in text and "decode_audio" in text and "peak GPU memory" in text
    d = json.loads(out.with_suffix(".json").read_text())
    assert d["schedule"]["name"] == "base" and d["schedule"]["steps"] == 3 and len(d["timings_s"]["denoise_steps"]) == 3
    assert d["mp4"]["frames"] == 5 and d["memory"]["peak_gpu_gib"] is None
    assert all(c["kernel"] == "reference" and "no GPU target" in c["why"] for c in d["kernels"])


@pytest.mark.parametrize("args,msg", [
    (["--resolution", "1000x768"], "multiples of 32"), (["--resolution", "big"], "WIDTHxHEIGHT"),
    (["--duration", "0"], "duration"), (["--duration", "30"], "duration"),
    (["--weights", "/nonexistent/h3"], "does not exist"), (["--lora", "/nonexistent.safetensors"], "does not exist"),
    (["--steps", "3", "--schedule", "fasth3"], "fasth3"), (["--prompt", " "], "empty"),
    (["--config", "full", "--device", "cpu"], "needs a CUDA GPU"), (["--out", "/tmp/x.avi"], ".mp4"),
])
def test_cli_usage_errors_before_any_work(tmp_path, capsys, args, msg):
    out = tmp_path / "x.mp4"
    argv = ["run-pipeline", "--prompt", "p", "--out", str(out), *args]
    assert cli.main(argv) == 2
    assert msg in capsys.readouterr().out
    assert not out.exists() and not out.with_suffix(".json").exists()


@pytest.mark.parametrize("layout", ["native", "diffusers"])
def test_weights_reproduce_random_run(tmp_path, layout):
    base = run_pipeline(Request(**SMALL, seed=3, out=str(tmp_path / "a.mp4"), mux=False))
    model = build_dit(get_config("tiny").dit, "cpu", seed=3)
    save_dit(model, tmp_path / "FL2VA" / "transformer", layout, max_shard_bytes=1_000_000)
    res = run_pipeline(Request(**SMALL, seed=3, weights=str(tmp_path / "FL2VA"), out=str(tmp_path / "b.mp4"),
                               mux=False))
    assert res.model["checkpoint"]["layout"] == layout
    assert torch.equal(res.outputs["z_video"], base.outputs["z_video"])
    assert torch.equal(res.outputs["z_audio"], base.outputs["z_audio"])
    other = run_pipeline(Request(**SMALL, seed=4, out=str(tmp_path / "c.mp4"), mux=False))
    assert not torch.equal(other.outputs["z_video"], base.outputs["z_video"])


def test_bad_checkpoint_fails_with_key(tmp_path, capsys):
    model = build_dit(get_config("tiny").dit, "cpu", seed=0)
    sd = {k: v.contiguous() for k, v in model.state_dict().items() if k != "final_layer.video_out.weight"}
    save_file(sd, str(tmp_path / "model.safetensors"))
    rc = cli.main(["run-pipeline", "--prompt", "p", "--duration", "0.2", "--resolution", "64x32",
                   "--weights", str(tmp_path), "--out", str(tmp_path / "o.mp4")])
    assert rc == 1 and "final_layer.video_out.weight" in capsys.readouterr().out


@pytest.mark.parametrize("mode", ["native", "consumer"])
def test_lora_modes_in_pipeline(tmp_path, mode):
    write_peft(tmp_path / "l.safetensors")
    res = run_pipeline(Request(**SMALL, lora=str(tmp_path / "l.safetensors"), lora_mode=mode,
                               out=str(tmp_path / "o.mp4"), mux=False))
    assert res.model["lora"]["branches"] == 18 and torch.isfinite(res.outputs["z_video"]).all()
    ops = {c["op"] for c in res.kernels}
    consumer_op = Kernels("reference", target=None).has("lora_consumer", torch.device("cpu"))
    assert ("lora_consumer" in ops) == (mode == "consumer" and consumer_op)


def test_bench_script_cpu_smoke(tmp_path):
    from runtime import bench_h200

    out = tmp_path / "b.json"
    rc = bench_h200.main(["--config", "tiny", "--device", "cpu", "--full-res", "128x64", "--s1-res", "64x32",
                          "--duration", "0.2", "--text-len-full", "10", "--text-len-s1", "8", "--block-reps", "1",
                          "--out", str(out)])
    assert rc == 0
    d = json.loads(out.read_text())
    assert d["adaln"]["bitwise_equal_to_per_step"] is True and set(d["modes"]) == {"reference", "verified"}
    assert d["modes"]["verified"]["z_video_vs_first_mode"]["max_abs"] == 0.0
    assert d["rows"]["full"]["used"] == 10 + 16 + 16
