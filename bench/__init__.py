"""Benchmarks: they print their figures and write CSV; tests only check behaviour."""
