"""The cache folder (disk_cache.py) and what lives in it: large generated K (input_cache.py) and compiled
Triton's per-process key (triton_memo.py). A cached value must equal a fresh computation, byte for byte,
and anything wrong with an entry (corrupt, truncated, stale, unwritable folder) must fall back to it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import torch

from fp8check import disk_cache, input_cache, inputs, triton_memo
from fp8check.inputs import Distribution, SlotPattern
from fp8check.spec import CacheSpec, FP8Format
from conftest import run

ROOT = Path(__file__).resolve().parents[1]
SPEC = CacheSpec(num_blocks=8, block_size=16, head_dim=64, quant_block_size=32)
CACHED = [d for d in Distribution if d is not Distribution.HASHED]


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv(disk_cache.ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(input_cache, "MIN_ELEMENTS", 0)
    return tmp_path / "cache"


@pytest.fixture
def draws(monkeypatch):
    """How many times K was drawn from the generator (not read back)."""
    calls, depth = [], []
    original = inputs.make_k

    def counted(*args, **kwargs):
        if not depth:  # `mixed` draws its rows through make_k again
            calls.append(args[2])
        depth.append(1)
        try:
            return original(*args, **kwargs)
        finally:
            depth.pop()

    monkeypatch.setattr(inputs, "make_k", counted)
    return calls


def fresh(spec=SPEC, **kwargs):
    """The same inputs drawn with every cache off: the independent computation."""
    old = os.environ.get(disk_cache.ENV)
    os.environ[disk_cache.ENV] = ""
    try:
        return inputs.generate(spec, **kwargs)
    finally:
        os.environ[disk_cache.ENV] = old if old is not None else ""


def same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.equal(a.view(torch.int16), b.view(torch.int16))


@pytest.mark.parametrize("distribution", CACHED, ids=lambda d: d.value)
@pytest.mark.parametrize("slots", [SlotPattern.SEQUENTIAL, SlotPattern.PADDED], ids=lambda s: s.value)
def test_read_back_k_is_the_drawn_k_byte_for_byte(folder, draws, distribution, slots):
    kwargs = dict(seed=7, slots=slots, distribution=distribution, inf_nan=True)
    expected = fresh(**kwargs)
    first = inputs.generate(SPEC, **kwargs)
    assert len(draws) == 2 and len(list((folder / "inputs").iterdir())) == 1  # drawn (fresh, then miss)
    second = inputs.generate(SPEC, **kwargs)
    assert len(draws) == 2  # read back, not drawn
    for got in (first, second):
        assert same_bytes(got.k, expected.k)
        assert torch.equal(got.slot_mapping, expected.slot_mapping) and got.source == expected.source


@pytest.mark.parametrize("change", [
    {"seed": 8}, {"distribution": Distribution.UNIFORM}, {"slots": SlotPattern.SHUFFLED}, {"inf_nan": True},
    {"spec": SPEC.replace(head_dim=32, quant_block_size=32)}, {"spec": SPEC.replace(num_blocks=9)},
    {"spec": SPEC.replace(block_size=32, num_blocks=4)}, {"spec": SPEC.replace(fp8=FP8Format.E4M3FNUZ)},
    {"spec": SPEC.replace(quant_block_size=64)},
], ids=lambda c: next(iter(c)) + "=" + str(next(iter(c.values()))))
def test_every_field_the_bytes_depend_on_is_in_the_key(folder, draws, change):
    base = dict(seed=7, slots=SlotPattern.SEQUENTIAL, distribution=Distribution.SPECIALS, inf_nan=False)
    inputs.generate(SPEC, **base)
    spec = change.pop("spec", SPEC)
    got = inputs.generate(spec, **{**base, **change})
    assert len(draws) == 2  # a different key: drawn, not read back
    assert same_bytes(got.k, fresh(spec, **{**base, **change}).k)


def test_writing_into_read_back_k_never_reaches_the_cache(folder, draws):
    """The read maps the entry: a run that writes into K (a hostile writer on the CPU) changes neither
    the entry nor the next read (safetensors maps privately, copy on write)."""
    kwargs = dict(seed=5, distribution=Distribution.NORMAL)
    expected = fresh(**kwargs).k
    inputs.generate(SPEC, **kwargs)
    got = inputs.generate(SPEC, **kwargs)
    assert len(draws) == 2  # drawn by fresh() and at the miss; this one was read back
    got.k.view(torch.int16).fill_(0x7f80)
    again = inputs.generate(SPEC, **kwargs)
    assert len(draws) == 2 and same_bytes(again.k, expected) and not same_bytes(got.k, expected)


@pytest.fixture
def makers(monkeypatch):
    """The name of the thread each cached_k call ran in."""
    names, original = [], input_cache.cached_k

    def spied(*args, **kwargs):
        names.append(threading.current_thread().name)
        return original(*args, **kwargs)

    monkeypatch.setattr(input_cache, "cached_k", spied)
    return names


def test_k_drawn_or_read_back_in_a_thread_is_the_same_k(folder, draws, makers):
    """start_generate (fp8check compare reads a large K while it imports and resolves its writers): a miss
    draws K and a hit reads it back in a thread of its own, with the bytes of a fresh draw."""
    kwargs = dict(seed=3, slots=SlotPattern.PADDED, distribution=Distribution.MIXED, inf_nan=True)
    expected = fresh(**kwargs)
    for drawn in (2, 2):  # fresh() and the miss drew K; the hit reads it back
        pending = inputs.start_generate(SPEC, **kwargs)
        assert torch.equal(pending.slots(), expected.slot_mapping)  # ready before K
        got = pending.result()
        assert len(draws) == drawn and makers[-1] == "fp8check-read-k"
        assert same_bytes(got.k, expected.k) and got.source == expected.source
        assert torch.equal(got.slot_mapping, expected.slot_mapping)


def test_small_k_is_made_without_a_thread(tmp_path, monkeypatch, makers):
    monkeypatch.setenv(disk_cache.ENV, str(tmp_path))
    got = inputs.start_generate(SPEC, seed=3).result()  # below MIN_ELEMENTS
    assert makers == ["MainThread"] and same_bytes(got.k, fresh(seed=3).k)


@pytest.mark.parametrize("error", [MemoryError("no room for K"), KeyboardInterrupt()], ids=["MemoryError",
                                                                                           "KeyboardInterrupt"])
def test_what_the_thread_raised_is_raised_by_result(folder, monkeypatch, error):
    monkeypatch.setenv(disk_cache.ENV, "")  # no cache: K is drawn in the thread

    def broken(*args, **kwargs):
        raise error

    monkeypatch.setattr(inputs, "make_k", broken)
    pending = inputs.start_generate(SPEC, seed=1)
    with pytest.raises(type(error)) as raised:
        pending.result()
    assert raised.value is error


def test_compare_with_k_in_a_thread_reports_what_it_reports_without(capsys, tmp_path, monkeypatch, makers):
    """The command line end to end: the same JSON (but its timings) for K made in the main thread (the
    default 3 blocks are below MIN_ELEMENTS) and for K drawn, then read back, in a thread; and a writer
    that cannot be resolved while the thread runs is still one line and exit 2."""
    monkeypatch.setenv(disk_cache.ENV, str(tmp_path / "cache"))
    argv = ["compare", "--baseline", "reference", "--candidate", "triton", "--inputs", "outliers", "--slots",
            "shuffled"]

    def payload(name):
        code, _, _ = run(capsys, *argv, "--json", str(tmp_path / name))
        assert code == 0
        got = json.loads((tmp_path / name).read_text())
        del got["run"]
        return got

    expected = payload("main.json")
    assert makers == ["MainThread"]
    monkeypatch.setattr(input_cache, "MIN_ELEMENTS", 0)
    assert payload("miss.json") == expected and payload("hit.json") == expected
    assert makers[1:] == ["fp8check-read-k"] * 2
    code, out, err = run(capsys, "compare", "--candidate", "no-such-writer")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "no-such-writer" in err
    assert makers[-1] == "fp8check-read-k"


def test_an_edited_generator_is_a_different_key(folder, monkeypatch):
    spec_fields = {"distribution": "normal", "seed": 0, "slots": "sequential", "inf_nan": False}
    before = input_cache.key(SPEC, spec_fields)
    monkeypatch.setattr(input_cache, "generator_sources", lambda: "edited")
    assert input_cache.key(SPEC, spec_fields) != before


def _entry(folder: Path) -> Path:
    (entry,) = (folder / "inputs").iterdir()
    return entry


@pytest.mark.parametrize("damage", ["flip a byte", "truncate", "garbage", "empty"])
def test_a_damaged_entry_is_drawn_again_and_rewritten(folder, draws, damage):
    kwargs = dict(seed=3, distribution=Distribution.NORMAL)
    expected = fresh(**kwargs).k
    inputs.generate(SPEC, **kwargs)
    entry = _entry(folder)
    data = bytearray(entry.read_bytes())
    if damage == "flip a byte":
        data[-5] ^= 0x40  # inside K's bytes (the file ends with them)
    elif damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "garbage":
        data = bytearray(b"\x07" * len(data))
    else:
        data = bytearray()
    entry.write_bytes(bytes(data))
    got = inputs.generate(SPEC, **kwargs).k
    assert same_bytes(got, expected) and len(draws) == 3
    assert same_bytes(inputs.generate(SPEC, **kwargs).k, expected) and len(draws) == 3  # rewritten whole


def test_small_k_and_a_switched_off_cache_write_nothing(tmp_path, monkeypatch, draws):
    monkeypatch.setenv(disk_cache.ENV, str(tmp_path / "cache"))
    inputs.generate(SPEC, seed=1)  # below MIN_ELEMENTS
    assert not (tmp_path / "cache").exists()
    monkeypatch.setattr(input_cache, "MIN_ELEMENTS", 0)
    monkeypatch.setenv(disk_cache.ENV, "")
    inputs.generate(SPEC, seed=1)
    inputs.generate(SPEC, seed=1)
    assert not (tmp_path / "cache").exists() and len(draws) == 3


def test_an_unwritable_folder_is_no_cache(tmp_path, monkeypatch, draws):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(disk_cache.ENV, str(blocker / "cache"))
    monkeypatch.setattr(input_cache, "MIN_ELEMENTS", 0)
    got = inputs.generate(SPEC, seed=2)
    assert len(draws) == 1 and same_bytes(got.k, fresh(seed=2).k)


def test_eviction_keeps_the_newest_within_the_budget(folder, monkeypatch):
    one = SPEC.num_slots * SPEC.head_dim * 2
    monkeypatch.setattr(input_cache, "MAX_BYTES", 2 * one + 1000)  # two entries and their headers
    for seed in range(4):
        inputs.generate(SPEC, seed=seed)
        os.utime(_newest(folder), ns=(seed * 10**9, seed * 10**9))  # a distinct, ordered last use
    left = sorted((folder / "inputs").iterdir(), key=lambda p: p.stat().st_mtime_ns)
    assert len(left) == 2
    keys = [input_cache.key(SPEC, {"distribution": "normal", "seed": s, "slots": "sequential", "inf_nan": False})
            for s in (2, 3)]
    assert [p.stem for p in left] == keys


def _newest(folder: Path) -> Path:
    return max((folder / "inputs").iterdir(), key=lambda p: p.stat().st_mtime_ns)


# ---- Triton's key ----------------------------------------------------------------------------------


@pytest.fixture
def fake_triton(tmp_path, monkeypatch):
    monkeypatch.setenv(disk_cache.ENV, str(tmp_path / "cache"))
    package = tmp_path / "triton"
    for name in ("compiler/a.py", "backends/nvidia/b.py", "language/c.py", "_C/libtriton.so", "runtime/cache.py"):
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(name)
    computed = []

    def compute():
        computed.append(1)
        return f"9.9.9-key{len(computed)}"

    return package, computed, compute


def test_triton_key_is_computed_once_per_installation(fake_triton):
    package, computed, compute = fake_triton
    assert triton_memo.memoized(str(package), "9.9.9", compute) == "9.9.9-key1"
    assert triton_memo.memoized(str(package), "9.9.9", compute) == "9.9.9-key1"
    assert computed == [1]


@pytest.mark.parametrize("change", ["edit a source", "rebuild libtriton", "add a backend file", "new version"])
def test_any_change_to_the_installation_computes_it_again(fake_triton, change):
    package, computed, compute = fake_triton
    triton_memo.memoized(str(package), "9.9.9", compute)
    version = "9.9.9"
    if change == "edit a source":
        (package / "language/c.py").write_text("language/c.py, edited")
    elif change == "rebuild libtriton":
        (package / "_C/libtriton.so").write_text("_C/libtriton.sx")  # same size: mtime / ctime / inode differ
        os.utime(package / "_C/libtriton.so", ns=(1, 1))
    elif change == "add a backend file":
        (package / "backends/amd.py").write_text("x")
    else:
        version = "9.9.10"
    assert triton_memo.memoized(str(package), version, compute) == "9.9.9-key2"
    assert computed == [1, 1]


def test_a_foreign_or_unreadable_entry_is_computed_again(fake_triton):
    package, computed, compute = fake_triton
    triton_memo.memoized(str(package), "9.9.9", compute)
    (entry,) = (Path(os.environ[disk_cache.ENV]) / triton_memo.KIND).iterdir()
    entry.write_text("not a key of this version")
    assert triton_memo.memoized(str(package), "9.9.9", compute) == "9.9.9-key2"


def test_the_real_triton_key_read_back_equals_the_computed_one(tmp_path):
    """Two fresh processes: the first computes Triton's key with Triton's own function and stores it,
    the second reads it back without calling that function."""
    script = textwrap.dedent("""
        import fp8check.triton_memo as memo
        from triton.runtime import cache
        original = cache.triton_key
        assert memo.install()
        print(cache.triton_key())
        print(original.cache_info().currsize)
    """)
    env = dict(os.environ, FP8CHECK_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    first, second = (subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                    check=True).stdout.split() for _ in range(2))
    assert first[1] == "1" and second[1] == "0"  # computed by Triton, then only read
    assert first[0] == second[0] and first[0].startswith(__import__("triton").__version__)


# ---- remembered successes (the reference kernel's start-up proof) ---------------------------------


def test_only_a_success_is_remembered(tmp_path, monkeypatch):
    monkeypatch.setenv(disk_cache.ENV, str(tmp_path))
    runs = []

    def check(result):
        def run():
            runs.append(result)
            return result
        return run

    fields = {"proof": "x", "spec": "64x128"}
    assert disk_cache.remembered("proofs", fields, check(False)) is False
    assert disk_cache.remembered("proofs", fields, check(False)) is False  # a failure runs again
    assert disk_cache.remembered("proofs", fields, check(True)) is True
    assert disk_cache.remembered("proofs", fields, check(False)) is True  # kept
    assert disk_cache.remembered("proofs", {**fields, "spec": "16x128"}, check(False)) is False
    assert runs == [False, False, True, False]


@pytest.mark.parametrize("content", ["", "{}", "garbage", '{"proof": "x", "spec": "other"}'])
def test_a_remembered_entry_must_hold_exactly_its_fields(tmp_path, monkeypatch, content):
    monkeypatch.setenv(disk_cache.ENV, str(tmp_path))
    fields = {"proof": "x", "spec": "64x128"}
    disk_cache.remembered("proofs", fields, lambda: True)
    (entry,) = (tmp_path / "proofs").iterdir()
    entry.write_text(content)
    assert disk_cache.remembered("proofs", fields, lambda: False) is False


def test_the_reference_proof_key_names_every_file_it_depends_on():
    from fp8check.writers import reference_device

    here = Path(reference_device.__file__).parent
    assert all((here / name).is_file() for name in reference_device.PROOF_SOURCES)
