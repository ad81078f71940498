"""How far one run's outputs are from another's, from the same seed (bf16 vs ``--precision fp8``, dense vs
``--attention sol``): ``rsi run-pipeline ... --save-latents A.pt`` twice, then

    python -m runtime.latent_error A.pt B.pt [--json OUT]       # A is the reference

Per latent both files hold (the H3 draft, the upscaled and adapted latents, the refined LTX latent, the audio
latent): rel-L2, max-abs and cosine of B against A; for the decoded frames the PSNR (uint8, peak 255). With random
weights the numbers say how far the lossy class moves *this* network's output, not image quality.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import torch

from runtime.attention_quality import psnr, rel_l2


def compare(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in sorted(set(a) & set(b)):
        x, y = a[k], b[k]
        if x.shape != y.shape:
            out[k] = {"error": f"shapes differ: {tuple(x.shape)} vs {tuple(y.shape)}"}
        elif k == "frames":
            out[k] = {"psnr_db": psnr(y, x), "shape": list(x.shape)}
        else:
            xd, yd = x.double().flatten(), y.double().flatten()
            out[k] = {"rel_l2": rel_l2(y, x), "max_abs": float((yd - xd).abs().max()) if xd.numel() else 0.0,
                      "cosine": float(torch.nn.functional.cosine_similarity(yd, xd, dim=0)) if xd.numel() else 1.0,
                      "shape": list(x.shape)}
    out["only_in_reference"] = sorted(set(a) - set(b))
    out["only_in_other"] = sorted(set(b) - set(a))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m runtime.latent_error", description=__doc__.split("\n\n")[0])
    p.add_argument("reference", help="--save-latents file of the reference run (e.g. bf16, dense)")
    p.add_argument("other", help="--save-latents file of the run compared (e.g. --precision fp8)")
    p.add_argument("--json", default=None, help="write the comparison here too")
    a = p.parse_args(argv)
    try:
        ref, other = (torch.load(f, map_location="cpu", weights_only=True) for f in (a.reference, a.other))
    except (OSError, RuntimeError) as e:
        print(f"latent_error: cannot read: {e}", file=sys.stderr)
        return 2
    res = {"reference": a.reference, "other": a.other, "outputs": compare(ref, other)}
    for k, v in res["outputs"].items():
        if isinstance(v, dict):
            print(f"{k}: " + ", ".join(f"{m} {x:.4g}" if isinstance(x, float) else f"{m} {x}" for m, x in v.items()))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(res, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
