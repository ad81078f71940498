"""Search spaces: axes and buckets from ``search_spaces/<op>.toml``, validity predicates written once here.

The same predicates prune the offline proposer's samples and the exhaustive enumeration (quack's rule: one source
of truth), and the analytical heuristics that seed a search are named in the TOML and defined here.

An op group whose class is approximate may be judged more strictly in a search than its contract requires: a
``[<op>.approximate]`` table (keys ``max_rel_l2``, ``min_cosine``, ``max_abs_frac``) tightens those bounds. It is
checked against the op group's class when the space is loaded (``rsi.contract.tighten``): a looser value, an unknown
key or a table for an op group that is not approximate is refused there with the reason.

A space may declare more templates of the same op group, each with its own axes, predicates and heuristic, in
``[<op>.templates.<template>]`` tables (e.g. gelu_tanh's CuTe DSL template beside its Triton one, docs/cute.md): they
are the space's ``alternatives``, searched beside the main template (``rsi.search.propose``), or alone with
``rsi search --template`` (:meth:`Space.select`). The tightened bounds and the file's hash are shared, and so are
the buckets unless a template's table lists its own (``buckets``, a subset of the op group's): the buckets its
candidates are promoted on, and so the shapes a verified kernel from it serves (rsi.verified.bucket_of); the others
stay with the incumbents. The CuTe attention template claims attention's long self-attention buckets only.
"""

from __future__ import annotations

import itertools
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

SPACES_DIR = Path(__file__).resolve().parent.parent / "search_spaces"

Config = Mapping[str, Any]


H3_HIDDEN = 5376  # the hidden size every row-kernel bucket uses (rsi/refs/modulate.py HIDDEN)
H3_FFN = 14336    # H3's SwiGLU width F, the fp8 producers' swiglu_fp8 bucket (rsi/refs/swiglu.py FFN)
LTX_DIM = 4096    # the LTX-2 video stream's model dim, the ltx_* op groups' timed bucket (rsi/refs/ltx_modulate.py)


def _elems_per_thread(c: Config) -> float:
    return c["BLOCK_F"] * c.get("ROWS", 1) / (c["num_warps"] * 32)


def _row_elems_per_thread(c: Config) -> float:
    # with SEQ > 1 the next row group is in flight (bf16, half the registers) while the current one is processed
    live = 1.5 if c.get("SEQ", 1) > 1 else 1.0
    return live * (c["BLOCK_H"] + c.get("BLOCK_T", 0)) * c.get("ROWS", 1) / (c["num_warps"] * 32)


def _attn_smem_bytes(c: Config) -> int:
    """An attention tile's shared memory: num_stages K and V tiles plus the q tile, [rows, 128] bf16."""
    return (2 * max(c["num_stages"], 1) * c["BLOCK_N"] + c["BLOCK_M"]) * 128 * 2


