"""LLM and agent proposers' parts: prompt assembly, reply parsing, clients, budgets, response cache, transcripts.

The proposers themselves live in ``rsi.search.llm_proposers``; docs/proposers.md says how to run each one.
"""
