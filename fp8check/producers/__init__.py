"""What turns inputs into cache bytes (writers) and cache bytes into logits (readers), behind one registry."""
