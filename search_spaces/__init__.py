"""Search spaces as package data (rsi.spaces reads the TOML files beside this file)."""