PREDICATES: dict[str, Callable[[Config], bool]] = {
    # three fp32 values live per element (gate, up, product): keep it under ~96 registers a thread
    "regs_per_thread_fit": lambda c: _elems_per_thread(c) <= 32,
    # at least 8 bf16 per thread so each thread issues 16-byte loads
    "vector_width_ok": lambda c: _elems_per_thread(c) >= 8,
    # row-tile kernels (norms): a whole row must fit in one program's block
    "block_covers_row": lambda c: c.get("BLOCK_H", 1 << 30) >= c.get("_row", 0),
    "warps_fit_block": lambda c: c.get("BLOCK_H", 1 << 30) // (c["num_warps"] * 32) >= 1,
    # ---- whole-row kernels (modulate, gate_residual_modulate): the row lives in registers as BLOCK_H + BLOCK_T
    # the two pieces cover H3's hidden size (smaller rows are covered too; larger ones are rejected by launch)
    "row_pieces_cover_h3": lambda c: c["BLOCK_H"] + c.get("BLOCK_T", 0) >= H3_HIDDEN,
    # a tail only when the main block alone is too short (else the tail is pure waste)
    "row_tail_needed": lambda c: c.get("BLOCK_T", 0) == 0 or c["BLOCK_H"] < H3_HIDDEN,
    "row_tail_smaller": lambda c: c.get("BLOCK_T", 0) <= c["BLOCK_H"] // 2,
    # at most 96 fp32 row values per thread (the row is held across the reduction)
    "row_regs_fit": lambda c: _row_elems_per_thread(c) <= 96,
    # every piece gives each thread at least one 16-byte (8 x bf16) access
    "row_vectors_16B": lambda c: min(p for p in (c["BLOCK_H"], c.get("BLOCK_T", 0)) if p) * c.get("ROWS", 1)
    >= 8 * 32 * c["num_warps"],
    # .cg loads cannot carry an eviction priority: ptxas rejects ".evict_first" with ".cg" (H200 run 8)
    "stream_no_evict_hint": lambda c: not (c.get("STREAM") and c.get("EVICT")),
    # ---- (row, head) pair tiles of qk_norm_rope: [BLOCK_P, 64] half-head tiles, q and k per program
    # each warp holds whole 16-byte vectors of at least 4 pairs (8 lanes span one 64-wide half row)
    "pair_tile_fills_warps": lambda c: c["BLOCK_P"] * 64 >= 8 * 32 * c["num_warps"],
    # at most 64 values of one head tensor per thread (q and k are both live)
    "pair_tile_regs_fit": lambda c: c["BLOCK_P"] * 128 <= 64 * 32 * c["num_warps"],
    # ---- LTX-2 whole-row kernels (ltx_*): ROWS rows of next_power_of_2(D) columns, D = 4096 in the video bucket
    # at most 64 fp32 row values per thread (x and branch or the norm's output are live together; SEQ > 1 adds the
    # next group in flight)
    "ltx_row_regs_fit": lambda c: (1.5 if c.get("SEQ", 1) > 1 else 1.0) * LTX_DIM * c.get("ROWS", 1)
    / (c["num_warps"] * 32) <= 64,
    # each thread gets at least one 16-byte (8 x bf16) access of the row
    "ltx_row_vectors_16B": lambda c: LTX_DIM * c.get("ROWS", 1) >= 8 * 32 * c["num_warps"],
    # ltx_qk_norm_rope: a q or k row plus its cos and sin rows (fp32) live together, at most 96 values a thread
    "ltx_qk_regs_fit": lambda c: 3 * LTX_DIM * c.get("ROWS", 1) <= 96 * 32 * c["num_warps"],
    # ---- attention (FlashAttention-2 tiles, head dim 128; rsi/templates/attention.py)
    # Hopper's wgmma gives each warpgroup (4 warps) 64 query rows: BLOCK_M >= 16 rows a warp
    "attn_rows_per_warpgroup": lambda c: c["BLOCK_M"] >= 16 * c["num_warps"],
    # live fp32 values a thread: acc [BLOCK_M, 128], q [BLOCK_M, 128] bf16 (half), s and bf16 p [BLOCK_M, BLOCK_N]
    # (1.5); at most 192 of the 255 registers
    "attn_regs_fit": lambda c: (1.5 * 128 * c["BLOCK_M"] + 1.5 * c["BLOCK_M"] * c["BLOCK_N"])
    / (32 * c["num_warps"]) <= 192,
    # attention's shared memory on sm_90, both kernels: num_stages K and V tiles and the q tile (bf16), plus the
    # pipeline's barriers, within the 227 KB a block may have. Compiled with the launch's divisibility-by-16
    # specialisation (tests/unit/test_attention_compile.py): 229,376 bytes for the pointer kernel and 229,432 for the
    # TMA kernel at 128 x 128 x 3 stages, the config run 24 measured fastest (attn_smem_fit's 200 KB excludes it)
    "attn_smem_fit_sm90": lambda c: _attn_smem_bytes(c) + 1024 <= 227 * 1024,
    # SPLIT is the pointer kernel's axis: the TMA kernel (TMA = 1) masks every key block
    "attn_split_pointer": lambda c: not c.get("TMA", 0) or c["SPLIT"] == 1,
    # shared memory: num_stages buffers of a K and a V tile plus the q tile (bf16), at most 200 KB of the H200's
    # 227 KB a block (the rest for the compiler's layout conversions)
    "attn_smem_fit": lambda c: _attn_smem_bytes(c) <= 200 * 1024,
    # ---- head-row copy tiles (qkv_pack, head_merge): [BLOCK_P, 128] bf16 tiles
    "copy_tile_fills_warps": lambda c: c["BLOCK_P"] * 128 >= 8 * 32 * c["num_warps"],
    "copy_tile_regs_fit": lambda c: c["BLOCK_P"] * 128 <= 64 * 32 * c["num_warps"],
    # ---- sol_attn (rsi/templates/sol_attn.py; the attn_* predicates above bound its attention tiles)
    # a query tile lies inside one 128-row selection block and a kept key block is whole tiles
    "sol_tiles_in_selection_block": lambda c: 128 % c["BLOCK_M"] == 0 and 128 % c["BLOCK_N"] == 0,
    # the selection's fp64 [KB_P2, SEL_DC] pooled-key tile at h3_full (299 key blocks -> KB_P2 = 512): at most 64
    # fp64 values (128 registers) a thread
    "sol_select_regs_fit": lambda c: 512 * c["SEL_DC"] <= 64 * 32 * c["SEL_WARPS"],
    # ---- attention_fp8 (rsi/templates/attention_fp8.py; attn_rows_per_warpgroup and attn_regs_fit bound its tiles)
    # shared memory: num_stages bf16 buffers of a K and a V tile (the loads), the e4m3 K and V operand tiles and the
    # e4m3 q tile, at most 200 KB of the H200's 227 KB a block
    "fp8_attn_smem_fit": lambda c: (4 * max(c["num_stages"], 1) * c["BLOCK_N"] + 2 * c["BLOCK_N"] + c["BLOCK_M"])
    * 128 <= 200 * 1024,
    # ---- fp8_linear (rsi/templates/fp8_linear.py): e4m3 GEMM tiles, x quantised in registers
    # Hopper's wgmma gives each warpgroup (4 warps) 64 rows: BLOCK_M >= 16 rows a warp
    "fp8_gemm_rows_per_warpgroup": lambda c: c["BLOCK_M"] >= 16 * c["num_warps"],
    # live values a thread: the fp32 accumulator [BLOCK_M, BLOCK_N] and the fp32 x tile [BLOCK_M, BLOCK_K] being
    # quantised, at most 192 of the 255 registers
    "fp8_gemm_regs_fit": lambda c: c["BLOCK_M"] * (c["BLOCK_N"] + c["BLOCK_K"]) <= 192 * 32 * c["num_warps"],
    # shared memory: num_stages e4m3 tiles of x and w (1 byte each) plus the bf16 epilogue tile, at most 200 KB
    "fp8_gemm_smem_fit": lambda c: max(c["num_stages"], 1) * (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"]
    + 2 * c["BLOCK_M"] * c["BLOCK_N"] <= 200 * 1024,
    # ---- fp8_gemm (rsi/templates/fp8_gemm_cute.py): STAGES e4m3 tiles of x8 and w8, 128 deep, and the barriers
    # in the H200's 227 KiB of shared memory a block (the template refuses more)
    "wgmma_smem_fit": lambda c: (c["BM"] + c["BN"]) * 128 * c["STAGES"] + 1024 <= 232448,
    # ---- attention_cute (rsi/templates/attention_cute.py): the bf16 Q tile and STAGES K and V tiles, 128 wide, and
    # the barriers in the H200's 227 KiB a block (the template refuses more)
    "attn_cute_smem_fit": lambda c: ((c["BM"] + 2 * c["STAGES"] * c["BN"]) * 128 * 2 + 2048
                                     + 16 * c["BM"] * c.get("SINK", 0) <= 232448),   # SINK: the row sums' slots
    # ---- attention_fp8_cute (rsi/templates/attention_fp8_cute.py): the same tiles in e4m3, one byte an element
    "attn_fp8_cute_smem_fit": lambda c: ((c["BM"] + 2 * c["STAGES"] * c["BN"]) * 128 + 2048
                                         + 16 * c["BM"] * c.get("SINK", 0) <= 232448),
    # ---- fused fp8 producers (modulate_fp8, gate_residual_modulate_fp8, swiglu_fp8, head_merge_fp8): whole rows in
    # registers. modulate_fp8 (and gate_residual_modulate_fp8, its template with a residual prologue) at H3's 5376:
    # 4096 + 2048 columns (SPLIT) or 8192, at most 96 fp32 row values a thread
    "fp8_modulate_regs_fit": lambda c: (6144 if c["SPLIT"] else 8192) * c["ROWS"] <= 96 * 32 * c["num_warps"],
    # every piece gives each thread at least one 16-byte (8 x bf16) access
    "fp8_modulate_vectors_16B": lambda c: (2048 if c["SPLIT"] else 8192) * c["ROWS"] >= 8 * 32 * c["num_warps"],
    # swiglu_fp8: the pieces cover H3's F = 14336, a later piece never wider than an earlier one (none after a 0)
    "fp8_swiglu_pieces_cover": lambda c: c["BLOCK_A"] + c["BLOCK_B"] + c["BLOCK_C"] >= H3_FFN,
    "fp8_swiglu_pieces_ordered": lambda c: c["BLOCK_B"] <= c["BLOCK_A"] and c["BLOCK_C"] <= c["BLOCK_B"],
    # at most 32 bf16 row values a thread where silu runs in fp64 (its temporaries take two registers a value), 64
    # where it is looked up (TABLE: 64 to 121 registers at 28 to 56 values in the sm_90 compile, no spills)
    "fp8_swiglu_regs_fit": lambda c: (c["BLOCK_A"] + c["BLOCK_B"] + c["BLOCK_C"]) * c["ROWS"]
    <= (64 if c.get("TABLE", 0) else 32) * 32 * c["num_warps"],
    # FAST takes one row a program; SUB and MAXN only shape FAST's redo tile (one value of each otherwise); TABLE
    # replaces the fp64 silu, which FAST redoes
    "fp8_swiglu_fast_axes": lambda c: ((c["ROWS"] == 1) if c["FAST"] else (c["SUB"] == 16 and c["MAXN"] == 16))
    and not (c["FAST"] and (c.get("TABLE", 0) or c.get("RELOAD", 0) or c.get("FLAT", 0))),
    # FLAT: one row a step, h held across the amax, the gather from global memory; PERSIST walks rows only FLAT
    # (MAXNREG: a program's cap times its threads within the SM's 65,536 registers, or the launch fails)
    "fp8_swiglu_flat_rows": lambda c: (c["ROWS"] == 1 and not c.get("RELOAD", 0) and c.get("TABLE", 0) != 1
                                       and c.get("MAXNREG", 0) * 32 * c["num_warps"] <= 65536
                                       if c.get("FLAT", 0)
                                       else not (c.get("PERSIST", 0) or c.get("PART", 0) or c.get("MAXNREG", 0))),
    # the eight-piece templates: MAXNREG caps only the one-warp builds that hold 255 registers (RELOAD 0 and 1)
    "warp_maxnreg_caps": lambda c: not c.get("MAXNREG", 0) or (c["num_warps"] == 1 and c["RELOAD"] in (0, 1)),
    # the eight-piece templates: PERSIST (a row loop, pipelined over STAGES > 1) at one warp, RELOAD 0 or 1, uncapped
    # (the loop's shared memory already bounds programs an SM); STAGES only with the loop; RELOAD 4 (h in a scratch
    # row a program) only in the unpipelined loop
    "warp_persist_stages": lambda c: ((c["num_warps"] == 1 and not c.get("MAXNREG", 0)
                                       and (c["RELOAD"] in (0, 1) or (c["RELOAD"] == 4 and c.get("STAGES", 1) == 1)))
                                      if c.get("PERSIST", 0) else c.get("STAGES", 1) == 1 and c["RELOAD"] != 4),
    # the eight-piece templates' PREFETCH: the unpipelined row loop (PERSIST, STAGES 1) holding the row (RELOAD 0)
    "warp_prefetch": lambda c: not c.get("PREFETCH", 0) or (c.get("PERSIST", 0) > 0 and c.get("STAGES", 1) == 1
                                                            and c["RELOAD"] == 0),
    # modulate_fp8_cute: THREADS x CHUNKS 16-byte vectors a row, 1,024 (8,192 columns: H3's 5,376 padded to the
    # power of two its tree folds; more would add zero chunks, fewer would not hold the row)
    "cute_row_span": lambda c: c["THREADS"] * c["CHUNKS"] == 1024,
    # head_merge_fp8: a [64, 128] tile a row at 56 heads (W h padded to a power of two), 8 to 64 values a thread
    "fp8_merge_regs_fit": lambda c: 64 * 128 * c["ROWS"] <= 64 * 32 * c["num_warps"],
    "fp8_merge_vectors_16B": lambda c: 64 * 128 * c["ROWS"] >= 8 * 32 * c["num_warps"],
    # fp8_gemm_tma: the e4m3 operand tiles of every stage in 227 KiB of shared memory (the bf16 epilogue tile is in
    # registers), and a 64-row tile takes at most 4 warps (one warpgroup)
    # (FLATTEN: 32 KiB more at 128 x 256 x 128 x 4 stages in the sm_90 compile, taken as BLOCK_M x BLOCK_N bytes)
    "tma_smem_fit": lambda c: (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] * c["num_stages"]
    + c.get("FLATTEN", 0) * c["BLOCK_M"] * c["BLOCK_N"] <= 227 * 1024
    and (c["BLOCK_M"] == 128 or c["num_warps"] == 4)
    and c["BLOCK_M"] * c["BLOCK_N"] <= 128 * 32 * c["num_warps"],      # the fp32 accumulator: <= 128 values a thread
}


def _heuristic_elementwise_16b(space: Space) -> dict[str, Any]:
    """8 bf16 per thread (one 16-byte load per operand), 8 warps, one row per program."""
    c = {"BLOCK_F": 2048, "ROWS": 1, "num_warps": 8, "EVICT": ""}
    return {k: v for k, v in c.items() if k in space.axes}


def _heuristic_cute_wgmma_tiles(space: Space) -> dict[str, Any]:
    """CuTe DSL FP8 GEMM (rsi/templates/fp8_gemm_cute.py): 128 x 256 tiles (two consumer warpgroups, the widest
    wgmma), 4 stages (what fits), groups of 8 row tiles. H200 run 46b, outside the judge: the fastest of the three
    configs tried at qkv_full (7.94 ms against 8.53 ms at 128 x 128 x 6 stages and 11.52 ms at 64 x 128); run 48,
    in the judge, 0.70-0.96x torch._scaled_mm with one CTA a tile. Now persistent (132 CTAs, one an SM), so that
    the next tile's loads overlap the epilogue."""
    c = {"BM": 128, "BN": 256, "STAGES": 4, "GROUP_M": 8, "PERSIST": 132}
    return {k: v for k, v in c.items() if k in space.axes}


def _heuristic_cute_vectors_16b(space: Space) -> dict[str, Any]:
    """CuTe DSL elementwise (rsi/templates/gelu_tanh_cute.py): 256 threads, two 16-byte vectors a thread, loaded
    before either is computed, and the Triton template's instructions (MATH=1). H200 run 30: accepted, 259.6 us at
    the video bucket (UNROLL 1: 257.8 us, 0.997x the locked Triton kernel; docs/cute.md)."""
    c = {"THREADS": 256, "UNROLL": 2, "MATH": 1}
    return {k: v for k, v in c.items() if k in space.axes}


def _heuristic_cute_row_a_cta(space: Space) -> dict[str, Any]:
    """CuTe DSL producers (rsi/templates/modulate_fp8_cute.py, gate_residual_modulate_fp8_cute.py): a row a CTA of
    128 threads, 8 vectors a thread (modulate_fp8_cute: 86 registers in the sm_90a build, 5 CTAs and 20 warps an SM,
    against the Triton one-warp template's 8 warps). H100 run 88 h (probe 88, outside the judge): modulate_fp8_cute
    1.15x / 1.13x / 1.19x the bf16 modulate kernel at stage1 / per_rank / full, the fastest of the four configs (64
    threads 1.09-1.17x, 256 0.92-0.93x, 512 0.42-0.44x); the residual's template takes the same shape (run 89 h:
    0.979x / 0.979x / 0.913x its bf16 kernel, 256 threads 1.009x / 1.008x / 0.903x)."""
    c = {"THREADS": 128, "CHUNKS": 8}
    return {k: v for k, v in c.items() if k in space.axes}


def _heuristic_row_in_registers(space: Space) -> dict[str, Any]:
    """One row per program held in registers as 4096 + 2048 columns (87.5% of lanes busy at 5376, against 66% for
    one 8192 block), 4 warps (48 values a thread), no cross-row prefetch, rows streamed through L2 only (.cg) and
    stored with .cs. H200 sweeps (reports/h200/run5, run8): 8192-wide single blocks reached at most 62-68% (modulate)
    and 86% (gate_residual_modulate) of copy against 77-96% for 4096 + 2048; in run 8's sweep this config was within
    0.9% of the best of its subset, and its search found STREAM = 1 0.7-1.8% faster than run 2's STREAM = 0 modulate
    kernel (a tie for gate_residual_modulate)."""
    c = {"BLOCK_H": 4096, "BLOCK_T": 2048, "ROWS": 1, "SEQ": 1, "num_warps": 4, "EVICT": "", "STREAM": 1}
    return {k: v for k, v in c.items() if k in space.axes}


def _heuristic_pair_tiles(space: Space) -> dict[str, Any]:
    """16 (row, head) pairs of q and k per program, 4 warps: each thread loads one 16-byte vector per half-head
    tile, 8 KB of q/k in flight per program (H200 run 4: 78-90% of copy bandwidth)."""
    c = {"BLOCK_P": 16, "num_warps": 4, "EVICT": "evict_first"}
    return {k: v for k, v in c.items() if k in space.axes}


def _heuristic_copy_tiles(space: Space) -> dict[str, Any]:
    """32 head slots per tile, 4 warps: each thread moves two 16-byte vectors per head row (qkv_pack; H200 run 9:
    91-97% of copy bandwidth)."""
    c = {"BLOCK_P": 32, "num_warps": 4, "EVICT": ""}
    return {k: v for k, v in c.items() if k in space.axes}


def _heuristic_merge_tiles(space: Space) -> dict[str, Any]:
    """8 head rows (2 KB) per tile, 4 warps, layout compiled in: the best head_merge config at W = 2 and within 0.6% /
    1.9% of the best at W = 4 / 8 in the exhaustive H200 sweep of reports/h200/run5 (97.5 / 92.3 / 84.0% of copy,
    torch.compile 97.7 / 93.2 / 85.2%); promoted by run 7."""
    c = {"BLOCK_P": 8, "num_warps": 4, "EVICT": "", "CONST": 1}
    return {k: v for k, v in c.items() if k in space.axes}


def _heuristic_elementwise_wide(space: Space) -> dict[str, Any]:
    """Wide elementwise tiles: 8192 columns, 16 warps (two 16-byte loads per operand and thread); promoted for
    lora_consumer by reports/h200/run2.sh (1.8x the unfused path in run 4)."""
    c = {"BLOCK_F": 8192, "ROWS": 1, "num_warps": 16, "EVICT": ""}
    return {k: v for k, v in c.items() if k in space.axes}


def _heuristic_ltx_row_in_registers(space: Space) -> dict[str, Any]:
    """One 4096-wide row per program in registers, 4 warps (32 values a thread: four 16-byte vectors), rows streamed
    through L2 only (.cg) and stored with .cs: modulate's H200-measured choices (run 8) carried over to the LTX
    rows; not yet measured on LTX shapes."""
    c = {"ROWS": 1, "SEQ": 1, "num_warps": 4, "EVICT": "", "STREAM": 1}
    return {k: v for k, v in c.items() if k in space.axes}


def _heuristic_ltx_qk_rows(space: Space) -> dict[str, Any]:
    """One row of q and of k per program, 8 warps (16 values of each 4096-wide row a thread, cos and sin in fp32
    alongside), the interleaved partner from the registers (split/join), q/k loads evict_first. Not yet measured."""
    c = {"ROWS": 1, "num_warps": 8, "PAIR": 0, "EVICT": "evict_first"}
    return {k: v for k, v in c.items() if k in space.axes}


def _heuristic_flash_tiles(space: Space) -> dict[str, Any]:
    """attention: the fastest config measured on the H200, outside the judge: the pointer kernel at 128 query rows
    (two warpgroups of 64), 128 keys a step, 8 warps, 3 stages, exp2 with log2(e) in the scale, unmasked full key
    blocks (run 24: 81.0 ms against 93.7 ms for Triton's tutorial tiles, 128 x 64; run 56: 0.88x cuDNN at h3_full,
    ahead of every TMA config). Still slower than every SDPA cuDNN bucket, so it is not promoted."""
    c = {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3, "EXP2": 1, "SPLIT": 1, "TMA": 0}
    return {k: v for k, v in c.items() if k in space.axes}


def _heuristic_sparse_tiles(space: Space) -> dict[str, Any]:
    """sol_attn: 128 x 128 attention tiles (one tile per kept 128-row key block, no sub-block loop; Triton's Hopper
    fused-attention tutorial keeps 8-warp configs only at BLOCK_M * BLOCK_N >= 128 * 128), 8 warps, 2 stages (160 KB
    of shared memory), exp2; selection 32 head dims a step over 8 warps. Not yet measured on the H200."""
    c = {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 2, "EXP2": 1, "SEL_DC": 32, "SEL_WARPS": 8}
    return {k: v for k, v in c.items() if k in space.axes}


def _heuristic_fp8_flash_tiles(space: Space) -> dict[str, Any]:
    """attention_fp8: Triton's Hopper tutorial tiles (128 query rows in two warpgroups, 64 keys a step, 8 warps)
    with 2 stages, exp2, FA3's e4m3 P, the reciprocal quantiser and V's tile transposed (keys along the fast axis:
    the K-major B operand of Hopper's fp8 wgmma). Not yet measured on the H200."""
    c = {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2, "EXP2": 1, "P8": 1, "RCP": 1, "VT": 1}
    return {k: v for k, v in c.items() if k in space.axes}


def _heuristic_fp8_gemm_tiles(space: Space) -> dict[str, Any]:
    """fp8_linear: 128 x 128 output tiles (two warpgroups of 64 rows), 128 K a step (the e4m3 wgmma takes K in 32s),
    8 warps, 3 stages, grouped ordering by 8 row blocks, the reciprocal quantiser, the accumulator promoted to fp32
    every BLOCK_K (cuBLAS's default accuracy), one program per tile: the shape of Triton's Hopper matmul tutorial
    for fp8. Not yet measured on the H200."""
    c = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8, "num_warps": 8, "num_stages": 3, "RCP": 1,
         "PREC": 1, "PERSIST": 0}
    return {k: v for k, v in c.items() if k in space.axes}


