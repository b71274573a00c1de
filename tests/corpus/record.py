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
    options = parser.parse_args()

    import torch
    import triton

    import nan_probe
    from fp8check.cli import main as fp8check

    options.out.mkdir(parents=True, exist_ok=True)
    recorded_on = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__}
    (options.out / "nan-probe-nvidia.json").write_text(json.dumps({**recorded_on, "results": nan_probe.run("cuda")},
                                                                   indent=1) + "\n")
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        names = []
        for case in cases():
            path = Path(tmp) / name_of(*case)
            code = fp8check(record_args(*case, path, device="cuda", vllm_file=options.vllm_file,
                                        flaggems=options.flaggems_checkout))
            if code == 0:
                names.append(path.name)
            else:
                failed.append(f"{path.name}: exit {code}")
        with tarfile.open(options.out / "compiled-nvidia.tar.xz", "w:xz", preset=9) as archive:
            for name in names:
                archive.add(Path(tmp) / name, arcname=name)
    print(f"recorded {len(names)} cases on {recorded_on}; failed: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
