"""Readers: code that turns cache bytes into the indexer's logits (docs/NUMERICS.md)."""
