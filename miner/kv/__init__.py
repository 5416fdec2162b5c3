"""Paged KV cache: fixed-size pages, per-sequence block tables."""
