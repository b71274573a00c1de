"""The host side of a built op's kernels (build.py): their symbols read from the object file, demangled,
and a C++ trampoline per kernel that the runtime calls with each scalar parameter passed by value."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from .compiler import Compiler



TYPE_MAP = {  # demangled scalar parameter types a trampoline can pass by value
    "bool": "bool", "char": "char", "signed char": "signed char", "unsigned char": "unsigned char",
    "short": "short", "unsigned short": "unsigned short", "int": "int", "unsigned int": "unsigned int",
    "long": "long", "unsigned long": "unsigned long", "long long": "long long",
    "unsigned long long": "unsigned long long", "float": "float", "double": "double", "__bf16": "__bf16",
    "_Float16": "_Float16",
}

def _tools(compiler: Compiler) -> Path:
    """The folder of the compiler's own LLVM tools (llvm-nm, llvm-cxxfilt): where the real binary lies."""
    return Path(os.path.realpath(shutil.which(compiler.command[0]) or compiler.command[0])).parent


def _symbols(compiler: Compiler, obj: Path, cwd: Path) -> list[tuple[str, str]]:
    nm = shutil.which("llvm-nm", path=str(_tools(compiler))) or shutil.which("nm")
    out = subprocess.run([nm, "--defined-only", str(obj)], capture_output=True, text=True, cwd=cwd).stdout
    return [(parts[1], parts[2]) for parts in (line.split() for line in out.splitlines()) if len(parts) == 3]


def _demangle(compiler: Compiler, names: list[str]) -> list[str]:
    tool = shutil.which("llvm-cxxfilt", path=str(_tools(compiler))) or shutil.which("c++filt")
    out = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True).stdout
    return out.splitlines()


def _parameters(demangled: str) -> list[str]:
    """The top-level parameter types of a demangled function name."""
    depth, end = 0, len(demangled) - 1
    while end >= 0 and demangled[end] != ")":
        end -= 1
    for start in range(end, -1, -1):
        c = demangled[start]
        depth += c == ")"
        depth -= c == "("
        if depth == 0:
            break
    inner, params, depth, cur = demangled[start + 1:end], [], 0, ""
    for c in inner:
        depth += c in "<(["
        depth -= c in ">)]"
        if c == "," and depth == 0:
            params.append(cur.strip())
            cur = ""
        else:
            cur += c
    if cur.strip():
        params.append(cur.strip())
    return [] if params == ["void"] else params


def _parameter_types(signature: str) -> list[str] | None:
    """C++ types a trampoline passes for each parameter; None when one cannot be passed by value here."""
    if not signature.endswith(")"):
        return None  # not demangled
    types = []
    for param in _parameters(signature):
        if param.endswith(("*", "&")):
            types.append("void*")
        elif param in TYPE_MAP:
            types.append(TYPE_MAP[param])
        else:
            return None
    return types


def _trampolines(kernels: list[str], demangled: list[str]) -> str:
    """One trampoline per kernel whose parameters are pointers and scalars. A kernel with any other
    parameter (a struct or enum by value) gets none: launching it stops the run naming it."""
    lines = ["// Generated: one trampoline per kernel, unpacking hipLaunchKernel's argument array.",
             'struct hipcpu_kernel_entry { const char* name; void (*trampoline)(void**); };']
    for i, (name, signature) in enumerate(zip(kernels, demangled)):
        types = _parameter_types(signature)
        if types is None:
            lines.append(f'#define hipcpu_trampoline_{i} nullptr')
            continue
        decl = ", ".join(types)
        lines.append(f'extern "C" void hipcpu_kernel_{i}({decl}) __asm__("{name}");')
        call = ", ".join(f"*static_cast<{t}*>(a[{j}])" for j, t in enumerate(types))
        lines.append(f"static void hipcpu_trampoline_{i}(void** a) {{ hipcpu_kernel_{i}({call}); }}")
    entries = ", ".join(f'{{"{name}", hipcpu_trampoline_{i}}}' for i, name in enumerate(kernels))
    lines.append(f'extern "C" const hipcpu_kernel_entry hipcpu_kernels[] = {{{entries}{", " if entries else ""}{{nullptr, nullptr}}}};')
    lines.append(f'extern "C" const int hipcpu_kernel_count = {len(kernels)};')
    return "\n".join(lines) + "\n"
