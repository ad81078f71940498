"""`run-pipeline` failures are one clear line with the documented exit code (0 ok, 1 run failed, 2 usage error,
130 interrupted), and every usage error is found before any work: the text encoder is never built."""

from __future__ import annotations

import pytest
from safetensors.torch import save_file

from runtime import cli, pipeline
from runtime.checkpoint import save_dit
from runtime.config import get_config
from runtime.model import build_dit
from tests.e2e.adapters import INNER, H, rnd, write_peft

ARGS = ["run-pipeline", "--prompt", "p", "--duration", "0.2", "--resolution", "64x32"]


def no_work(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("work started before the request was validated")

    monkeypatch.setattr(pipeline, "make_text_encoder", boom)
    monkeypatch.setattr(pipeline, "build_model", boom)


def main(argv, capsys):
    try:
        rc = cli.main(argv)
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped run-pipeline")
    cap = capsys.readouterr()
    text = cap.out + cap.err
    assert "Traceback" not in text
    return rc, " ".join(text.split())                  # rich may wrap a long path; compare without line breaks


def weights(tmp_path):
    save_dit(build_dit(get_config("tiny").dit, "cpu", seed=0), tmp_path / "w" / "transformer", "native")
    return tmp_path / "w" / "transformer" / "model.safetensors"


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_corrupt_checkpoint_names_the_file(tmp_path, capsys, monkeypatch, damage):
    f = weights(tmp_path)
    data = f.read_bytes()
    f.write_bytes(b"\x00not a safetensors file" * 4 if damage == "garbage" else data[: len(data) // 2])
    no_work(monkeypatch)
    rc, text = main([*ARGS, "--weights", str(tmp_path / "w"), "--out", str(tmp_path / "o.mp4")], capsys)
    assert rc == 2 and str(f) in text and "safetensors" in text
    assert not (tmp_path / "o.json").exists()


def test_corrupt_shard_behind_an_index_names_the_file(tmp_path, capsys, monkeypatch):
    files = save_dit(build_dit(get_config("tiny").dit, "cpu", seed=0), tmp_path / "w", "native",
                     max_shard_bytes=400_000)
    files[1].write_bytes(files[1].read_bytes()[:1000])
    no_work(monkeypatch)
    rc, text = main([*ARGS, "--weights", str(tmp_path / "w"), "--out", str(tmp_path / "o.mp4")], capsys)
    assert rc == 2 and str(files[1]) in text


def test_checkpoint_mismatch_is_found_before_work(tmp_path, capsys, monkeypatch):
    model = build_dit(get_config("tiny").dit, "cpu", seed=0)
    sd = {k: v.contiguous() for k, v in model.state_dict().items() if k != "final_layer.video_out.weight"}
    save_file(sd, str(tmp_path / "model.safetensors"))
    no_work(monkeypatch)
    rc, text = main([*ARGS, "--weights", str(tmp_path), "--out", str(tmp_path / "o.mp4")], capsys)
    assert rc == 2 and "final_layer.video_out.weight" in text


def test_corrupt_lora_names_the_file(tmp_path, capsys, monkeypatch):
    f = tmp_path / "l.safetensors"
    write_peft(f)
    f.write_bytes(f.read_bytes()[:500])
    no_work(monkeypatch)
    rc, text = main([*ARGS, "--lora", str(f), "--out", str(tmp_path / "o.mp4")], capsys)
    assert rc == 2 and str(f) in text and "--lora" in text


@pytest.mark.parametrize("bad,msg", [
    ({"A": (4, H), "B": (INNER, 2)}, "rank"),                     # lora_A rank 4, lora_B rank 2
    ({"A": (4, H), "B": (INNER + 8, 4)}, "shape"),                # to_q has INNER rows
    ({"A": (4, H + 1), "B": (INNER, 4)}, "shape"),                # the block's input width is H
])
def test_lora_shape_mismatch_names_key_and_file_before_work(tmp_path, capsys, monkeypatch, bad, msg):
    f = tmp_path / "bad.safetensors"
    key = "transformer_blocks.1.attn.to_q"
    save_file({f"{key}.lora_A.default.weight": rnd(*bad["A"], seed=1),
               f"{key}.lora_B.default.weight": rnd(*bad["B"], seed=2)}, str(f))
    no_work(monkeypatch)
    rc, text = main([*ARGS, "--lora", str(f), "--out", str(tmp_path / "o.mp4")], capsys)
    assert rc == 2 and str(f) in text and key in text and msg in text


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_lora_strength_must_be_finite(tmp_path, capsys, monkeypatch, value):
    write_peft(tmp_path / "l.safetensors")
    no_work(monkeypatch)
    rc, text = main([*ARGS, "--lora", str(tmp_path / "l.safetensors"), f"--lora-strength={value}",
                     "--out", str(tmp_path / "o.mp4")], capsys)
    assert rc == 2 and "--lora-strength" in text


def test_unwritable_out_and_json_are_usage_errors(tmp_path, capsys, monkeypatch):
    no_work(monkeypatch)
    (tmp_path / "dir.mp4").mkdir()
    rc, text = main([*ARGS, "--out", str(tmp_path / "dir.mp4")], capsys)
    assert rc == 2 and "--out" in text
    (tmp_path / "file").write_text("x")
    rc, text = main([*ARGS, "--out", str(tmp_path / "file" / "o.mp4")], capsys)
    assert rc == 2 and "--out" in text
    rc, text = main([*ARGS, "--out", str(tmp_path / "o.mp4"), "--json", str(tmp_path / "nope" / "t.json")], capsys)
    assert rc == 2 and "--json" in text and "nope" in text
    rc, text = main([*ARGS, "--no-mux", "--out", str(tmp_path / "o.mp4"), "--json", str(tmp_path / "file" / "t.json")],
                    capsys)
    assert rc == 2 and "--json" in text


def test_ctrl_c_is_exit_130(tmp_path, capsys, monkeypatch):
    def interrupt(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "generate", interrupt)
    rc, text = main([*ARGS, "--out", str(tmp_path / "o.mp4")], capsys)
    assert rc == 130 and "interrupted" in text
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_while_muxing_leaves_no_output(tmp_path, capsys, monkeypatch):
    import av

    def interrupt(*a, **k):
        raise KeyboardInterrupt                          # audio is muxed after every video frame

    monkeypatch.setattr(av.AudioFrame, "from_ndarray", interrupt)
    rc, text = main([*ARGS, "--out", str(tmp_path / "o.mp4")], capsys)
    assert rc == 130 and "interrupted" in text
    assert list(tmp_path.iterdir()) == []                # no MP4, no temporary file, no JSON


def test_help_documents_exit_codes(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run-pipeline", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "130" in text and "exit codes" in text.lower()


def test_nonfinite_output_is_exit_1(tmp_path, capsys, monkeypatch):
    def nan_denoise(*a, **k):
        raise FloatingPointError("non-finite latents after denoising")

    monkeypatch.setattr(pipeline, "denoise", nan_denoise)
    rc, text = main([*ARGS, "--out", str(tmp_path / "o.mp4")], capsys)
    assert rc == 1 and "non-finite" in text and not (tmp_path / "o.mp4").exists()


@pytest.mark.parametrize("device", ["tpu", "cuda:x", "gpu0"])
def test_unknown_device_is_a_usage_error(tmp_path, capsys, monkeypatch, device):
    no_work(monkeypatch)
    rc, text = main(ARGS + ["--device", device, "--out", str(tmp_path / "o.mp4")], capsys)
    assert rc == 2 and f"--device {device!r}" in text


def test_lock_lookup_is_reported(tmp_path, capsys, monkeypatch):
    """--kernels verified says which lock it reads: $RSI_ROOT here (issue 16 item 15)."""
    monkeypatch.setenv("RSI_ROOT", str(tmp_path / "ws"))
    rc, text = main(ARGS + ["--out", str(tmp_path / "o.mp4"), "--dry-run"], capsys)
    assert rc == 0 and f"{tmp_path / 'ws' / 'verified_kernels'} ($RSI_ROOT)" in text
