"""Search spaces: axes and buckets from ``search_spaces/<op>.toml``, validity predicates written once here.

The same predicates prune the offline proposer's samples and the exhaustive enumeration (quack's rule: one source
of truth), and the analytical heuristics that seed a search are named in the TOML and defined here.
"""

from __future__ import annotations

import itertools
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

SPACES_DIR = Path(__file__).resolve().parent.parent / "search_spaces"

Config = Mapping[str, Any]


def _elems_per_thread(c: Config) -> float:
    return c["BLOCK_F"] * c.get("ROWS", 1) / (c["num_warps"] * 32)


PREDICATES: dict[str, Callable[[Config], bool]] = {
    # three fp32 values live per element (gate, up, product): keep it under ~96 registers a thread
    "regs_per_thread_fit": lambda c: _elems_per_thread(c) <= 32,
    # at least 8 bf16 per thread so each thread issues 16-byte loads
    "vector_width_ok": lambda c: _elems_per_thread(c) >= 8,
    # row-tile kernels (norms): a whole row must fit in one program's block
    "block_covers_row": lambda c: c.get("BLOCK_H", 1 << 30) >= c.get("_row", 0),
    "warps_fit_block": lambda c: c.get("BLOCK_H", 1 << 30) // (c["num_warps"] * 32) >= 1,
}


def _heuristic_elementwise_16b(space: "Space") -> dict[str, Any]:
    """8 bf16 per thread (one 16-byte load per operand), 8 warps, one row per program."""
    c = {"BLOCK_F": 2048, "ROWS": 1, "num_warps": 8, "EVICT": ""}
    return {k: v for k, v in c.items() if k in space.axes}


HEURISTICS: dict[str, Callable[["Space"], dict[str, Any]]] = {
    "elementwise_16B": _heuristic_elementwise_16b,
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
    for p in t.get("predicates", []):
        if p not in PREDICATES:
            raise ValueError(f"{path}: unknown predicate {p!r}; known: {', '.join(PREDICATES)}")
    if t.get("heuristic") not in HEURISTICS:
        raise ValueError(f"{path}: unknown heuristic {t.get('heuristic')!r}")
    return Space(op=op, template=t["template"], axes={k: list(v) for k, v in t["axes"].items()},
                 predicates=tuple(t.get("predicates", [])), buckets=tuple(t.get("buckets", [])),
                 heuristic_name=t["heuristic"], sha256=hashlib.sha256(raw).hexdigest())


def template_source(name: str) -> str:
    return (Path(__file__).resolve().parent / "templates" / f"{name}.py").read_text()
