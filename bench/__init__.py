"""Benchmarks: each prints a table, writes it and a plot under bench/results/, and compares within one run."""
