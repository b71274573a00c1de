"""`pkg:NAME==VERSION:PATH[:FUNC]`: a released wheel fetched by pip without dependencies into the cache
folder, its hash checked, one file read out of it. The network is not reachable from the tests: pip
downloads a wheel built here from a local folder (`--no-index --find-links`)."""

from __future__ import annotations

import hashlib
import zipfile

import pytest

from fp8check.core.errors import ProducerError
from fp8check.code.names import parse
from fp8check.code.released import Package, read_file

OPS = "def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):\n    return None\n"


def build_wheel(folder, name="demo_kernels", version="1.0", ops=OPS, tag="py3-none-any", requires_python=None):
    """A minimal valid wheel holding NAME/ops.py: pure Python by default, or binary for another `tag`."""
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name}-{version}-{tag}.whl"
    info = f"{name}-{version}.dist-info"
    requires = f"Requires-Python: {requires_python}\n" if requires_python else ""
    purelib = str(tag.endswith("-none-any")).lower()
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(f"{name}/__init__.py", "")
        archive.writestr(f"{name}/ops.py", ops)
        archive.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{requires}")
        archive.writestr(f"{info}/WHEEL",
                         f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: {purelib}\nTag: {tag}\n")
        archive.writestr(f"{info}/RECORD", "")
    return wheel


def test_a_file_of_a_released_wheel_is_fetched_hashed_and_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("FP8CHECK_CACHE_DIR", str(tmp_path / "cache"))
    wheel = build_wheel(tmp_path / "index")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    source = read_file(Package("demo-kernels", "1.0", digest, find_links=str(tmp_path / "index")), "demo_kernels/ops.py")
    assert source.data == OPS.encode()
    assert source.provenance == {"file": "demo_kernels/ops.py", "package": "demo-kernels==1.0",
                                 "wheel": wheel.name, "wheel_sha256": digest, "wheel_pinned": "yes",
                                 "sha256": hashlib.sha256(OPS.encode()).hexdigest()}
    assert (tmp_path / "cache" / "wheels" / "demo_kernels-1.0" / wheel.name).read_bytes() == wheel.read_bytes()
    wheel.unlink()  # the second read needs no index: the cache folder holds the wheel
    assert read_file(Package("demo-kernels", "1.0", digest), "demo_kernels/ops.py").data == OPS.encode()


def test_a_wheel_whose_hash_is_not_the_pinned_one_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("FP8CHECK_CACHE_DIR", str(tmp_path / "cache"))
    wheel = build_wheel(tmp_path / "index")
    actual = hashlib.sha256(wheel.read_bytes()).hexdigest()
    with pytest.raises(ProducerError) as error:
        read_file(Package("demo-kernels", "1.0", "0" * 64, find_links=str(tmp_path / "index")), "demo_kernels/ops.py")
    assert str(error.value) == (f"pkg:demo-kernels==1.0: {wheel.name} has sha256 {actual}, the pinned hash is"
                                f" {'0' * 64}: refused")


def test_an_unpinned_wheel_records_its_hash_and_a_missing_file_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("FP8CHECK_CACHE_DIR", str(tmp_path / "cache"))
    wheel = build_wheel(tmp_path / "index")
    package = Package("demo-kernels", "1.0", find_links=str(tmp_path / "index"))
    source = read_file(package, "demo_kernels/ops.py")
    assert source.provenance["wheel_sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert source.provenance["wheel_pinned"] == "no"
    with pytest.raises(ProducerError, match=r"^pkg:demo-kernels==1.0: demo_kernels-1.0-py3-none-any.whl holds no"
                                            r" file demo_kernels/missing.py$"):
        read_file(package, "demo_kernels/missing.py")


def test_a_version_no_index_holds_is_pips_own_error(tmp_path, monkeypatch):
    monkeypatch.setenv("FP8CHECK_CACHE_DIR", str(tmp_path / "cache"))
    build_wheel(tmp_path / "index")
    with pytest.raises(ProducerError, match=r"^pkg:demo-kernels==2.0: pip download failed: ERROR: .*demo-kernels==2.0"):
        read_file(Package("demo-kernels", "2.0", find_links=str(tmp_path / "index")), "demo_kernels/ops.py")


def test_a_pkg_writer_runs_from_the_wheel_bound_by_its_project_table(tmp_path, monkeypatch):
    """A wheel named vllm holding the vLLM-shaped test kernel (tests/kernels, a stand-in): `pkg:` binds it
    with vLLM's table, exactly as `vllm-file:` does, and the bytes are the reference's."""
    from pathlib import Path

    from fp8check.api import compare_writers

    monkeypatch.setenv("FP8CHECK_CACHE_DIR", str(tmp_path / "cache"))
    ops = (Path(__file__).parent / "kernels" / "rocm_indexer_ops.py").read_text()
    build_wheel(tmp_path / "index", name="vllm", version="1.0", ops=ops)
    read_file(Package("vllm", "1.0", find_links=str(tmp_path / "index")), "vllm/ops.py")  # fetched once, kept
    result = compare_writers("pkg:vllm==1.0:vllm/ops.py:indexer_k_quant_and_cache_triton", "reference", block=16,
                             num_blocks=2, head_dim=128, fp8="e4m3fn", scale_fmt="ue8m0", layout="shuffle",
                             allow_unpinned=True)  # vllm 1.0 is no version vLLM's table pins
    assert result.identical
    provenance = result.check.result.candidate.provenance
    assert (provenance["loader"], provenance["package"], provenance["function"], provenance["wheel_pinned"]) == (
        "pkg", "vllm==1.0", "indexer_k_quant_and_cache_triton", "no")


def build_abi3_wheel(folder):
    """A binary wheel for CPython >= 3.8's stable ABI whose metadata requires Python >= 3.10, as vLLM 0.33.0's."""
    return build_wheel(folder, name="demo_ext", tag="cp38-abi3-manylinux_2_31_x86_64", requires_python=">=3.10")


def test_a_pinned_abi3_wheel_that_requires_python_3_10_is_fetched(tmp_path, monkeypatch):
    # its tag says cp38; asking pip for Python 3.8 finds no distribution (Requires-Python >= 3.10)
    monkeypatch.setenv("FP8CHECK_CACHE_DIR", str(tmp_path / "cache"))
    wheel = build_abi3_wheel(tmp_path / "index")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    package = Package("demo-ext", "1.0", digest, wheel.name, find_links=str(tmp_path / "index"))
    source = read_file(package, "demo_ext/ops.py")
    assert (source.data, source.provenance["wheel"], source.provenance["wheel_sha256"]) == (OPS.encode(), wheel.name,
                                                                                          digest)


@pytest.mark.parametrize("text", ["pkg:-rFILE==1:x.py:f", "pkg:--no-deps==1:x.py:f",
                                  "pkg:demo==>1:x.py:f", "pkg:demo[extra]==1:x.py:f", "pkg:demo==1 ; os_name=='nt':x.py:f",
                                  "pkg:demo==1.0-rFILE:x.py:f", "pkg:./demo==1:x.py:f", "pkg:demo== 1:x.py:f"])
def test_a_name_or_version_outside_the_standard_grammar_never_reaches_pip(tmp_path, monkeypatch, text):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "FILE").write_text("demo==1\n")  # what `pip download -rFILE` would read
    name_version = text[len("pkg:"):].partition(":")[0]
    with pytest.raises(ProducerError) as error:
        parse(text, error=ProducerError)
    assert str(error.value) == (f"{text!r}: {name_version} is not a released package's name and exact version (PEP 508"
                                " name, PEP 440 version)")
