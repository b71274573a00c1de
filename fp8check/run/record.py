"""`fp8check record`: one writer's inputs and cache bytes saved as a golden file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..producers import golden
from .compare import run_side
from ..core.device import versions
from ..core.errors import GoldenError
from ..core.spec import CacheSpec


@dataclass(frozen=True)
class Recorded:
    producer: str
    spec: CacheSpec
    source: str
    path: Path
    kind = "record"
    passed = True

    def verdict_line(self) -> str:
        return f"recorded {self.producer} ({self.spec.summary()}, {self.source}) to {self.path}"

    def top_cause(self) -> None:
        return None

    def detail(self) -> str:
        return ""

    def to_json(self) -> dict:
        # the spec as an object, as compare and table give it
        return {"producer": self.producer, "spec": self.spec.to_dict(), "inputs": self.source, "path": str(self.path)}

    def run_json(self) -> dict:
        return {}

    def views(self) -> tuple:
        return ()


def record(prepared, out_path: Path, *, key: bytes | None) -> Recorded:
    """Run the producer on the prepared inputs; refuse one that modified its inputs; write the golden file."""
    spec, data, device = prepared.spec, prepared.inputs, prepared.device
    side = run_side(prepared.sides["producer"], spec, data, device)
    if side.buffer.modified_inputs:
        raise GoldenError(f"producer {side.name!r} modified its {' and '.join(side.buffer.modified_inputs)}"
                          " in place; not recorded")
    golden.write(out_path, spec=spec, producer=side.name, emulated=side.emulated, inputs=data,
                 buffer=side.buffer, versions=versions(), key=key, provenance=side.provenance)
    return Recorded(side.name, spec, data.source, out_path)
