"""fp8check: byte-exact verification of FP8 indexer K-cache writers. `import fp8check` stays cheap: the API
(`compare_writers`, `Result`) is imported on first use."""

from ._version import __version__

__all__ = ["compare_writers", "Result", "testing"]


def __getattr__(name: str):
    if name in ("compare_writers", "Result"):
        from . import api

        return getattr(api, name)
    if name == "testing":  # importlib: `from . import testing` would come back here
        import importlib

        return importlib.import_module(".testing", __name__)
    raise AttributeError(f"module 'fp8check' has no attribute {name!r}")
