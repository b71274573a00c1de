"""Build HIP sources for the CPU as HIP compiles them: two clang passes over one staged translation unit (host:
`-x hip`, `<<<>>>` launches become clang's stubs calling hipLaunchKernel; device: `-fcuda-is-device` for x86-64,
the kernels the host launches with host/device overloads resolved as on the GPU), linked with the hipcpu
runtime (runtime/) into two shared objects, so that the two sides' copies of one function never meet. A
generated trampoline per kernel unpacks hipLaunchKernel's argument array. A cache entry is used only while
every file the compiler read and both built libraries still have their recorded sha256 (docs/SECURITY.md).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..core import disk_cache
from ..core.errors import ProducerError
from . import asm_rewrite
from .compiler import Compiler


RUNTIME = Path(__file__).parent / "runtime"
ARCHES = ("gfx942", "gfx950")
CACHE_KIND = "aiter-cpu"
# Flags of every pass. Contraction off: a*b+c is never fused into one rounding (stated in provenance).
COMMON_FLAGS = ("-std=c++20", "-O3", "-ffp-contract=off", "-fhip-new-launch-api", "-fnative-half-type",
                "-Wno-everything")
MANIFEST = "manifest.json"
# demangled scalar parameter types a trampoline can pass by value
SCALARS = frozenset({"bool", "char", "signed char", "unsigned char", "short", "unsigned short", "int",
                     "unsigned int", "long", "unsigned long", "long long", "unsigned long long", "float",
                     "double", "__bf16", "_Float16"})


class BuildError(ProducerError):
    """The sources did not build for the CPU (the compiler's first error is in the message)."""


@dataclass(frozen=True)
class Unit:
    """What to build; its files are staged (copied, inline asm rewritten) before the passes."""

    root: Path
    files: tuple[str, ...]  # relative paths to stage (headers and sources)
    main: str  # the translation unit, relative to root
    include_dirs: tuple[str, ...]  # relative to root
    defines: tuple[str, ...] = ()
    extra_text: str = ""  # appended to the translation unit (an entry point)
    system_includes: tuple[str, ...] = ()  # absolute folders searched after the staged ones (not staged)
    link_flags: tuple[str, ...] = ()  # for the host library
    key_extra: str = ""  # what else the build depends on (e.g. the PyTorch version it links)


@dataclass(frozen=True)
class Built:
    host_library: Path  # load this one (it needs the device library next to it)
    device_library: Path
    arch: str
    compiler: str
    kernels: tuple[str, ...]
    key: str
    seconds: float  # 0.0 when it came from the cache
    asm_statements: int
    poisoned_builtins: int
    library_sha256: tuple[str, str] = ("", "")  # (host, device) as built

    def load(self) -> tuple[ctypes.CDLL, ctypes.CDLL]:
        """(host library, device library) loaded, the runtime's entry points typed. Each library is hashed
        first: one that is not the one built is refused, never loaded."""
        for path, built in zip((self.host_library, self.device_library), self.library_sha256):
            if _sha256(path) != built:
                raise BuildError(f"{path} is not the library that was built (sha256 {built}): refused; the next"
                                 " run rebuilds it")
        host, device = (ctypes.CDLL(str(path)) for path in (self.host_library, self.device_library))
        device.hipcpu_error.restype = ctypes.c_char_p
        device.hipcpu_undefined_reads.restype = ctypes.c_uint64
        device.hipcpu_instruction_counts.restype = ctypes.POINTER(ctypes.c_uint64)
        return host, device


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def compiler_identity(compiler: Compiler) -> dict:
    """What the build depends on of the compiler beyond its version: the binary the command runs (a
    reinstalled or patched clang of the same version is another compiler)."""
    try:
        info = os.stat(compiler.binary)
        return {"binary": compiler.binary, "size": info.st_size, "mtime_ns": info.st_mtime_ns}
    except OSError:
        return {"binary": compiler.binary}


def dependencies(depfile: Path, work: Path) -> dict[str, str]:
    """path -> sha256 of every file a compile read, from clang's dependency output (make syntax: `target:
    dep dep \\` lines, a space in a name escaped as `\\ `), leaving out the build's own folder (staged and
    generated files, which follow from the unit and the runtime)."""
    text = depfile.read_text().replace("\\\n", " ")
    body = text.split(":", 1)[1] if ":" in text else ""
    paths = [Path(os.path.realpath(work / name.replace("\\ ", " "))) for name in re.findall(r"(?:\\ |[^\s])+", body)]
    found = {str(p): _sha256(p) for p in paths if not p.is_relative_to(Path(os.path.realpath(work)))}
    return {path: digest for path, digest in found.items() if digest is not None}


def _entry_is_whole(entry: Path, key: str) -> bool:
    """A cache entry whose every part is there and unchanged: its manifest, both libraries as built, and
    every file the compiler read as it was then."""
    try:
        manifest = json.loads((entry / MANIFEST).read_text())
        libraries, read = manifest["libraries"], manifest["read"]
        if manifest["key"] != key or not (entry / "built.txt").is_file():
            return False
    except (OSError, ValueError, KeyError, TypeError):
        return False
    files = {**{str(entry / name): digest for name, digest in libraries.items()}, **read}
    return len(libraries) == 2 and all(_sha256(Path(path)) == digest for path, digest in files.items())


def _discard(entry: Path) -> None:
    """Move a stale or partial entry out of the way (one rename, so no reader sees half), then delete it."""
    trash = entry.with_name(f".discarded-{entry.name}-{os.getpid()}")
    with contextlib.suppress(OSError):
        os.replace(entry, trash)
        shutil.rmtree(trash, ignore_errors=True)


def runtime_digest() -> str:
    """The runtime's sources and the build steps themselves (this file, the asm rewriter)."""
    h = hashlib.sha256()
    for path in [*sorted(RUNTIME.rglob("*")), Path(__file__), Path(asm_rewrite.__file__)]:
        if path.is_file():
            h.update(path.name.encode() + path.read_bytes())
    return h.hexdigest()


def unit_digest(unit: Unit) -> str:
    h = hashlib.sha256()
    for rel in sorted(unit.files):
        h.update(rel.encode() + (unit.root / rel).read_bytes())
    h.update(repr((unit.main, unit.include_dirs, unit.defines, unit.extra_text, unit.system_includes,
                   unit.link_flags, unit.key_extra)).encode())
    return h.hexdigest()


def _cc1(compiler: Compiler, source: Path, output: Path, cwd: Path) -> list[str]:
    """The compiler's own -cc1 command line for a C++ compile of `source` (system include paths included)."""
    probe = cwd / "probe.cpp"  # a C++ file name: the driver's plain C++ command, no CUDA wrapper headers
    probe.write_text("")
    result = subprocess.run([*compiler.command, "-###", "-std=c++20", "-O3", "-fPIC", "-c", str(probe), "-o",
                             str(output)], capture_output=True, text=True, cwd=cwd)
    lines = [line for line in result.stderr.splitlines() if '"-cc1"' in line]
    if result.returncode != 0 or not lines:
        raise BuildError(f"cannot ask {compiler.description} for its compile command: {result.stderr.strip()[:300]}")
    command = shlex.split(lines[-1])
    command[command.index(str(probe))] = str(source)
    return command


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "error" in line] or stderr.splitlines() or ["no message"]


