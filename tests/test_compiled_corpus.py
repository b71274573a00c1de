"""The CPU interpreter writes the compiled GPU's bytes: goldens recorded with `fp8check record --device cuda`
on an H200 (tests/corpus/, `make corpus-gpu`) replayed on the CPU with 0 differing bytes, and the compiled
results of the NaN/inf probe kernel reproduced operation by operation (docs/NUMERICS.md)."""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path

import pytest

from fp8check.core import disk_cache
from fp8check.cli import main
from fp8check.code.projects.table import project

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
sys.path.insert(0, str(CORPUS))

import nan_probe  # noqa: E402
import record  # noqa: E402

pytestmark = pytest.mark.interpreter

RECORDED = json.loads((CORPUS / "nan-probe-nvidia.json").read_text())
# Where a compiled result is not a rule of the operation (docs/NUMERICS.md): argmax/argmin over NaN follow
# the reduction tree of the kernel's layout; an out-of-range int8/uint8 value widened again is LLVM poison
# (the GPU keeps the 16-bit value), so only what a store writes, its low 8 bits, is compared.
LAYOUT_DEPENDENT = {"argmax_rows_y", "argmin_rows_y"}
STORED_LOW_BYTE = {"to_int8", "to_uint8"}


def test_the_probe_names_every_operation_it_stores():
    assert list(RECORDED["results"]) == list(nan_probe.OPERATIONS)


@pytest.fixture(scope="module")
def interpreted_probe():
    from fp8check.triton_cpu.interpreter import cpu_kernels

    with cpu_kernels():
        return nan_probe.run("cpu")


@pytest.mark.parametrize("operation", [op for op in nan_probe.OPERATIONS if op not in LAYOUT_DEPENDENT])
def test_nan_inf_and_out_of_range_values_give_the_compiled_bits(interpreted_probe, operation):
    compiled, interpreted = RECORDED["results"][operation], interpreted_probe[operation]
    if operation in STORED_LOW_BYTE:
        compiled, interpreted = [v & 0xFF for v in compiled], [v & 0xFF for v in interpreted]
    assert [hex(v) for v in interpreted] == [hex(v) for v in compiled]


def _cases():
    with tarfile.open(CORPUS / "compiled-nvidia.tar.xz") as archive:
        return sorted(archive.getnames())


def test_the_corpus_holds_every_case_record_py_declares():
    assert _cases() == sorted([*(record.name_of(*case) for case in record.cases()),
                               *(record.reader_name_of(*case) for case in record.reader_cases())])


def _sources_missing(key: str, request) -> str | None:
    """Why a released writer's files are not here (a replay never downloads), or None. The pinned wheel is
    taken from --wheels into this session's cache folder, where fp8check checks its sha256."""
    if key == "fp8check":
        return None
    table = project(key)
    given = request.config.getoption("--wheels")
    if not given or not (Path(given) / table.wheel).is_file():
        return f"{table.wheel} is not in --wheels DIR (`make corpus-sources` fetches it)"
    if key == "flaggems" and not request.config.getoption("--flaggems-checkout"):
        return "FlagGems' writer is in its repository only: give --flaggems-checkout PATH"
    folder = disk_cache.root() / "wheels" / f"{table.package.lower().replace('-', '_')}-{table.version}"
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / table.wheel).exists():
        (folder / table.wheel).symlink_to((Path(given) / table.wheel).resolve())
    return None


def _recording(name: str, key: str, request, tmp_path: Path) -> Path:
    """The recording `name` extracted into tmp_path; a skip when the sources of project `key` are not given."""
    missing = _sources_missing(key, request)
    if missing:
        pytest.skip(missing)
    with tarfile.open(CORPUS / "compiled-nvidia.tar.xz") as archive:
        archive.extract(name, tmp_path, filter="data")
    return tmp_path / name


@pytest.mark.parametrize("name", [name for name in _cases() if not name.startswith("reader-")])
def test_a_cpu_replay_writes_the_bytes_the_gpu_wrote(name, tmp_path, request, capsys):
    key = name.split("-")[0]
    golden = _recording(name, key, request, tmp_path)
    args = ["compare", "--baseline", f"golden:{golden}", "--candidate", record.WRITERS[key][0],
            "--device", "cpu", "--quiet"]
    if key == "flaggems":
        args += ["--repo", request.config.getoption("--flaggems-checkout")]
    code = main(args)
    verdict = capsys.readouterr().out.strip().splitlines()[-1]
    assert (code, verdict) == (0, "IDENTICAL: 0 of 33792 bytes differ in 4 blocks")


@pytest.mark.parametrize("name", [record.reader_name_of(*case) for case in record.reader_cases()])
def test_a_cpu_replay_of_a_reader_ranks_the_tokens_the_gpu_ranked(name, tmp_path, request):
    """The reader's logits, interpreted on the CPU from the recorded bytes, against the compiled ones: its
    tl.dot sums in another order there, so values agree within parity's tolerance; the top-K is the same."""
    import torch
    from safetensors import safe_open

    from fp8check.core.metrics import DEFAULT_ATOL, DEFAULT_RTOL

    key = name.split("-")[1]
    with safe_open(_recording(name, key, request, tmp_path), "pt") as recording:
        meta, recorded = recording.metadata(), {k: recording.get_tensor(k) for k in recording.keys()}
    spec, batch, cache = record.reader_inputs(recorded["q_codes"].shape[1], "cpu")
    # the recorded inputs are the ones record.py makes here, the reference's bytes included
    assert spec.to_json() == meta["spec"] and str(batch.max_model_len) == meta["max_model_len"]
    for given, made in (("q_codes", batch.q_codes), ("kv_cache", cache.flat), ("weights", batch.weights),
                        ("context_lens", batch.context_lens), ("block_tables", batch.block_tables)):
        assert torch.equal(recorded[given], made), given
    cpu, gpu = record.reader_logits(key, spec, batch, cache, None).double(), recorded["logits"].double()
    # where a row may not look: the reader's -inf, or the NaN fill of the buffer it leaves unwritten
    for kind, where in (("-inf", lambda t: t == float("-inf")), ("NaN", torch.isnan), ("finite", torch.isfinite)):
        assert torch.equal(where(cpu), where(gpu)), kind
    seen = torch.isfinite(gpu)
    worst = float((cpu[seen] - gpu[seen]).abs().max())
    assert torch.allclose(cpu[seen], gpu[seen], rtol=DEFAULT_RTOL, atol=DEFAULT_ATOL), worst

    def ranked(logits):
        return torch.topk(logits.nan_to_num(nan=float("-inf")), 256, dim=1).indices.sort(dim=1).values

    assert torch.equal(ranked(cpu), ranked(gpu))
