"""The two-stage route on tiny configs (CPU): shapes through every stage, the MP4, timings per stage, warm-up and
repeats, the prompt cache across requests, the route default and its usage errors."""

from __future__ import annotations

import json

import pytest

from runtime import cli
from runtime.mux import probe_mp4
from runtime.packing import plan_request
from runtime.pipeline import run_pipeline
from runtime.request import Request
from runtime.two_stage import draft_plan, ltx_audio_frames, ltx_latent_frames, run_pipeline_two_stage


def test_plans_of_the_report_route():
    p = plan_request(5.0, 1344, 768)
    d = draft_plan(p)
    assert (d.width, d.height, d.frames) == (672, 384, 124) and d.latent_shape == (24, 37, 24, 42)
    assert ltx_latent_frames(p) == 16 and 8 * (ltx_latent_frames(p) - 1) + 1 == 121
    assert ltx_audio_frames(p) == 126                        # 121 / 24 s at 25 LTX audio latents per second


def test_two_stage_tiny_end_to_end(tmp_path):
    req = Request(prompt="a fox in snow", duration_s=1.0, width=256, height=128, two_stage=True, warmup=True,
                  repeat=2, out=str(tmp_path / "t.mp4"), prompt_cache=str(tmp_path / "pc"))
    res = run_pipeline(req)                                   # the Python API dispatches on req.two_stage
    o = res.outputs
    assert list(o["z_draft"].shape) == [24, 12, 4, 8]                    # draft 128x64, 39 frames -> 12 latents
    assert list(o["z_upscaled"].shape) == [1, 24, 12, 8, 16]
    assert list(o["z_ltx"].shape) == [1, 128, 5, 4, 8] == list(o["z_refined"].shape)   # (39 - 1) // 8 + 1 = 5
    assert o["frames"].shape == (33, 128, 256, 3) and o["frames"].dtype.name == "uint8"
    info = probe_mp4(tmp_path / "t.mp4")
    assert (info["frames"], info["width"], info["height"]) == (33, 256, 128)
    assert info["audio_duration_s"] == pytest.approx(33 / 24, abs=0.05)           # H3 audio cut to the video
    t = res.timings_s
    assert len(t["stage1_steps"]) == 4 and len(t["stage2_steps"]) == 3
    for k in ("build_dit", "build_refiner", "adaln_precompute", "upscale", "adapt", "stage2_text", "decode_video",
              "decode_audio", "mux", "request_total"):
        assert k in t, k
    assert len(t["requests"]) == 2 and t["first_request"] is t["requests"][0] and "warmup" in t
    assert t["request_wall"] >= t["request_total"] and [r["stage2_context_hit"] for r in t["requests"]] == [True] * 2
    assert o["stage2_context"]["hit"]                        # made in the warm-up, read back from disk after it
    ops = {c["op"] for c in res.kernels}
    assert {"ltx_modulate", "ltx_gate_residual_modulate", "ltx_qk_norm_rope", "modulate", "swiglu"} <= ops
    assert res.plan["ltx_latent"] == [1, 128, 5, 4, 8] and "video_vae" not in res.weights