def _heuristic_triton_tma_tiles(space: Space) -> dict[str, Any]:
    """fp8_gemm_tma: the CuTe template's tile (128 x 256, two warpgroups), K steps of 128 bytes (one 128-byte swizzle
    row), 4 stages (196 KiB of shared memory), groups of 8 row tiles, a persistent grid of 132 programs (the CuTe
    template's run 46b probe). H200 run 50a judged it with PREC 1 at 0.69-0.77x torch._scaled_mm; with PREC 0 (fast
    accumulation: no fp32 promotion adds in the K loop) runs 51-52 timed it at 0.996-1.09x _scaled_mm and 0.89-1.03x
    _scaled_mm with fast accumulation. FLATTEN 1 (one pipelined loop over tiles and K, the next tile's loads during
    the epilogue): run 54, 1.03-1.11x _scaled_mm and 0.92-1.03x its fast-accumulation form."""
    c = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 128, "GROUP_M": 8, "num_warps": 8, "num_stages": 4,
         "PERSIST": 132, "PREC": 0, "FLATTEN": 1}
    return {k: v for k, v in c.items() if k in space.axes}


def _heuristic_fp8_modulate_rows(space: Space) -> dict[str, Any]:
    """modulate_fp8: 4096 + 2048 columns, one row, STREAM (modulate's H200 choices) and the reciprocal quotient
    (QUOT, from head_merge_fp8's run 33 search), at 2 warps: H200 run 34b's probe (a sweep of warps and rows, not a
    search) timed 196.3 us at stage1 against 378.4 us for modulate's 4 warps (fewer cross-thread levels of the
    canonical sum of squares); run 22 had 415.6 us with 4 warps and QUOT 0."""
    c = {"SPLIT": 1, "ROWS": 1, "num_warps": 2, "EVICT": "", "STREAM": 1, "QUOT": 1}
    return {k: v for k, v in c.items() if k in space.axes}


