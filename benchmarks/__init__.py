"""Benchmarks of the conductor on the local stack (``make bench``)."""
