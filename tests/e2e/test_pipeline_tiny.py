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
    assert {c["kernel"] for c in res.kernels if c["op"] != "attention"} == {"reference"}
    assert {c["kernel"] for c in res.kernels if c["op"] == "attention"} == {"sdpa_documents"}   # the incumbent
    assert {c["op"] for c in res.kernels} == {"modulate", "gate_residual_modulate", "qk_norm_rope", "swiglu",
                                              "attention"}
    assert t["attention"]["mode"] == "dense" and t["attention"]["seconds"]["stage1"] > 0
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
    assert all(c["kernel"] == ("sdpa_documents" if c["op"] == "attention" else "reference")
               and "no GPU target" in c["why"] for c in d["kernels"])
    assert "attention, stage 1 (H3 denoising) (dense)" in text


@pytest.mark.parametrize("args,msg", [
    (["--resolution", "1000x768"], "multiples of 32"), (["--resolution", "big"], "WIDTHxHEIGHT"),
    (["--duration", "0"], "duration"), (["--duration", "30"], "duration"),
    (["--weights", "/nonexistent/h3"], "does not exist"), (["--lora", "/nonexistent.safetensors"], "does not exist"),
    (["--steps", "3", "--schedule", "fasth3"], "fasth3"), (["--prompt", " "], "empty"),
    (["--config", "full", "--device", "cpu"], "needs a CUDA GPU"), (["--out", "/tmp/x.avi"], ".mp4"),
    (["--attention", "sol", "--stage1-only"], "add --two-stage"), (["--sol-tau", "1,x", "--two-stage"], "--sol-tau"),
    (["--attention", "sol", "--two-stage", "--resolution", "64x64", "--sol-dense-layers", "-1"], "--sol-dense-layers"),
])
def test_cli_usage_errors_before_any_work(tmp_path, capsys, args, msg):
    out = tmp_path / "x.mp4"
    argv = ["run-pipeline", "--prompt", "p", "--out", str(out), *args]
    assert cli.main(argv) == 2
    assert msg in capsys.readouterr().out
    assert not out.exists() and not out.with_suffix(".json").exists()


FASTH3_BASE = [0.999, 0.749, 0.5, 0.25, 0.0]


def write_model_index(partition, base_schedule=None, shifts=(12.0, 3.0)):
    """The release metadata of a partition: ``model_index.json`` ``_minimax_h3`` (H3_SPEC.md section 7)."""
    block = {"partition": "fl2va", "tasks": ["t2va", "fl2va"],
             "sigma_shift_scales": {"video": shifts[0], "audio": shifts[1]}}
    if base_schedule is not None:
        block["base_schedule"] = base_schedule
    partition.mkdir(parents=True, exist_ok=True)
    (partition / "model_index.json").write_text(json.dumps({"_class_name": "MiniMaxH3Pipeline", "_minimax_h3": block}))


@pytest.mark.parametrize("layout", ["native", "diffusers"])
def test_weights_reproduce_random_run(tmp_path, layout):
    base = run_pipeline(Request(**SMALL, seed=3, out=str(tmp_path / "a.mp4"), mux=False))
    model = build_dit(get_config("tiny").dit, "cpu", seed=3)
    save_dit(model, tmp_path / "FL2VA" / "transformer", layout, max_shard_bytes=1_000_000)
    write_model_index(tmp_path / "FL2VA", FASTH3_BASE)        # a FastH3 checkpoint says so in its metadata
    res = run_pipeline(Request(**SMALL, seed=3, weights=str(tmp_path / "FL2VA"), out=str(tmp_path / "b.mp4"),
                               mux=False))
    assert res.model["checkpoint"]["layout"] == layout
    assert res.schedule["source"].endswith("model_index.json") and res.schedule["video_sigmas"] == base.schedule[
        "video_sigmas"]
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
    assert rc == 2 and "final_layer.video_out.weight" in capsys.readouterr().out       # found before any work


