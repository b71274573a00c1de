"""The layering of docs/ARCHITECTURE.md, checked on the source: no module imports a higher layer, and
the package has no import cycles."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "fp8check"

# Layer of each folder (or top-level module), bottom (0) to top; a module may import only its own
# layer or lower ones. Modules not listed are a failure: a new module must be placed in the picture.
LAYERS = {
    "_version": 0,
    "core": 1,  # facts, buffers, inputs, the diff, isolation, outcomes, errors
    "diagnose": 2, "triton_cpu": 2, "hip_cpu": 2,  # causes; the exact Triton interpreter; aiter's CPU build
    "cuda_src": 2,  # CUDA sources cut out and built with nvcc for the GPU present
    "code": 3,  # names, released packages, loading and binding other projects' code
    "producers": 4,  # writers and readers behind the registry
    "run": 5,  # options, requests and the use cases (compare, table, parity, record, doctor, gate)
    "report": 6, "api": 6,
    "testing": 7, "cli": 7,
    "pytest_plugin": 8,
    "__main__": 9, "__init__": 9,
}


def _modules() -> dict[str, Path]:
    return {".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts): p for p in PACKAGE.rglob("*.py")}


def _imports(name: str, path: Path) -> set[str]:
    """fp8check modules imported anywhere in the file (lazy imports inside functions included)."""
    package = name.split(".")[:-1] if not path.name == "__init__.py" else name.split(".")
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("fp8check"):
                found.add(target)
                found.update(f"{target}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("fp8check"))
    modules = _modules()
    return {t for t in found if t in modules and t != name}


def _top(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


@pytest.mark.parametrize("name", sorted(_modules()))
def test_module_imports_only_its_own_layer_or_lower(name):
    top = _top(name)
    assert top in LAYERS, f"{name}: place it in a layer (docs/ARCHITECTURE.md, LAYERS here)"
    higher = sorted(t for t in _imports(name, _modules()[name]) if LAYERS.get(_top(t), 99) > LAYERS[top])
    assert higher == [], f"{name} imports higher layers: {higher}"


def test_no_import_cycles():
    modules = _modules()
    graph = {name: _imports(name, path) for name, path in modules.items()}
    # package __init__ files are implied by their submodules' imports; cycles through them are not real
    graph = {n: {t for t in ts if not modules[t].name == "__init__.py"} for n, ts in graph.items()}
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(nxt):] + [nxt]))
            if nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


def test_shipped_text_names_only_documents_users_have():
    """Messages, notes and shipped configs point at docs/ files the repository has, never at a missing one."""
    import re

    root = PACKAGE.parent
    for path in [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.toml")]:
        text = path.read_text()
        assert "SPEC.md" not in text, path
        for name in re.findall(r"docs/([A-Za-z_]+\.md)", text):
            assert (root / "docs" / name).is_file(), f"{path} names docs/{name}"
