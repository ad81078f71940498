"""rsi: recursive-self-improvement kernel search for MiniMax-H3, under a fail-closed contract."""

__version__ = "0.1.0"