def _run(command: list[str], cwd: Path, what: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True, cwd=cwd)
    if result.returncode != 0:
        raise BuildError(f"{what} failed: {_errors(result.stderr)[0].strip()[:400]}")


_LLVM_LABEL = re.compile(r'__asm\s*\(\s*"(llvm\.[\w.]+)"\s*\)')


def llvm_stub(intrinsic: str) -> str:
    return "hipcpu_llvm_" + intrinsic.replace(".", "_")


def _stage(unit: Unit, staged: Path) -> tuple[int, set[str]]:
    """Copies the unit's files into `staged`, inline asm rewritten and asm labels naming an LLVM intrinsic
    (`__asm("llvm.amdgcn...")`) bound to stubs; (asm statements, builtin names and `llvm.` intrinsics)."""
    asm_count, builtins = 0, set()
    for rel in unit.files:
        text = (unit.root / rel).read_text(errors="surrogateescape")
        if "asm" in text:
            builtins.update(_LLVM_LABEL.findall(text))
            text = _LLVM_LABEL.sub(lambda m: f'__asm("{llvm_stub(m.group(1))}")', text)
            text, n = asm_rewrite.rewrite(text)
            asm_count += n
        builtins.update(re.findall(r"\b__builtin_amdgcn_\w+|\b__ocml_\w+", text))
        if rel == unit.main and unit.extra_text:
            text += "\n" + unit.extra_text
        target = staged / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, errors="surrogateescape")
    return asm_count, builtins


