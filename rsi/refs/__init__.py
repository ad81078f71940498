"""Reference op groups, one module per op group: the single source of truth of *what* is computed."""

from __future__ import annotations

import importlib

from rsi.contract import OpGroup

# op name -> module under rsi.refs; the same name is used in search_spaces/, templates, verified_kernels/, tests
OP_MODULES = {
    "swiglu": "rsi.refs.swiglu",
    "modulate": "rsi.refs.modulate",
    "gate_residual_modulate": "rsi.refs.gate_residual_modulate",
    "qk_norm_rope": "rsi.refs.qk_norm_rope",
    "qkv_pack": "rsi.refs.qkv_pack",
    "head_merge": "rsi.refs.head_merge",
    "lora_consumer": "rsi.refs.lora_consumer",
    "ltx_modulate": "rsi.refs.ltx_modulate",
    "ltx_gate_residual_modulate": "rsi.refs.ltx_gate_residual_modulate",
    "ltx_qk_norm_rope": "rsi.refs.ltx_qk_norm_rope",
    "gelu_tanh": "rsi.refs.gelu_tanh",
    "attention": "rsi.refs.attention",
    "attention_fp8": "rsi.refs.attention_fp8",
    "sol_attn": "rsi.refs.sol_attn",
    "fp8_linear": "rsi.refs.fp8_linear",
    "fp8_gemm": "rsi.refs.fp8_gemm",
    "modulate_fp8": "rsi.refs.modulate_fp8",
    "gate_residual_modulate_fp8": "rsi.refs.gate_residual_modulate_fp8",
    "swiglu_fp8": "rsi.refs.swiglu_fp8",
    "head_merge_fp8": "rsi.refs.head_merge_fp8",
}


def op_names() -> list[str]:
    return list(OP_MODULES)


def get_op_group(name: str) -> OpGroup:
    if name not in OP_MODULES:
        raise KeyError(f"unknown op group {name!r}; known: {', '.join(OP_MODULES)} (see `rsi show --ops`)")
    return importlib.import_module(OP_MODULES[name]).OP_GROUP


def reference_source_sha256(name: str) -> str:
    """Hash of the reference module's source: a record pins the exact reference it was verified against."""
    import hashlib
    import inspect

    return hashlib.sha256(inspect.getsource(importlib.import_module(OP_MODULES[name])).encode()).hexdigest()
