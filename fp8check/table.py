"""The seed's byte table: the buggy and the fixed Triton wrapper, each against the C++ path.

Rows are blocks; each column is one CompareResult against the same baseline run (the baseline is
written once and diffed twice). Sweeps are declared as data in a TOML file (configs/seed-table.toml).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from .compare import CompareResult, compare, run_side
from .diagnose import Diagnosis, diagnose
from .inputs import Inputs
from .writers.registry import Producer
from .spec import CacheSpec
from .errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


# Keys a [table] section may set, with the CLI option (dest name) each one stands for.
TABLE_KEYS = {
    "block": "block_size", "head_dim": "head_dim", "num_blocks": "num_blocks", "qbs": "quant_block_size",
    "fp8": "fp8", "scale_fmt": "scale_fmt", "layout": "layout", "seed": "seed", "slots": "slots",
    "device": "device", "baseline": "baseline", "buggy": "buggy", "fixed": "fixed",
}


def read_config(path: Path) -> dict:
    """The [table] section of a TOML file, as CLI option names -> values."""
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    section = data.get("table")
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: needs a [table] section")
    unknown = sorted(set(section) - set(TABLE_KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) in [table]: {', '.join(unknown)}; known: {', '.join(TABLE_KEYS)}")
    return {TABLE_KEYS[key]: value for key, value in section.items()}


@dataclass(frozen=True)
class SeedTable:
    buggy: CompareResult
    fixed: CompareResult
    buggy_causes: Diagnosis
    fixed_causes: Diagnosis

    @property
    def passed(self) -> bool:
        """The fix is proven: the fixed column is all zero and the buggy column differs."""
        return self.fixed.identical and not self.buggy.identical


def seed_table(
    spec: CacheSpec, *, baseline: Producer, buggy: Producer, fixed: Producer, inputs: Inputs, device: torch.device
) -> SeedTable:
    inputs = inputs.to(device)
    base = run_side(baseline, spec, inputs, device)
    columns = [compare(spec, baseline=base, candidate=c, inputs=inputs, device=device) for c in (buggy, fixed)]
    causes = [diagnose(spec, r.baseline.buffer, r.candidate.buffer, r.inputs, diff=r.diff) for r in columns]
    return SeedTable(buggy=columns[0], fixed=columns[1], buggy_causes=causes[0], fixed_causes=causes[1])