def _poison_header(builtins: set[str], path: Path) -> int:
    """Writes the header making each named AMDGPU builtin that runtime/include/hipcpu/device.hpp does not
    emulate a poison value, and the stubs of the `llvm.` intrinsics; how many of both there are."""
    device_header = (RUNTIME / "include" / "hipcpu" / "device.hpp").read_text()
    emulated = re.findall(r"#define (__builtin_amdgcn_\w+)", device_header)
    names = sorted(name for name in builtins - set(emulated) if name.startswith("__builtin_amdgcn_"))
    intrinsics = sorted(name for name in builtins if name.startswith("llvm."))
    stubs = ['#include "hipcpu/device.hpp"']
    stubs += [f'extern "C" void {llvm_stub(n)}() {{ hipcpu_fail("LLVM intrinsic not emulated", "{n}"); }}'
              for n in intrinsics]
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.parent.parent / "llvm_stubs.cpp").write_text("\n".join(stubs) + "\n")
    lines = ["// Generated: the AMDGPU builtins the staged sources name and the runtime does not emulate.",
             "#pragma once"]
    ocml = filter(None, (re.fullmatch(r"__ocml_(\w+?)_(f16|f32|f64)", name) for name in sorted(builtins)))
    for match in ocml:  # __ocml_<fn>_f32 -> <fn>f, _f64 -> <fn>, _f16 -> <fn>f in float
        fn, kind = match.group(1).removeprefix("native_"), match.group(2)
        if fn in ("recip", "rsqrt"):  # no libm function of that name
            value = {"recip": "(a + ...)", "rsqrt": "::sqrt((a + ...))"}[fn]
            call = {"f32": f"(float)(1.0 / {value})", "f64": f"1.0 / {value}",
                    "f16": f"(_Float16)(1.0f / (float){value})"}[kind]
        else:
            call = {"f32": f"::{fn}f(a...)", "f64": f"::{fn}(a...)", "f16": f"(_Float16)::{fn}f((float)a...)"}[kind]
        lines.append(f"HIPCPU_OCML({match.group(0)}, {call})")
    for name in names:
        sized = re.search(r"_b(8|16|32|64|96|128)$", name)
        kind = f"PoisonOf<{int(sized.group(1)) // 8}>" if sized else "Poison"
        lines.append(f'#define {name}(...) (::hipcpu::{kind}("{name}"))')
    path.write_text("\n".join(lines) + "\n")
    return len(names) + len(intrinsics)


def _compile_passes(compiler: Compiler, unit: Unit, arch: str, work: Path) -> None:
    staged, gen = work / "staged", work / "gen"
    base = _cc1(compiler, staged / unit.main, work / "x.o", work)
    if "-ferror-limit" in base:
        base[base.index("-ferror-limit") + 1] = "0"  # every error, so that one failed build names them all
    includes = ["-include", "hipcpu/prelude.hpp", "-I", str(RUNTIME / "include"), "-I", str(gen)]
    includes += [arg for d in unit.include_dirs for arg in ("-I", str(staged / d))]
    includes += [arg for d in unit.system_includes for arg in ("-isystem", d)]
    (work / "empty.bin").write_bytes(b"")
    passes = {"host": ["-fcuda-include-gpubinary", str(work / "empty.bin")],
              "device": ["-fcuda-is-device", "-fvisibility=hidden", f"-D__{arch}__", "-D__GFX9__"]}
    procs = []
    for name, extra in passes.items():
        command = list(base)
        command[command.index("-x") + 1] = "hip"
        command[command.index("-o") + 1] = str(work / f"{name}.o")
        # every file this pass reads, system headers included, for the cache entry (dependencies)
        command += ["-dependency-file", str(work / f"{name}.d"), "-MT", f"{name}.o", "-sys-header-deps"]
        position = command.index("-x")
        command[position:position] = [*COMMON_FLAGS, "-aux-triple", command[command.index("-triple") + 1],
                                      *extra, *includes, *(f"-D{d}" for d in unit.defines)]
        procs.append((name, subprocess.Popen(command, cwd=work, stderr=subprocess.PIPE, text=True)))
    for name, proc in procs:  # the two passes run side by side
        _, err = proc.communicate()
        (work / f"{name}.log").write_text(err)
        if proc.returncode != 0:
            first = " | ".join(e.strip()[:300] for e in _errors(err)[:3])
            raise BuildError(f"the {name} pass failed: {first or 'no message'}")