def _heuristic_fp8_modulate_warp(space: Space) -> dict[str, Any]:
    """modulate_fp8_warp: one warp a row (the canonical tree without shared memory), STREAM and QUOT as the row
    templates, and the row loop: 1,056 programs (132 SMs x the 8 one-warp programs its 255 registers allow) walk the
    rows unpipelined (PERSIST 1056, STAGES 1), the row held (RELOAD 0). Probe 79, a sweep outside the judge: 0.793x
    the bf16 modulate kernel at stage1 on an H100 (run 79 h3) and 0.705x on the H200 (run 79), against 0.760x and
    0.665x for one program a row with the row read again for h (RELOAD 1, the heuristic before: probe 73's fastest
    of five, promoted for h100 in run 73 d). The H200 judge promoted it for h200 (run 79: 1.16-1.20x the locked
    kernel, modulate_fp8_warp-0f472465614a). The last piece only as wide as the row needs (TAIL 1) and the squares
    unpacked from x's bits (UNPACK 1): probe 81 on an H100 (run 81 h, a sweep of five outside the judge) 0.864x /
    0.872x / 0.978x the bf16 kernel at stage1 / per_rank / full (TAIL alone 0.890x / 0.867x / 0.943x; without either
    0.800x / 0.796x / 0.879x), the fastest by the geometric mean; judged and promoted for h100
    (modulate_fp8_warp-7a677d5dddbd, 1.29x the locked kernel). The loop carrying the next row's pieces, each loaded
    after the same piece's bytes (PREFETCH 1), with TAIL 1 and UNPACK 0: probe 82 on an H100 (run 82 h, a sweep of
    five outside the judge) 0.910x / 0.903x / 1.053x the bf16 kernel against 0.876x / 0.871x / 0.977x for the h100
    lock's config; judged and promoted for h100 (modulate_fp8_warp-583a674ad097). Not yet timed on the H200."""
    c = {"num_warps": 1, "STREAM": 1, "QUOT": 1, "RELOAD": 0, "MAXNREG": 0, "PERSIST": 1056, "STAGES": 1, "TAIL": 1,
         "UNPACK": 0, "PREFETCH": 1}
    return {k: v for k, v in c.items() if k in space.axes}


