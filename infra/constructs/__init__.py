"""The conductor stack's building blocks."""