def _kernels(compiler: Compiler, work: Path) -> list[str]:
    """Kernels the host code launches (their handles are data in host.o) that the device pass compiled."""
    handles = {name for kind, name in _symbols(compiler, work / "host.o", work) if kind in "VvDdBbRr"}
    functions = {name for kind, name in _symbols(compiler, work / "device.o", work) if kind in "TtWw"}
    return sorted(handles & functions)


def _builtins(compiler: Compiler) -> list[str]:
    """compiler-rt's builtins archive (bf16 conversions such as __truncsfbf2 that gcc 12's libgcc lacks)."""
    out = subprocess.run([*compiler.command, "-print-libgcc-file-name", "--rtlib=compiler-rt"], capture_output=True,
                         text=True).stdout.strip()
    return [out] if out and Path(out).is_file() else []


def device_name(key: str) -> str:
    """The device library's file name and soname: unique per build, because the dynamic loader takes a
    library already loaded under the same soname (another arch's build) for the one asked for."""
    return f"libhipcpu-device-{key}.so"


def _link(compiler: Compiler, arch: str, work: Path, out: Path, key: str, unit: Unit) -> None:
    flags = [*compiler.command, "-std=c++20", "-O3", "-fPIC", "-ffp-contract=off", "-I", str(RUNTIME / "include")]
    arch_flags = [f'-DHIPCPU_ARCH="{arch}"'] + (["-DHIPCPU_GFX942"] if arch == "gfx942" else [])
    src, device, builtins = RUNTIME / "src", out / device_name(key), _builtins(compiler)
    inputs = (work / "device.o", work / "trampolines.cpp", work / "gen" / "llvm_stubs.cpp", src / "device.cpp",
              src / "isa_runner.cpp")
    _run([*flags, "-fvisibility=hidden", *arch_flags, "-shared", "-o", str(device), *map(str, inputs), *builtins,
          f"-Wl,-soname,{device.name}", "-Wl,-Bsymbolic"], work, "linking the device library")
    _run([*flags, *arch_flags, "-shared", "-o", str(out / "host.so"), str(work / "host.o"), str(src / "host.cpp"),
          str(device), *builtins, *unit.link_flags, "-Wl,-rpath,$ORIGIN", "-Wl,-Bsymbolic"], work,
         "linking the host library")


def build(unit: Unit, arch: str, compiler: Compiler) -> Built:
    """The unit built for `arch` (cached); BuildError naming the first compiler error otherwise."""
    if arch not in ARCHES:
        raise BuildError(f"unknown arch {arch!r}; known: {', '.join(ARCHES)}")
    fields = {"unit": unit_digest(unit), "runtime": runtime_digest(), "arch": arch, "compiler": list(compiler.command),
              "compiler_version": compiler.version, "compiler_binary": compiler_identity(compiler)}
    key = disk_cache.key_of(fields)[:32]
    cached = disk_cache.entry(CACHE_KIND, key)
    if cached is not None and cached.exists():
        if _entry_is_whole(cached, key):
            return _built(cached, key, arch, compiler, 0.0)
        _discard(cached)  # a header it read changed, a library was altered, or a part is missing: rebuilt
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fp8check-aiter-cpu-") as tmp:
        work = Path(tmp)
        asm_count, builtins = _stage(unit, work / "staged")
        poisoned = _poison_header(builtins, work / "gen" / "hipcpu" / "poison.hpp")
        _compile_passes(compiler, unit, arch, work)
        kernels = _kernels(compiler, work)
        (work / "trampolines.cpp").write_text(_trampolines(kernels, _demangle(compiler, kernels)))
        out = work / "out"
        out.mkdir()
        _link(compiler, arch, work, out, key, unit)
        (out / "built.txt").write_text("\n".join([str(asm_count), str(poisoned), *kernels]) + "\n")
        read = {**dependencies(work / "host.d", work), **dependencies(work / "device.d", work)}
        libraries = {name: _sha256(out / name) for name in ("host.so", device_name(key))}
        (out / MANIFEST).write_text(json.dumps({"key": key, "libraries": libraries, "read": read}, indent=1))
        final = cached if cached is not None else Path(tempfile.mkdtemp(prefix="fp8check-aiter-cpu-build-"))
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=final.parent))
        for f in out.iterdir():
            shutil.copy2(f, staging / f.name)
        try:
            os.replace(staging, final)  # whole or not at all
        except OSError:  # another process built the same key first: keep its build
            shutil.rmtree(staging, ignore_errors=True)
            if not (final / "built.txt").is_file():
                raise
    return _built(final, key, arch, compiler, time.perf_counter() - started)