def _heuristic_fp8_residual_warp(space: Space) -> dict[str, Any]:
    """gate_residual_modulate_fp8_warp: modulate_fp8_warp's (one warp). Probe 73 on the H100 had 4 warps the faster
    (0.767x the bf16 gate_residual_modulate kernel at stage1 against 0.723x; promoted for the h100 target in run 73
    d), its H200 call one warp (0.632x against 0.602x). Since the quantiser's NaN row and tiny row are branches
    (deb8a41: 5,948 -> 5,035 instructions a one-warp program), one warp is the faster on the H100 too: 0.818x
    against 0.783x at 4 warps (probe 79, run 79 h2, a sweep outside the judge). TAIL 1 (the last piece 256 columns
    wide at H3's 5376): probe 81 on an H100 (run 81 h) 0.906x / 0.907x / 0.958x against 0.811x / 0.818x / 0.874x,
    judged and promoted for h100 (gate_residual_modulate_fp8_warp-7224faf2f3d0, 1.19-1.20x the locked kernel); the
    row loop with TAIL was faster at stage1 only (0.916x / 0.889x / 0.927x), and slower with PREFETCH (run 83 h:
    0.835x / 0.819x / 0.881x, its build spills). Not yet timed on the H200."""
    c = {"num_warps": 1, "STREAM": 1, "QUOT": 1, "RELOAD": 1, "MAXNREG": 0, "PERSIST": 0, "STAGES": 1, "TAIL": 1,
         "UNPACK": 0, "PREFETCH": 0}
    return {k: v for k, v in c.items() if k in space.axes}


