"""Verified kernels as package data: the lock a wheel install falls back to (rsi.verified.find_root)."""