def _built(entry: Path, key: str, arch: str, compiler: Compiler, seconds: float) -> Built:
    """The build an entry holds, read from its built.txt (asm statements, poisoned builtins, kernels)."""
    info = (entry / "built.txt").read_text().splitlines()
    libraries = json.loads((entry / MANIFEST).read_text())["libraries"]
    device = device_name(key)
    return Built(entry / "host.so", entry / device, arch, compiler.description, tuple(info[2:]), key, seconds,
                 int(info[0]), int(info[1]), (libraries["host.so"], libraries[device]))


def _tool(compiler: Compiler, name: str, fallback: str) -> str | None:
    return shutil.which(name, path=str(Path(compiler.binary).parent)) or shutil.which(fallback)


def _symbols(compiler: Compiler, obj: Path, cwd: Path) -> list[tuple[str, str]]:
    command = [_tool(compiler, "llvm-nm", "nm"), "--defined-only", str(obj)]
    out = subprocess.run(command, capture_output=True, text=True, cwd=cwd).stdout
    return [(parts[1], parts[2]) for parts in (line.split() for line in out.splitlines()) if len(parts) == 3]


def _demangle(compiler: Compiler, names: list[str]) -> list[str]:
    return subprocess.run([_tool(compiler, "llvm-cxxfilt", "c++filt")], input="\n".join(names) + "\n",
                          capture_output=True, text=True).stdout.splitlines()


def _parameter_types(signature: str) -> list[str] | None:
    """C++ types a trampoline passes for each top-level parameter of a demangled function name; None when
    one cannot be passed by value here."""
    if not signature.endswith(")"):
        return None  # not demangled
    depth = 0
    for start in range(len(signature) - 1, -1, -1):  # back to the `(` that opens the parameter list
        depth += (signature[start] == ")") - (signature[start] == "(")
        if depth == 0:
            break
    chars, depth = list(signature[start + 1:-1]), 0
    for i, c in enumerate(chars):  # top-level commas become the separator
        depth += (c in "<([") - (c in ">)]")
        chars[i] = "\0" if c == "," and depth == 0 else c
    params = [p.strip() for p in "".join(chars).split("\0") if p.strip() not in ("", "void")]  # f(void): none
    if not all(p.endswith(("*", "&")) or p in SCALARS for p in params):
        return None
    return ["void*" if p.endswith(("*", "&")) else p for p in params]


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
        lines.append(f'extern "C" void hipcpu_kernel_{i}({", ".join(types)}) __asm__("{name}");')
        call = ", ".join(f"*static_cast<{t}*>(a[{j}])" for j, t in enumerate(types))
        lines.append(f"static void hipcpu_trampoline_{i}(void** a) {{ hipcpu_kernel_{i}({call}); }}")
    table = ", ".join([f'{{"{name}", hipcpu_trampoline_{i}}}' for i, name in enumerate(kernels)]
                      + ["{nullptr, nullptr}"])
    lines.append(f'extern "C" const hipcpu_kernel_entry hipcpu_kernels[] = {{{table}}};')
    lines.append(f'extern "C" const int hipcpu_kernel_count = {len(kernels)};')
    return "\n".join(lines) + "\n"