def _heuristic_fp8_swiglu_rows(space: Space) -> dict[str, Any]:
    """swiglu_fp8: one row as 8192 + 4096 + 2048 columns (no idle lanes at F = 14336). Run 31's was 16 warps with the
    fp64 silu (704 us at stage1 on the H200); runs 33 and 34b: the reciprocal quotient (QUOT) helps, FAST does not,
    two rows at 32 warps was the best fp64 config (570 us; the h200 lock's kernel). Now silu_c looked up in the
    full table (TABLE 2) at one row and 8 warps: probe 73's fastest of thirteen (a sweep on an H100, outside the
    judge: 347.9 us at stage1 against 585.2 us for the locked fp64 kernel and 292.8 us for the bf16 swiglu kernel;
    TABLE 1 and two rows slower, RELOAD slower), promoted for h200 in run 73 p on an H200. Run 74 a's FLAT at 32
    warps, PERSIST 132 was faster still (probe 74, H100: 1.09x the bf16 swiglu kernel at stage1); the heuristic stays
    this 2-D form, from which the tests derive their FAST, TABLE 1 and ROWS 2 configs (FLAT refuses those)."""
    c = {"BLOCK_A": 8192, "BLOCK_B": 4096, "BLOCK_C": 2048, "ROWS": 1, "num_warps": 8, "EVICT": "", "FAST": 0,
         "SUB": 16, "MAXN": 16, "QUOT": 1, "TABLE": 2, "RELOAD": 0, "FLAT": 0, "PERSIST": 0, "PART": 0, "MAXNREG": 0}
    return {k: v for k, v in c.items() if k in space.axes}


