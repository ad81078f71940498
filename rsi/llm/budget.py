"""Spending limits of an LLM proposer: calls, tokens, cost and time spent waiting for replies.

Costs come from the per-model price table ``prices.toml`` (US dollars per million tokens). The check runs *before*
each call against a worst case (the prompt's estimated tokens plus the full reply allowance), so a run stops before
the call that could cross a limit, not after it. Cached replies cost nothing and count as no call.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PRICES_PATH = Path(__file__).with_name("prices.toml")
# a dated snapshot of a listed model: "gpt-4.1-2025-04-14", "claude-haiku-4-5-20251001"
_SNAPSHOT = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")
CHARS_PER_TOKEN = 3.0  # conservative (English prose is ~4, code ~3): over-estimates rather than under-estimates


@dataclass(frozen=True)
class Price:
    input_per_mtok: float
    output_per_mtok: float
    source: str  # where the numbers came from: a prices.toml key, an override, or "local"

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


def load_prices(path: Path = PRICES_PATH) -> dict[str, Price]:
    data = tomllib.loads(path.read_text())
    return {name: Price(float(p["input"]), float(p["output"]), f"{path.name}:{name}")
            for name, p in data.get("models", {}).items()}


def price_for(model: str, provider: str, prices: dict[str, Price] | None = None,
              override_in: float | None = None, override_out: float | None = None) -> Price | None:
    """The model's price: explicit override, else the table (exact name or a dated snapshot of a listed name),
    else free for a local OpenAI-compatible server, else None (unknown: no cost budget can be enforced)."""
    if override_in is not None or override_out is not None:
        return Price(float(override_in or 0.0), float(override_out or 0.0), "override")
    prices = load_prices() if prices is None else prices
    if model in prices:
        return prices[model]
    base = _SNAPSHOT.sub("", model)
    if base != model and base in prices:
        return prices[base]
    if provider == "openai-compatible":
        return Price(0.0, 0.0, "local (not in prices.toml: counted as free)")
    return None


@dataclass(frozen=True)
class Limits:
    """None disables a limit."""

    max_calls: int | None = 20
    max_tokens: int | None = 2_000_000
    max_cost_usd: float | None = 5.0
    max_wall_s: float | None = 3600.0


@dataclass
class Spent:
    calls: int = 0            # calls sent to the model (a call with retries counts once), failed ones included
    failed_calls: int = 0
    cached: int = 0           # replies served from the response cache (free)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    wall_s: float = 0.0       # time spent waiting for replies, retries and backoff included

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"cost_usd": round(self.cost_usd, 6), "wall_s": round(self.wall_s, 3)}

    @classmethod
    def from_records(cls, records: Iterable[dict]) -> Spent:
        """Re-add what a transcript says was spent (a resumed run keeps counting from there)."""
        s = cls()
        for r in records:
            if r.get("type") == "call":
                s.add(r.get("usage") or {}, r.get("cost_usd") or 0.0, r.get("wall_s") or 0.0, bool(r.get("cached")))
            elif r.get("type") == "call_error":
                s.add({}, 0.0, r.get("wall_s") or 0.0, cached=False, failed=True)
        return s

    def add(self, usage: dict, cost: float, wall_s: float, cached: bool, failed: bool = False) -> None:
        if cached:
            self.cached += 1
            return
        self.calls += 1
        self.failed_calls += int(failed)
        self.input_tokens += int(usage.get("input_tokens") or 0)
        self.output_tokens += int(usage.get("output_tokens") or 0)
        self.cost_usd += cost
        self.wall_s += wall_s


class Budget:
    def __init__(self, limits: Limits, price: Price | None, max_output_tokens: int, spent: Spent | None = None):
        if limits.max_cost_usd is not None and price is None:
            raise ValueError("a cost limit needs a price")
        self.limits, self.price, self.max_output_tokens = limits, price, max_output_tokens
        self.spent = spent or Spent()

    def refuse(self, prompt_chars: int) -> str:
        """Why the next call may not be made ('' when it may)."""
        lim, s = self.limits, self.spent
        est_in = math.ceil(prompt_chars / CHARS_PER_TOKEN)
        if lim.max_calls is not None and s.calls >= lim.max_calls:
            return f"call budget reached ({s.calls} of {lim.max_calls} calls)"
        if lim.max_tokens is not None and s.tokens + est_in + self.max_output_tokens > lim.max_tokens:
            return (f"token budget reached ({s.tokens} spent; the next call may take up to "
                    f"{est_in + self.max_output_tokens} more, limit {lim.max_tokens})")
        if lim.max_cost_usd is not None:
            worst = self.price.cost(est_in, self.max_output_tokens)
            if s.cost_usd + worst > lim.max_cost_usd:
                return (f"cost budget reached (${s.cost_usd:.4f} spent; the next call may cost up to ${worst:.4f}, "
                        f"limit ${lim.max_cost_usd:.4f})")
        if lim.max_wall_s is not None and s.wall_s >= lim.max_wall_s:
            return f"LLM wall-time budget reached ({s.wall_s:.0f} s of {lim.max_wall_s:.0f} s waiting for replies)"
        return ""

    def cost(self, input_tokens: int, output_tokens: int) -> float | None:
        return self.price.cost(input_tokens, output_tokens) if self.price else None
