"""Renderers: pure functions from a result to text (terminal, JSON). Only the CLI prints or writes."""
