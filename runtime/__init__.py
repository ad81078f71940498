"""MiniMax-H3 inference runtime: the real architecture end to end, fused ops from verified_kernels/ (docs/runtime.md).

Entry points: ``python -m runtime.cli run-pipeline`` (``rsi run-pipeline``), ``runtime.pipeline.run_pipeline``,
``python -m runtime.bench_h200``. Nothing is imported here, so ``import runtime`` stays cheap.
"""