def test_cli_two_stage_table_json_and_default_route(tmp_path, capsys):
    out = tmp_path / "c.mp4"
    rc = cli.main(["run-pipeline", "--prompt", "rain", "--duration", "0.5", "--resolution", "128x64",
                   "--two-stage", "--out", str(out), "--prompt-cache", str(tmp_path / "pc"), "--no-mux"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "stage2 step 3" in text and "upscale" in text and "first request" in text and "two-stage" in text
    d = json.loads(out.with_suffix(".json").read_text())
    assert d["request"]["two_stage"] and d["schedule"]["stage2_sigmas"] == [0.909375, 0.725, 0.421875, 0.0]
    assert cli.main(["run-pipeline", "--prompt", "p", "--resolution", "1344x768", "--dry-run"]) == 0


@pytest.mark.parametrize("args,msg", [
    (["--two-stage", "--resolution", "96x64"], "multiples of 64"),
    (["--two-stage", "--resolution", "256x128", "--prompt-cache", "{file}/pc"], "not a writable folder"),
    (["--repeat", "0"], "--repeat"),
])
def test_two_stage_usage_errors(tmp_path, capsys, args, msg):
    out, f = tmp_path / "x.mp4", tmp_path / "a_file"
    f.write_text("")
    args = [a.format(file=f) for a in args]
    assert cli.main(["run-pipeline", "--prompt", "p", "--out", str(out), *args]) == 2
    assert msg in capsys.readouterr().out and not out.exists()


def _components(tmp_path):
    """Tiny stage-2 components written to disk in their own formats: the refiner and the LTX VAE with diffusers'
    save_pretrained, the adapter with save_adapter."""
    import torch

    from runtime.adapter import AdapterConfig, build_adapter, save_adapter
    from runtime.refiner import build_refiner
    from runtime.vae import build_ltx_vae

    dev = torch.device("cpu")
    build_refiner("tiny", dev, seed=11).save_pretrained(tmp_path / "refiner")
    build_ltx_vae("tiny", dev, seed=12).vae.save_pretrained(tmp_path / "ltx_vae")
    save_adapter(tmp_path / "adapter.safetensors", build_adapter(AdapterConfig.tiny(), dev, seed=13))
    return {"refiner": str(tmp_path / "refiner"), "adapter": str(tmp_path / "adapter.safetensors"),
            "ltx_vae": str(tmp_path / "ltx_vae")}


def test_components_load_and_reproduce(tmp_path):
    """Loading the saved components gives the same output as the random weights they were saved from (same seeds),
    and the summary says which parts came from files."""
    import torch

    from runtime.refiner import build_refiner

    comp = _components(tmp_path)
    m = build_refiner("tiny", torch.device("cpu"), seed=None, folder=comp["refiner"])
    ref = build_refiner("tiny", torch.device("cpu"), seed=11)
    assert all(torch.equal(a, b) for a, b in zip(m.state_dict().values(), ref.state_dict().values()))
    base = {"prompt": "a fox", "duration_s": 0.5, "width": 128, "height": 64, "two_stage": True, "mux": False,
                "prompt_cache": str(tmp_path / "pc")}
    res = run_pipeline_two_stage(Request(**base, **comp, out=str(tmp_path / "a.mp4")))
    assert {res.weights[k]["source"] for k in ("ltx_refiner", "adapter", "ltx_vae")} == {"checkpoint"}
    assert res.weights["upscaler"]["source"] == "random"


def test_bad_component_checkpoints_name_file_and_key(tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    comp = _components(tmp_path)
    f = tmp_path / "refiner" / "diffusion_pytorch_model.safetensors"
    t = load_file(str(f))
    t.pop("proj_out.weight")
    save_file(t, str(f))
    a = tmp_path / "adapter.safetensors"
    a.write_bytes(a.read_bytes()[:1000])                                    # truncated
    argv = ["run-pipeline", "--prompt", "p", "--resolution", "128x64", "--duration", "0.5", "--two-stage",
            "--out", str(tmp_path / "x.mp4"), "--prompt-cache", str(tmp_path / "pc")]
    assert cli.main([*argv, "--refiner", comp["refiner"]]) == 2
    out = capsys.readouterr().out
    assert "--refiner" in out and "proj_out.weight" in out and "diffusion_pytorch_model" in out
    assert cli.main([*argv, "--adapter", str(a)]) == 2
    assert "--adapter" in capsys.readouterr().out
    assert cli.main([*argv, "--ltx-vae", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().out
    stage1 = [a for a in argv if a != "--two-stage"]
    assert cli.main([*stage1, "--stage1-only", "--refiner", comp["refiner"]]) == 2
    assert "add --two-stage" in capsys.readouterr().out


def test_mp4_check_accepts_a_fade_in_and_refuses_a_blank_video(tmp_path):
    """The check decodes only the first frames: a video opening on black is valid when its source opened on black;
    a video whose source had variance but whose file has none is refused."""
    import numpy as np

    from runtime.mux import check_mp4, write_mp4

    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (24, 64, 64, 3), dtype=np.uint8)
    frames[:6] = 0
    wave = (rng.standard_normal((2, 32000)) * 0.1).astype(np.float32)
    write_mp4(tmp_path / "fade.mp4", frames, 24, wave, 32000,
              check=lambda t: check_mp4(t, 24, 24, 1.0, source=frames))
    assert (tmp_path / "fade.mp4").exists()
    blank, noisy = np.zeros_like(frames), rng.integers(0, 256, frames.shape, dtype=np.uint8)
    with pytest.raises(ValueError, match="zero variance"):     # e.g. an encoder that dropped the picture
        write_mp4(tmp_path / "blank.mp4", blank, 24, wave, 32000,
                  check=lambda t: check_mp4(t, 24, 24, 1.0, source=noisy))
    assert not (tmp_path / "blank.mp4").exists()


def test_route_flags(tmp_path, capsys):
    assert cli.main(["run-pipeline", "--prompt", "p", "--resolution", "16:9", "--dry-run"]) == 0
    d = json.loads(capsys.readouterr().out.split("\n", 1)[1])                  # after the kernels line
    assert d["route"] == "two-stage" and d["draft_plan"]["width"] == 672 and d["stage2"]["ltx_latent_frames"] == 16
    assert cli.main(["run-pipeline", "--prompt", "p", "--resolution", "672x384", "--warmup",
                     "--out", str(tmp_path / "x.mp4")]) == 2
    assert "--warmup and --repeat belong to the two-stage route" in capsys.readouterr().out