def test_schedule_from_checkpoint_metadata(tmp_path, capsys):
    """A 4-interval base_schedule in model_index.json is the schedule (shifted 12/3); without one, --steps 4 on
    loaded weights is the uniform base schedule, not FastH3; the summary says which and where it came from."""
    save_dit(build_dit(get_config("tiny").dit, "cpu", seed=0), tmp_path / "P" / "transformer", "native")
    write_model_index(tmp_path / "P", [1.0, 0.7, 0.4, 0.15, 0.0])
    argv = ["run-pipeline", "--prompt", "p", "--duration", "0.2", "--resolution", "64x32", "--weights",
            str(tmp_path / "P"), "--out", str(tmp_path / "o.mp4"), "--no-mux"]
    assert cli.main(argv) == 0
    text = " ".join(capsys.readouterr().out.split())
    d = json.loads((tmp_path / "o.json").read_text())["schedule"]
    assert d["name"] == "checkpoint" and d["steps"] == 4 and d["source"] == str(tmp_path / "P" / "model_index.json")
    assert d["video_sigmas"] == pytest.approx([1.0, 0.9655172, 0.8888889, 0.6792453, 0.0], abs=1e-6)
    assert d["audio_sigmas"] == pytest.approx([1.0, 0.875, 0.6666667, 0.3461539, 0.0], abs=1e-6)
    assert "schedule: checkpoint" in text and "model_index.json" in text
    assert cli.main([*argv, "--steps", "3"]) == 2 and "base_schedule" in capsys.readouterr().out
    write_model_index(tmp_path / "P", None, shifts=(6.0, 3.0))                  # base release: uniform path
    assert cli.main([*argv, "--steps", "4"]) == 0
    d = json.loads((tmp_path / "o.json").read_text())["schedule"]
    assert d["name"] == "base" and d["steps"] == 4 and d["video_shift"] == 6.0
    assert d["video_sigmas"][1] == pytest.approx(6 * 0.75 / (1 + 5 * 0.75), abs=1e-6)
    write_model_index(tmp_path / "P", [])                                       # an empty list is bad metadata
    assert cli.main(argv) == 2 and "base_schedule" in capsys.readouterr().out


def test_diffusers_scheduler_configs(tmp_path):
    save_dit(build_dit(get_config("tiny").dit, "cpu", seed=0), tmp_path / "transformer", "diffusers")
    for role, shift in (("scheduler", 10.0), ("audio_scheduler", 2.0)):
        (tmp_path / role).mkdir()
        (tmp_path / role / "scheduler_config.json").write_text(json.dumps({"_class_name": "MiniMaxH3Scheduler",
                                                                             "shift": shift}))
    res = run_pipeline(Request(**SMALL, weights=str(tmp_path), out=str(tmp_path / "o.mp4"), mux=False))
    assert res.schedule["name"] == "base" and (res.schedule["video_shift"], res.schedule["audio_shift"]) == (10, 2)


def test_summary_says_which_weights_are_random(tmp_path, capsys):
    save_dit(build_dit(get_config("tiny").dit, "cpu", seed=0), tmp_path / "transformer", "native")
    assert cli.main(["run-pipeline", "--prompt", "p", "--duration", "0.2", "--resolution", "64x32", "--no-mux",
                     "--weights", str(tmp_path), "--out", str(tmp_path / "o.mp4")]) == 0
    text = " ".join(capsys.readouterr().out.split())
    w = json.loads((tmp_path / "o.json").read_text())["weights"]
    assert w["dit"]["source"] == "checkpoint" and str(tmp_path / "transformer") in w["dit"]["detail"]
    assert {w[k]["source"] for k in ("video_vae", "audio_vae", "text_encoder")} == {"random"}
    assert "random weights: video VAE decoder, audio VAE decoder, text encoder" in text
    res = run_pipeline(Request(**SMALL, out=str(tmp_path / "r.mp4"), mux=False))
    assert {v["source"] for v in res.weights.values()} == {"random"}


