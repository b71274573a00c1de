"""fp8check: byte-exact verification of FP8 indexer K-cache writers."""

__version__ = "0.1.0"
