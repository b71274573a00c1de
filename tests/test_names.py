"""One name grammar: every name a user can give (a registry name, file:, vllm-file:, pkg:, preset:, aiter-src:,
golden:) is parsed by fp8check.code.names alone, into one type the CLI, the gate, the API and both roles use."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from fp8check.code.names import Kind, parse
from fp8check.core.errors import ProducerError, UserError

PACKAGE = Path(__file__).resolve().parents[1] / "fp8check"


@pytest.mark.parametrize("text, kind, path, function, package, version, untrusted", [
    ("reference", Kind.BUILTIN, "", None, None, None, False),
    ("file:faults/x.py:writer", Kind.FILE, "faults/x.py", "writer", None, None, True),
    ("file:git:HEAD~1:faults/x.py:writer", Kind.FILE, "git:HEAD~1:faults/x.py", "writer", None, None, True),
    ("vllm-file:ops.py", Kind.VLLM_FILE, "ops.py", None, None, None, True),
    ("vllm-file:ops.py:reader_fn", Kind.VLLM_FILE, "ops.py", "reader_fn", None, None, True),
    ("vllm-file:git:v1:ops.py", Kind.VLLM_FILE, "git:v1:ops.py", None, None, None, True),
    ("pkg:sglang==0.5.23:sglang/kernels/ops/kvcache/dsa_index_k_cache.py:_set_k_and_s_triton", Kind.PKG,
     "sglang/kernels/ops/kvcache/dsa_index_k_cache.py", "_set_k_and_s_triton", "sglang", "0.5.23", True),
    ("pkg:vllm==0.33.0:vllm/v1/attention/ops/rocm_aiter_mla_sparse.py", Kind.PKG,
     "vllm/v1/attention/ops/rocm_aiter_mla_sparse.py", None, "vllm", "0.33.0", True),
    ("preset:vllm/triton", Kind.PRESET, "", None, None, None, True),
    ("aiter-src:pkg:amd-aiter==0.1.7.post2.dev18", Kind.AITER_SRC, "pkg:amd-aiter==0.1.7.post2.dev18", None,
     "amd-aiter", "0.1.7.post2.dev18", True),
    ("aiter-src:/src/aiter", Kind.AITER_SRC, "/src/aiter", None, None, None, True),
    ("vllm-src:.sources/vllm-0.33.0", Kind.VLLM_SRC, ".sources/vllm-0.33.0", None, None, None, True),
    ("deepgemm-src:/src/DeepGEMM", Kind.DEEPGEMM_SRC, "/src/DeepGEMM", None, None, None, True),
    ("golden:g.safetensors", Kind.GOLDEN, "g.safetensors", None, None, None, False),
])
def test_every_kind_of_name_parses_into_one_type(text, kind, path, function, package, version, untrusted):
    name = parse(text)
    assert (name.kind, name.path, name.function, name.package, name.version, name.untrusted) == (
        kind, path, function, package, version, untrusted)
    assert name.text == text and text == kind.value + name.body


@pytest.mark.parametrize("text", ["pkg:sglang:path.py", "pkg:sglang==0.5.23", "pkg:==1:x.py", "file:"])
def test_malformed_names_are_one_line_user_errors(text):
    with pytest.raises(ProducerError, match=r"^'.*': expected (pkg:NAME==VERSION:PATH\[:FUNC\]|file:PATH:FUNC)$"):
        parse(text, error=ProducerError)


def test_the_files_a_name_reads_are_local_files_only():
    assert parse("file:a/x.py:w").local_path == Path("a/x.py")
    assert parse("golden:g.safetensors").local_path == Path("g.safetensors")
    assert parse("file:git:HEAD:a/x.py:w").local_path is None  # read with git show, not from the disk
    assert parse("pkg:vllm==0.33.0:vllm/x.py").local_path is None
    assert parse("file:a/x.py:w").with_path("/cfg/a/x.py") == "file:/cfg/a/x.py:w"
    assert parse("vllm-file:a/x.py").with_path("/cfg/a/x.py") == "vllm-file:/cfg/a/x.py"


def _prefix_literals() -> set[str]:
    return {kind.value for kind in Kind if kind.value} | {"git:"}


def test_only_the_names_module_parses_prefixes():
    """No module but code/names.py tests a name for a prefix or slices one off: `startswith` of a prefix
    (a literal or a *_PREFIX constant) and `text[len(PREFIX):]` stand nowhere else."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.relative_to(PACKAGE).as_posix() == "code/names.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith":
                args = node.args[0].elts if node.args and isinstance(node.args[0], ast.Tuple) else node.args
                for arg in args:
                    literal = isinstance(arg, ast.Constant) and arg.value in _prefix_literals()
                    constant = isinstance(arg, ast.Name) and arg.id.endswith("_PREFIX") and arg.id != "TEMPORARY_PREFIX"
                    if literal or constant:
                        offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) and node.slice.lower is not None:
                lower = node.slice.lower
                if isinstance(lower, ast.Call) and getattr(lower.func, "id", "") == "len" and lower.args \
                        and isinstance(lower.args[0], ast.Name) and lower.args[0].id.endswith(("PREFIX", "GOLDEN")):
                    offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert offenders == []


def test_unknown_names_list_every_form_from_the_one_table():
    from fp8check.producers import registry

    with pytest.raises(UserError) as writer:
        registry.resolve("no-such-writer", isolation=None)
    for kind in registry.KINDS[registry.Role.WRITER]:
        assert kind.form in str(writer.value)
    with pytest.raises(UserError) as reader:
        from fp8check.core.spec import CacheSpec
        registry.resolve_reader("no-such-reader", spec=CacheSpec(), isolation=None)
    for kind in registry.KINDS[registry.Role.READER]:
        assert kind.form in str(reader.value)
