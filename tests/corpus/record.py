"""Record the compiled-truth corpus on an NVIDIA GPU: `make corpus-gpu` (docs/NUMERICS.md, "The corpus").

Each case is `fp8check record --device cuda` of one released writer on 256 tokens (4 blocks of 64); the
goldens go into one xz-compressed tar (inputs shared between writers compress to one copy), beside the
compiled results of nan_probe.py. The released sources come from fp8check's cache folder (the wheels
the project tables pin) and `--flaggems-checkout` (a clone of FlagGems at or after ed2508bc).
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# writer key -> (producer, layouts it writes: the first is its own)
WRITERS = {
    "fp8check": ("triton", ("shuffle", "linear")),
    "vllm": ("preset:vllm/triton", ("shuffle",)),
    "sglang": ("preset:sglang/triton", ("shuffle", "linear")),
    "lmdeploy": ("preset:lmdeploy/triton", ("linear",)),
    "flaggems": ("preset:flaggems/triton", ("linear",)),
}
KINDS = ("normal", "uniform", "outliers", "ue8m0-boundary", "ties", "tiny", "specials", "specials+inf-nan",
         "mixed+inf-nan", "hashed")
EXTRA_KINDS = ("normal", "specials+inf-nan")  # every other layout, and fp32 scales
# fp32 scales only where the writer multiplies by a reciprocal: a writer that divides meets NVIDIA's
# approximate fp32 division, which no CPU run reproduces (docs/NUMERICS.md, cause `scale-ulp`).
RECIPROCAL_WRITERS = ("sglang", "lmdeploy")


def cases():
    """(writer key, kind, layout, scale format) of every recording."""
    for key, (_, layouts) in WRITERS.items():
        for kind in KINDS:
            yield key, kind, layouts[0], "ue8m0"
        for layout in layouts[1:]:
            for kind in EXTRA_KINDS:
                yield key, kind, layout, "ue8m0"
        if key in RECIPROCAL_WRITERS:
            for kind in EXTRA_KINDS:
                yield key, kind, layouts[0], "fp32"


def name_of(key: str, kind: str, layout: str, scale: str) -> str:
    return f"{key}-{kind}-{layout}-{scale}.safetensors"


# Readers: their logits on the reference writer's bytes (linear layout, block 64, ue8m0) of parity's seeded
# inputs, two sequences (ctx 300 and 1100), 64 heads, with and without MTP (next_n 2).
READERS = {"vllm": "preset:vllm/triton"}
READER_NEXT_N = (1, 2)
READER_CTX = (300, 1100)


def reader_cases():
    """(reader key, next_n) of every reader recording."""
    for key in READERS:
        for next_n in READER_NEXT_N:
            yield key, next_n


def reader_name_of(key: str, next_n: int) -> str:
    return f"reader-{key}-next{next_n}.safetensors"


def reader_inputs(next_n: int, device: str):
    """(spec, the batch parity hands a reader, the reference writer's cache) of a reader case."""
    import torch

    from fp8check.core.spec import CacheSpec, Layout, ScaleFormat
    from fp8check.core.inputs import Inputs
    from fp8check.producers import registry
    from fp8check.run import parity, parity_inputs

    config = parity_inputs.ParityConfig(ctx=READER_CTX, topk=256, next_n=next_n)
    spec = parity_inputs.cache_spec(config, CacheSpec(num_blocks=1, block_size=64, head_dim=128, quant_block_size=128,
                                                      layout=Layout.LINEAR, scale_fmt=ScaleFormat.UE8M0))
    data = parity_inputs.generate(spec, config, heads=parity_inputs.DEFAULT_HEADS, seed=0, shuffled=True)
    written = Inputs(data.k[: config.max_ctx], data.slot_mapping(config.max_ctx, spec.block_size), data.source)
    cache = registry.run(registry.resolve("reference"), spec, written.to(device), torch.device(device))
    return spec, parity.make_batch(spec, config, data, torch.device(device)), cache


def reader_logits(key: str, spec, batch, cache, checkout: str | None):
    """The reader's logits on `cache`, run as `fp8check parity` runs it (on the device of the cache)."""
    from fp8check.producers.readers import run_reader
    from fp8check.producers.registry import resolve_reader

    reader = resolve_reader(READERS[key], spec=spec, repo=checkout)
    kv = cache.cache.view(spec.num_blocks, spec.block_size, 1, spec.row_bytes)
    return run_reader(reader, batch.q_fp8, kv, *batch.args)


def record_reader(key: str, next_n: int, path: Path, *, device: str, checkout: str | None, recorded_on: dict) -> None:
    """One reader recording: every tensor the reader was given, as bytes, and the logits it returned."""
    from safetensors.torch import save_file

    spec, batch, cache = reader_inputs(next_n, device)
    logits = reader_logits(key, spec, batch, cache, checkout)
    tensors = {"q_codes": batch.q_codes, "kv_cache": cache.flat, "weights": batch.weights,
               "context_lens": batch.context_lens, "block_tables": batch.block_tables, "logits": logits}
    save_file({name: t.detach().cpu().contiguous() for name, t in tensors.items()}, str(path),
              metadata={**recorded_on, "reader": READERS[key], "spec": spec.to_json(),
                        "max_model_len": str(batch.max_model_len)})


def record_args(key: str, kind: str, layout: str, scale: str, out: Path, *, device: str, vllm_file: str | None,
                flaggems: str | None) -> list[str]:
    producer = WRITERS[key][0]
    if key == "vllm" and vllm_file is not None:
        producer = f"vllm-file:{vllm_file}"
    base, _, extra = kind.partition("+")
    args = ["record", "--producer", producer, "--device", device, "--in-process", "--block", "64",
            "--num-blocks", "4", "--inputs", base, "--layout", layout, "--scale-fmt", scale, "--seed", "0",
            "--out", str(out), "--quiet"]
    if extra == "inf-nan":
        args.append("--specials-inf-nan")
    if key == "flaggems" and flaggems is not None:
        args += ["--repo", flaggems]
    return args


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for compiled-nvidia.tar.xz and the probe")
    parser.add_argument("--vllm-file", help="rocm_aiter_mla_sparse.py of vLLM 0.33.0 (else preset:vllm/triton)")
    parser.add_argument("--flaggems-checkout", help="a clone of FlagGems (its writer is in no release)")
    parser.add_argument("--vllm-checkout", help="a folder holding vLLM 0.33.0's Python files (else its wheel)")
    parser.add_argument("--readers-only", action="store_true",
                        help="record the readers' cases again, keeping the writers' recordings in the archive")
    options = parser.parse_args()

    import torch
    import triton

    import nan_probe
    from fp8check.cli import main as fp8check

    options.out.mkdir(parents=True, exist_ok=True)
    recorded_on = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__}
    archive_path = options.out / "compiled-nvidia.tar.xz"
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        names = []
        if options.readers_only:  # the writers' recordings as they are
            with tarfile.open(archive_path) as archive:
                kept = [m for m in archive.getnames() if not m.startswith("reader-")]
                archive.extractall(tmp, members=[archive.getmember(m) for m in kept], filter="data")
            names += kept
        else:
            (options.out / "nan-probe-nvidia.json").write_text(
                json.dumps({**recorded_on, "results": nan_probe.run("cuda")}, indent=1) + "\n")
            for case in cases():
                path = Path(tmp) / name_of(*case)
                code = fp8check(record_args(*case, path, device="cuda", vllm_file=options.vllm_file,
                                            flaggems=options.flaggems_checkout))
                if code == 0:
                    names.append(path.name)
                else:
                    failed.append(f"{path.name}: exit {code}")
        for key, next_n in reader_cases():
            path = Path(tmp) / reader_name_of(key, next_n)
            try:
                record_reader(key, next_n, path, device="cuda", checkout=options.vllm_checkout,
                              recorded_on=recorded_on)
                names.append(path.name)
            except Exception as exc:  # noqa: BLE001 - reported with the others, the rest still recorded
                failed.append(f"{path.name}: {type(exc).__name__}: {exc}")
        with tarfile.open(archive_path, "w:xz", preset=9) as archive:
            for name in names:
                archive.add(Path(tmp) / name, arcname=name)
    print(f"recorded {len(names)} cases on {recorded_on}; failed: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