def _heuristic_cute_flash_tiles(space: Space) -> dict[str, Any]:
    """attention_cute (rsi/templates/attention_cute.py): 128 query rows in two consumer warpgroups, 128 keys a block
    (S and P 64 values a thread each, beside the 64 of O), K and V 2 stages deep (160 KiB of shared memory), and
    FA3's intra-warpgroup overlap (OVERLAP 1) without its ping-pong: the fastest of the four schedules at h3_full and
    h3_stage1 in H200 probe 65 (SDPA cuDNN / it 1.147x and 1.046x, outside the judge; the plain form 0.981x and
    0.884x). Until the sixteenth session the heuristic was the plain form (neither schedule), verified first: the
    judge accepted it in run 66 (0.88-0.97x cuDNN)."""
    c = {"BM": 128, "BN": 128, "STAGES": 2, "PINGPONG": 0, "OVERLAP": 1, "DYNAMIC": 0, "SINK": 0}
    return {k: v for k, v in c.items() if k in space.axes}


def _heuristic_cute_fp8_flash_tiles(space: Space) -> dict[str, Any]:
    """attention_fp8_cute (rsi/templates/attention_fp8_cute.py): 192 keys a block, 2 stages, both of FA3's
    schedules (PINGPONG 1, OVERLAP 1), static layouts, the vectorised quantisers (QVEC 1), every exponential on the
    MUFU (EMU 0): probe 71's fastest of five schedules (a sweep outside the judge: 1.527x SDPA cuDNN at h3_full),
    promoted in run 71 (1.579x SDPA cuDNN, 1.129x cuDNN's FP8 attention at h3_full). Before: BN 128 and run 69's
    quantisers (probe 69's sweep; judged in run 69d at 1.443x), and before that attention_cute's PINGPONG 0."""
    c = {"BM": 128, "BN": 192, "STAGES": 2, "PINGPONG": 1, "OVERLAP": 1, "DYNAMIC": 0, "QVEC": 1, "EMU": 0, "SINK": 0}
    return {k: v for k, v in c.items() if k in space.axes}


def _heuristic_fp8_merge_rows(space: Space) -> dict[str, Any]:
    """head_merge_fp8: one destination row (a [64, 128] tile) per program, 8 warps (32 values a thread, four 16-byte
    loads), the reciprocal quotient: H200 run 33's search found QUOT 1 (246.8 against 401.6 us at w1 for this config
    with QUOT 0); none of its candidates could be promoted then (the unfused incumbent was not vetted)."""
    c = {"ROWS": 1, "num_warps": 8, "EVICT": "", "QUOT": 1}
    return {k: v for k, v in c.items() if k in space.axes}


