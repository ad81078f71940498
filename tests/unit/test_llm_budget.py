"""Budgets, the price table, proposer settings and the response cache (no network)."""

from __future__ import annotations

import sqlite3

import pytest

from rsi.llm.budget import Budget, Limits, Price, Spent, load_prices, price_for
from rsi.llm.cache import ResponseCache, cache_key
from rsi.llm.clients import ConfigError
from rsi.search.llm_proposers import Settings


def test_price_table_loads_and_matches_dated_snapshots():
    prices = load_prices()
    assert prices["gpt-4.1"].output_per_mtok > prices["gpt-4.1"].input_per_mtok > 0
    assert price_for("gpt-4.1-2025-04-14", "openai", prices) == prices["gpt-4.1"]
    assert price_for("claude-haiku-4-5-20251001", "anthropic", prices) == prices["claude-haiku-4-5"]
    # a different model that merely starts with a listed name is not priced as that model
    assert price_for("gpt-4.1-turbo-max", "openai", prices) is None


def test_unknown_prices_local_servers_and_overrides():
    assert price_for("my-finetune", "anthropic", {}) is None
    local = price_for("Qwen/Qwen3-Coder", "openai-compatible", {})
    assert local.cost(10**6, 10**6) == 0.0
    assert price_for("anything", "openai", {}, 1.0, 2.0).cost(10**6, 10**6) == pytest.approx(3.0)


def test_budget_refuses_the_call_that_could_cross_a_limit():
    price = Price(10.0, 30.0, "test")  # $ per million tokens
    b = Budget(Limits(max_calls=3, max_tokens=None, max_cost_usd=0.05, max_wall_s=None), price, 1000)
    assert b.refuse(3000) == ""          # worst case: 1000 in + 1000 out = $0.04
    b.spent.add({"input_tokens": 1000, "output_tokens": 200}, b.cost(1000, 200), 1.0, cached=False)
    why = b.refuse(3000)                 # $0.016 spent + $0.04 worst case > $0.05
    assert why.startswith("cost budget reached")


def test_call_token_and_wall_limits():
    b = Budget(Limits(max_calls=1, max_tokens=None, max_cost_usd=None, max_wall_s=None), None, 100)
    b.spent.add({}, 0.0, 0.1, cached=True)  # cached replies are free and count as no call
    assert b.refuse(10) == ""
    b.spent.add({}, 0.0, 0.1, cached=False, failed=True)
    assert b.refuse(10).startswith("call budget reached")
    t = Budget(Limits(max_calls=None, max_tokens=500, max_cost_usd=None, max_wall_s=None), None, 400)
    assert t.refuse(600).startswith("token budget reached")  # 200 estimated in + 400 out > 500
    w = Budget(Limits(max_calls=None, max_tokens=None, max_cost_usd=None, max_wall_s=5.0), None, 1)
    w.spent.add({}, 0.0, 6.0, cached=False)
    assert w.refuse(1).startswith("LLM wall-time budget")


def test_cost_limit_needs_a_price():
    with pytest.raises(ValueError):
        Budget(Limits(max_cost_usd=1.0), None, 100)


def test_spent_is_restored_from_a_transcript():
    records = [{"type": "call", "usage": {"input_tokens": 10, "output_tokens": 5}, "cost_usd": 0.5, "wall_s": 2.0},
               {"type": "call", "usage": {"input_tokens": 10, "output_tokens": 5}, "cost_usd": 0.0, "cached": True},
               {"type": "call_error", "wall_s": 1.0}, {"type": "proposal"}]
    s = Spent.from_records(records)
    assert (s.calls, s.failed_calls, s.cached, s.tokens, s.cost_usd, s.wall_s) == (2, 1, 1, 15, 0.5, 3.0)


def test_settings_from_args_then_environment():
    s = Settings.from_args({"model": "m", "hybrid_tune": 2}, {"RSI_LLM_MAX_COST_USD": "0.5",
                                                              "RSI_LLM_HYBRID_TUNE": "7", "RSI_LLM_CACHE": "false",
                                                              "RSI_LLM_MAX_CALLS": "none"})
    assert (s.model, s.hybrid_tune, s.max_cost_usd, s.cache, s.max_calls) == ("m", 2, 0.5, False, None)
    with pytest.raises(ConfigError, match="unknown proposer setting"):
        Settings.from_args({"max_cost": 1}, {})
    with pytest.raises(ConfigError, match="RSI_LLM_RETRIES"):
        Settings.from_args({}, {"RSI_LLM_RETRIES": "many"})


def test_response_cache_round_trip():
    conn = sqlite3.connect(":memory:")
    cache = ResponseCache(conn)
    key = cache_key("openai", "gpt-4.1", "sys", "user", {"max_output_tokens": 10})
    assert cache.get(key) is None
    cache.put(key, "openai", "gpt-4.1", "sha", "the reply", {"input_tokens": 3, "output_tokens": 2}, "stop")
    assert cache.get(key) == {"reply": "the reply", "usage": {"input_tokens": 3, "output_tokens": 2},
                              "finish_reason": "stop"}
    assert cache_key("openai", "gpt-4.1", "sys", "user", {"max_output_tokens": 11}) != key
    assert cache_key("anthropic", "gpt-4.1", "sys", "user", {"max_output_tokens": 10}) != key
    assert ResponseCache(conn, enabled=False).get(key) is None
