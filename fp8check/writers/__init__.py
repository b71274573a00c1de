"""Writers: the registry, fp8check's reference and Triton writers, the exact interpreter, file loaders, adapters."""
