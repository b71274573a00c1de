"""Fixtures and helpers shared by the test files (import the helpers: `from conftest import run`)."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

import pytest

# pytest-xdist: N workers, each with torch's default of one thread per core, oversubscribe the machine
# N times over; each worker takes its share of the cores, and the processes it starts inherit it.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // _WORKERS))

import torch  # noqa: E402 - after the thread count it reads at import
from hypothesis import settings  # noqa: E402

if _WORKERS > 1:
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))  # if a plugin imported torch before this file

# The cache folder (disk_cache.py) of the whole session, subprocesses included: a fresh one, never the
# developer's; tests of the caches themselves point it elsewhere.
os.environ["FP8CHECK_CACHE_DIR"] = tempfile.mkdtemp(prefix="fp8check-test-cache-")
atexit.register(shutil.rmtree, os.environ["FP8CHECK_CACHE_DIR"], ignore_errors=True)

def pytest_addoption(parser):
    group = parser.getgroup("fp8check", "released writers for the compiled-truth corpus (test_compiled_corpus.py)")
    group.addoption("--wheels", metavar="DIR", help="a folder holding the released wheels the project tables pin"
                    " (pip download's output); without it, the corpus cases of released writers are skipped")
    group.addoption("--flaggems-checkout", metavar="PATH", help="a clone of FlagGems (its writer is in no release)")


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("+")[0].split(".")[:2])


def pytest_collection_modifyitems(config, items):
    """Markers say what a test needs (pyproject.toml); a machine without it skips the test with the reason."""
    cuda = torch.cuda.is_available()
    try:
        import triton

        triton_release = _release(triton.__version__)
    except ImportError:
        triton_release = None
    for item in items:
        if item.get_closest_marker("cuda") and not cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
        if item.get_closest_marker("cpu") and cuda:
            item.add_marker(pytest.mark.skip(reason="about a machine without a GPU; torch sees one here"))
        wanted = item.get_closest_marker("triton")
        if wanted is not None:
            low, high = wanted.kwargs.get("min"), wanted.kwargs.get("max")
            if triton_release is None or (low and triton_release < _release(low)) or (
                    high and triton_release > _release(high)):
                item.add_marker(pytest.mark.skip(reason=f"needs Triton {low or ''}..{high or ''}"))


# Property tests cost the same every run: examples derived from the test, not drawn at random, and no
# example database between runs (STYLE.md habit 16).
settings.register_profile("fp8check", derandomize=True, database=None, deadline=None, print_blob=True)
settings.load_profile("fp8check")


@pytest.fixture
def no_real_libraries(monkeypatch):
    """Whatever is installed here, each test sees only the aiter / vLLM modules it injects."""
    for name in [n for n in sys.modules if n.split(".")[0] in ("aiter", "vllm")]:
        monkeypatch.delitem(sys.modules, name)
    for name in ("aiter", "vllm"):
        monkeypatch.setitem(sys.modules, name, None)  # None: "not installed" unless a test injects one
    yield


# Commands whose `--device auto` is the GPU where there is one; run() gives them `--device cpu` unless the
# test names a device, so the expected bytes are the CPU interpreter's on every machine (the GPU's own
# expectations are tests/test_devices.py's, marked cuda).
DEVICE_COMMANDS = ("compare", "table", "parity")


def on_cpu(argv) -> list[str]:
    """The command line with `--device cpu` added where the command takes a device and argv names none."""
    argv = [str(a) for a in argv]
    if argv and argv[0] in DEVICE_COMMANDS and not any(a == "--device" or a.startswith("--device=") for a in argv):
        argv += ["--device", "cpu"]
    return argv


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """The command line, in-process: (exit code, stdout, stderr); on the CPU unless argv names a device."""
    from fp8check.cli import main

    code = main(on_cpu(argv))
    out, err = capsys.readouterr()
    return code, out, err


def aiter_shuffle(x):
    """aiter's shuffle_weight(x, layout=(16, 16)) on a 1-byte (or id) tensor [..., N, D], written from SPEC.md
    section 2: view as (-1, N/16, 16, D/32, 2, 16), permute (0, 1, 3, 4, 2, 5), make contiguous."""
    rows, cols = x.shape[-2], x.shape[-1]
    out = x.reshape(-1, rows // 16, 16, cols // 32, 2, 16).permute(0, 1, 3, 4, 2, 5).contiguous()
    return out.view(*x.shape)
