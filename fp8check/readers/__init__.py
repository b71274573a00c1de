"""Readers: code that turns cache bytes into the indexer's logits (SPEC.md section 7)."""