HEURISTICS: dict[str, Callable[[Space], dict[str, Any]]] = {
    "elementwise_16B": _heuristic_elementwise_16b,
    "elementwise_wide": _heuristic_elementwise_wide,
    "cute_vectors_16B": _heuristic_cute_vectors_16b,
    "cute_wgmma_tiles": _heuristic_cute_wgmma_tiles,
    "cute_flash_tiles": _heuristic_cute_flash_tiles,
    "cute_fp8_flash_tiles": _heuristic_cute_fp8_flash_tiles,
    "row_in_registers": _heuristic_row_in_registers,
    "pair_tiles": _heuristic_pair_tiles,
    "copy_tiles": _heuristic_copy_tiles,
    "merge_tiles": _heuristic_merge_tiles,
    "ltx_row_in_registers": _heuristic_ltx_row_in_registers,
    "ltx_qk_rows": _heuristic_ltx_qk_rows,
    "flash_tiles": _heuristic_flash_tiles,
    "fp8_flash_tiles": _heuristic_fp8_flash_tiles,
    "sparse_tiles": _heuristic_sparse_tiles,
    "fp8_gemm_tiles": _heuristic_fp8_gemm_tiles,
    "triton_tma_tiles": _heuristic_triton_tma_tiles,
    "fp8_modulate_rows": _heuristic_fp8_modulate_rows,
    "fp8_modulate_warp": _heuristic_fp8_modulate_warp,
    "cute_row_a_cta": _heuristic_cute_row_a_cta,
    "fp8_residual_warp": _heuristic_fp8_residual_warp,
    "fp8_swiglu_rows": _heuristic_fp8_swiglu_rows,
    "fp8_merge_rows": _heuristic_fp8_merge_rows,
}


@dataclass(frozen=True)
class Space:
    op: str
    template: str
    axes: dict[str, list]
    predicates: tuple[str, ...]
    buckets: tuple[str, ...]
    heuristic_name: str
    sha256: str
    approximate: dict[str, float] = field(default_factory=dict)  # tightened approximate bounds (module docstring)
    alternatives: tuple[Space, ...] = ()   # the op group's other templates ([<op>.templates.<name>])

    def valid(self, config: Config) -> tuple[bool, str]:
        for name in self.predicates:
            if not PREDICATES[name](config):
                return False, name
        for k, v in config.items():
            if k in self.axes and v not in self.axes[k]:
                return False, f"{k}={v} not on axis"
        return True, ""

    def enumerate(self) -> list[dict[str, Any]]:
        keys = list(self.axes)
        out = []
        for values in itertools.product(*(self.axes[k] for k in keys)):
            c = dict(zip(keys, values))
            if self.valid(c)[0]:
                out.append(c)
        return out

    def heuristic(self) -> dict[str, Any]:
        c = HEURISTICS[self.heuristic_name](self)
        ok, why = self.valid(c)
        if not ok:
            raise ValueError(f"heuristic for {self.op} violates {why}")
        return c

    @property
    def templates(self) -> tuple[str, ...]:
        return (self.template, *(a.template for a in self.alternatives))

    def of(self, template: str | None) -> Space:
        """The space of the template a candidate came from (its buckets decide its promotion); this space where
        ``template`` is None or this space's own."""
        return self if template in (None, self.template) else self.select(template)

    def select(self, template: str) -> Space:
        """The space of one of its templates alone (``rsi search --template``)."""
        for s in (self, *self.alternatives):
            if s.template == template:
                return replace(s, alternatives=())
        raise ValueError(f"op group {self.op!r} has no template {template!r}; its space declares "
                         f"{', '.join(self.templates)}")


def load_space(op: str, spaces_dir: Path = SPACES_DIR) -> Space:
    import hashlib

    path = spaces_dir / f"{op}.toml"
    if not path.exists():
        raise FileNotFoundError(f"no search space for op group {op!r}: expected {path}")
    raw = path.read_bytes()
    data = tomllib.loads(raw.decode())
    if op not in data:
        raise ValueError(f"{path} has no [{op}] table")
    t = data[op]
    for table in (t, *t.get("templates", {}).values()):
        for p in table.get("predicates", []):
            if p not in PREDICATES:
                raise ValueError(f"{path}: unknown predicate {p!r}; known: {', '.join(PREDICATES)}")
        if table.get("heuristic") not in HEURISTICS:
            raise ValueError(f"{path}: unknown heuristic {table.get('heuristic')!r}")
    approximate = dict(t.get("approximate", {}))
    if approximate:
        from rsi.contract import tighten
        from rsi.refs import get_op_group

        try:
            tighten(get_op_group(op).tolerance, approximate)
        except ValueError as e:
            raise ValueError(f"{path}: [{op}.approximate]: {e}") from None
    def space(template: str, table: dict) -> Space:
        if not (Path(__file__).resolve().parent / "templates" / f"{template}.py").exists():
            raise ValueError(f"{path}: no template rsi/templates/{template}.py")
        buckets = tuple(table.get("buckets", t.get("buckets", [])))
        if table is not t and "buckets" in table and (not buckets or not set(buckets) <= set(t.get("buckets", []))):
            raise ValueError(f"{path}: template {template}'s buckets {list(buckets)} must be a non-empty subset of "
                             f"[{op}].buckets {t.get('buckets', [])}")
        return Space(op=op, template=template, axes={k: list(v) for k, v in table["axes"].items()},
                     predicates=tuple(table.get("predicates", [])), buckets=buckets,
                     heuristic_name=table["heuristic"], sha256=hashlib.sha256(raw).hexdigest(), approximate=approximate)

    return replace(space(t["template"], t), alternatives=tuple(space(name, table) for name, table in
                                                               t.get("templates", {}).items()))


def template_source(name: str) -> str:
    return (Path(__file__).resolve().parent / "templates" / f"{name}.py").read_text()
