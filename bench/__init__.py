"""Benchmarks: each file runs on its own (`make bench` runs them all)."""
