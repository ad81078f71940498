from rsi.harness.static import check_source
from rsi.spaces import template_source

OK = '''
import torch
import triton
import triton.language as tl

BLOCK = 128


@triton.jit
def _k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def launch(x, BLOCK=128):
    out = torch.empty_like(x)
    _k[(triton.cdiv(x.numel(), BLOCK),)](out, x.numel(), BLOCK=BLOCK)
    return out
'''


def reason(src: str) -> str:
    r = check_source(src)
    return "" if r.ok else r.reason


def test_templates_pass():
    assert reason(OK) == ""
    assert reason(template_source("swiglu")) == ""


def test_rejections():
    cases = {
        "import os\n" + OK: "imports os",
        OK.replace("out = torch.empty_like(x)", "out = x.clone()"): "tensor method .clone()",
        OK.replace("out = torch.empty_like(x)", "out = torch.zeros_like(x)"): "torch.zeros_like",
        OK + "\n_C = {}\n": "module-level value",
        OK.replace("def launch(x, BLOCK=128):", "def launch(x, BLOCK=128, _c=[]):"): "mutable default",
        OK.replace("    out = torch.empty_like(x)\n", "    global BLOCK\n    out = torch.empty_like(x)\n"): "global",
        OK.replace("def launch", "def entry"): "no entry point",
        OK + "\nprint('import-time work')\n": "module-level statement",
        OK.replace("    return out", "    x.storage = 1\n    return out"): "assigns attribute",
        OK.replace("    return out", "    v = x.item()\n    return out"): ".item()",
        OK.replace("    return out", "    if x.shape[0] == 9562:\n        return x\n    return out"): "special-casing",
        OK.replace("    return out", "    f = getattr(x, 'cuda')\n    return out"): "getattr",
        OK.replace("    return out", "    s = x.__class__\n    return out"): "dunder",
        OK + "\nclass A:\n    pass\n": "ClassDef",
        "def launch(:\n": "syntax error",
        OK.replace("tl.store(x_ptr", "tl.inline_asm_elementwise('mov.u64 $0, %globaltimer;', '=l', [], "
                                     "dtype=tl.int64, is_pure=False, pack=1)\n    tl.store(x_ptr"): "inline",
    }
    for src, words in cases.items():
        r = reason(src)
        assert words in r, (words, r)