def test_cli_aspect_ratio(capsys):
    assert cli.main(["run-pipeline", "--prompt", "p", "--resolution", "21:9", "--dry-run", "--out", "/tmp/x.mp4"]) == 0
    text = capsys.readouterr().out
    d = json.loads(text[text.index("{"):])
    assert (d["plan"]["width"], d["plan"]["height"]) == (1536, 672)


def test_write_mp4_is_atomic(tmp_path, monkeypatch):
    """Ctrl-C while muxing: the MP4 is written to a temporary file in the same folder and renamed at the end."""
    import av
    import numpy as np

    from runtime.mux import write_mp4

    frames, wave = np.full((5, 32, 64, 3), 128, np.uint8), np.zeros((2, 3200), np.float32)

    def interrupt(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(av.AudioFrame, "from_ndarray", interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_mp4(tmp_path / "o.mp4", frames, 24, wave, 32000)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    write_mp4(tmp_path / "o.mp4", frames, 24, wave, 32000)
    assert [p.name for p in tmp_path.iterdir()] == ["o.mp4"] and probe_mp4(tmp_path / "o.mp4")["frames"] == 5


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
                          "--attention", "dense", "fp8", "--precision", "bf16", "fp8", "--out", str(out)])
    assert rc == 0
    d = json.loads(out.read_text())
    by = d["modes"]["verified"]["block_by_attention"]
    assert not by["dense"]["lossy"] and by["fp8"]["lossy"] and 0 < by["fp8"]["error_vs_dense"]["rel_l2"] < 0.1
    assert by["dense"]["attention_ms_per_block"] > 0 and by["fp8"]["attention_ms_per_block"] > 0
    assert d["adaln"]["bitwise_equal_to_per_step"] is True and set(d["modes"]) == {"reference", "verified"}
    assert d["modes"]["verified"]["z_video_vs_first_mode"]["max_abs"] == 0.0
    assert d["rows"]["full"]["used"] == 10 + 16 + 16
    f8 = d["block_fp8_linears"]
    assert f8["conversion"]["converted"] == 4 and set(f8["by_attention"]) == {"dense", "fp8"}
    assert all(r["lossy"] and 0 < r["error_vs_dense"]["rel_l2"] < 0.1 for r in f8["by_attention"].values())
    # no lock on the CPU: no fused producer ran, and the block without them is the same block
    assert f8["fused_producers"] == [] and set(f8["by_attention_without_producers"]) == {"dense", "fp8"}
    for cls, r in f8["by_attention_without_producers"].items():
        assert r["error_vs_dense"] == f8["by_attention"][cls]["error_vs_dense"]


def test_bench_fp8_block_with_and_without_producers(tmp_path, monkeypatch):
    """As if the lock served swiglu_fp8 and head_merge_fp8 (their references run on the CPU): the fp8 block uses them,
    and the pass without them still times the same block."""
    from runtime import bench_h200
    from runtime.kernels import Kernels

    asked = []

    def verified(self, op, *args):
        asked.append(op)
        return op in ("swiglu_fp8", "head_merge_fp8")

    monkeypatch.setattr(Kernels, "verified", verified)
    out = tmp_path / "b.json"
    rc = bench_h200.main(["--config", "tiny", "--device", "cpu", "--full-res", "128x64", "--s1-res", "64x32",
                          "--duration", "0.2", "--text-len-full", "10", "--text-len-s1", "8", "--block-reps", "1",
                          "--attention", "dense", "--precision", "fp8", "--modes", "verified", "--skip-request",
                          "--out", str(out)])
    assert rc == 0
    f8 = json.loads(out.read_text())["block_fp8_linears"]
    assert f8["fused_producers"] == ["head_merge_fp8", "swiglu_fp8"] and {"swiglu_fp8", "head_merge_fp8"} <= set(asked)
    with_p, without = f8["by_attention"]["dense"], f8["by_attention_without_producers"]["dense"]
    # the same quantiser either way: the block's error moves by the producers' last-bit differences at most
    assert abs(with_p["error_vs_dense"]["rel_l2"] - without["error_vs_dense"]["rel_l2"]) < 1e-3
