"""`aiter-src:PATH`: aiter's own C++ `indexer_k_quant_and_cache`, built for the CPU (hip_cpu/) from an aiter
checkout, an unpacked `amd-aiter` wheel (or its `aiter_meta/`), `git:REV:PATH` or `pkg:amd-aiter==VERSION`, and
run as a producer (docs/aiter-src.md). `--fp8` picks the arch, as on a GPU. Without the op's own `preshuffle`,
the source's `aiter/ops/shuffle.py` `shuffle_weight` makes the SHUFFLE layout.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import re
import subprocess
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch

from ..core.errors import ProducerError
from ..code.names import Name, is_git, split_git
from ..code.projects.table import pinned
from ..code.released import fetch_wheel, unpacked_once
from ..core.producer import EXTRA_KEYWORDS, Producer
from ..core.spec import FP8Format, Layout
from ..hip_cpu import build, compiler as compilers
from ..hip_cpu.entries import ENTRIES, Form

ARCH = {FP8Format.E4M3FNUZ: "gfx942", FP8Format.E4M3FN: "gfx950"}
OP_FILE = "csrc/kernels/cache_kernels.cu"
INCLUDE = "csrc/include"
HEADER_SUFFIXES = (".h", ".hpp", ".cuh", ".inc", ".hip")
# The instructions and cross-lane moves on the op's path, emulated from AMD's ISA description (isa.hpp).
EMULATED = "v_max3_f32, v_pk_mul_f32, v_med3_f32, v_cvt_pk_fp8_f32; DPP quad_perm 0xb1, 0x4e, row_half_mirror 0x141"
INSTRUCTIONS = ("v_max3_f32", "v_min3_f32", "v_med3_f32", "v_pk_mul_f32", "v_cvt_pk_fp8_f32", "v_max_f32",
                "v_min_f32", "v_mul_f32")


@dataclass(frozen=True)
class Checkout:
    root: Path  # the folder holding csrc/
    label: str  # what the user gave
    revision: str  # commit or wheel version ("unknown" when neither)
    op_sha256: str
    form: Form


def _git_export(text: str) -> tuple[Path, str]:
    rev, path = split_git(text, ProducerError, require_path=False)
    repo = Path(path or ".")
    def export(target: Path) -> Path:
        archive = subprocess.run(["git", "-C", str(repo), "archive", commit, "csrc", "aiter/ops/shuffle.py"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "x", "-C", str(target)], input=archive, check=True)
        return target

    try:
        commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", f"{rev}^{{commit}}"],
                                capture_output=True, text=True, check=True).stdout.strip()
        return unpacked_once("aiter-src-git", commit, OP_FILE, export), commit
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ProducerError(f"aiter-src:{text}: cannot export revision {rev!r} of {repo}: {exc}") from None


def _released(name: str, version: str) -> tuple[Path, str]:
    """`pkg:amd-aiter==VERSION`: the released wheel (fetched once by released.py), unpacked once."""
    wheel, digest = fetch_wheel(pinned(name, version))  # a pinned hash is checked

    def extract(staging: Path) -> Path:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(staging, [m for m in archive.namelist() if m.startswith(
                ("aiter_meta/csrc/", "aiter_meta/3rdparty/", "aiter/ops/shuffle.py"))])
        return staging

    target = unpacked_once("aiter-src-wheel", digest, f"aiter_meta/{OP_FILE}", extract)
    return target / "aiter_meta", f"{name}=={version} (wheel {wheel.name}, sha256 {digest})"


def _revision(root: Path) -> str:
    with contextlib.suppress(OSError):  # a checkout: the folder is the top of its git repository
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel", "HEAD"], capture_output=True,
                             text=True)
        lines = out.stdout.split()
        if out.returncode == 0 and len(lines) == 2 and Path(lines[0]).resolve() == root.resolve():
            return lines[1]
    for meta in (root.parent.glob("amd_aiter-*.dist-info/METADATA")):
        version = re.search(r"^Version: (.+)$", meta.read_text(), re.M)
        if version:
            return f"amd-aiter {version.group(1)}"
    return "unknown"


def locate(name: Name) -> Checkout:
    """The aiter source a producer name (`aiter-src:...`) points at; ProducerError saying what is missing."""
    text = name.body
    if name.package is not None:
        root, revision = _released(name.package, name.version)
    elif is_git(text):
        root, revision = _git_export(text)
    else:
        root, revision = Path(text), ""
        if (root / "aiter_meta" / OP_FILE).is_file():
            root = root / "aiter_meta"
    op = root / OP_FILE
    if not op.is_file():
        raise ProducerError(f"aiter-src:{text}: no {OP_FILE} there (give an aiter checkout or an unpacked"
                            " amd-aiter wheel's aiter_meta/ folder)")
    data = op.read_bytes()
    form = next((f for f in Form if f.detect(data.decode(errors="replace"))), None)
    if form is None:
        raise ProducerError(f"aiter-src:{text}: {OP_FILE} has no indexer_k_quant_and_cache of a known form")
    return Checkout(root, text, revision or _revision(root), hashlib.sha256(data).hexdigest(), form)


def unit(checkout: Checkout) -> build.Unit:
    entry = ENTRIES[checkout.form]
    include_dirs = (INCLUDE, *entry.extra_includes)
    files = [str(p.relative_to(checkout.root)) for folder in include_dirs
             for p in sorted((checkout.root / folder).rglob("*"))
             if p.is_file() and p.suffix in HEADER_SUFFIXES]
    system_includes, link_flags, key_extra = _torch_build() if entry.torch else ((), (), "")
    return build.Unit(checkout.root, (*files, OP_FILE), OP_FILE, include_dirs, entry.defines, entry.source,
                      system_includes, link_flags, key_extra)


STANDINS = build.RUNTIME / "standins"  # ROCm PyTorch's ATen/hip and rocPRIM, for torch-based releases


def _torch_build() -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """Include folders, link flags and version of the installed PyTorch (torch-based aiter releases)."""
    from torch.utils import cpp_extension
    libs = cpp_extension.library_paths()[0]
    includes = (str(STANDINS), *cpp_extension.include_paths(), sysconfig.get_paths()["include"])
    return includes, (f"-L{libs}", "-ltorch", "-ltorch_cpu", "-lc10", f"-Wl,-rpath,{libs}"), torch.__version__


class Library:
    """One built op, loaded into this process."""
    def __init__(self, built: build.Built):
        self.host, self.device = built.load()
        self.entry = self.host.fp8check_indexer_k_quant_and_cache
        self.entry.restype = ctypes.c_int
        self.entry.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_long] * 6 + [ctypes.c_char_p, ctypes.c_int]

    def run(self, k: torch.Tensor, kv_cache: torch.Tensor, slot_mapping: torch.Tensor, quant_block_size: int,
            scale_fmt: str, preshuffle: bool) -> dict[str, int]:
        """Runs the op on CPU tensors in place; returns the instructions executed. ProducerError when it
        stopped (an instruction or builtin not emulated) or read lanes that had returned."""
        self.device.hipcpu_reset()
        num_blocks, block_size, stride = kv_cache.shape
        rc = self.entry(k.data_ptr(), kv_cache.data_ptr(), slot_mapping.data_ptr(), k.shape[0], k.shape[1],
                        num_blocks, block_size, stride, quant_block_size, scale_fmt.encode(), int(preshuffle))
        error = self.device.hipcpu_error()
        if error:
            raise ProducerError(f"aiter's op stopped on the CPU: {error.decode(errors='replace')}")
        if rc != 0:
            raise ProducerError(f"aiter's op returned HIP error {rc} on the CPU")
        undefined = int(self.device.hipcpu_undefined_reads())
        if undefined:
            raise ProducerError(f"aiter's op read {undefined} values from lanes that had already returned"
                                " (undefined on a GPU): result refused")
        return dict(zip(INSTRUCTIONS, self.device.hipcpu_instruction_counts()[:len(INSTRUCTIONS)]))


def _known_answer(library: Library, fmt: FP8Format) -> None:
    """Run at build time: a row of ones must quantize to the format's max code with scale fl(1/max), and
    through the emulated v_cvt_pk_fp8_f32. Guards against an arch macro that selects a host stub (aiter
    has `return fp8x2_t{}` stubs for arches without the conversion) or a wrong FP8 format."""
    head_dim, block = 128, 16
    k = torch.ones(1, head_dim, dtype=torch.bfloat16)
    cache = torch.zeros(1, block, head_dim + 4, dtype=torch.uint8)
    counts = library.run(k, cache, torch.zeros(1, dtype=torch.int64), 128, "", False)
    max_code = 0x7E if fmt is FP8Format.E4M3FN else 0x7F
    values = cache[0].flatten()[:head_dim]
    scale = cache[0].flatten()[block * head_dim:block * head_dim + 4].view(torch.float32)
    expected_scale = torch.tensor(1.0, dtype=torch.float32) / torch.tensor(fmt.max, dtype=torch.float32)
    if counts["v_cvt_pk_fp8_f32"] == 0 or not bool((values == max_code).all()) \
            or not torch.equal(scale, expected_scale.view(1)):
        raise ProducerError(f"the CPU build of aiter's op failed its known-answer check on {ARCH[fmt]}: a row of"
                            f" ones gave codes {sorted(set(values.tolist()))} and scale {scale.item()!r}"
                            f" through {counts['v_cvt_pk_fp8_f32']} emulated conversions")


_LIBRARIES: dict[tuple[str, str], Library] = {}


def library_for(checkout: Checkout, fmt: FP8Format) -> Library:
    """The op built from the checkout's sources as they are now: loaded once per process for each content
    (an edited op or header is built and loaded again, never answered by the library of its old text)."""
    source = unit(checkout)
    key = (build.unit_digest(source), ARCH[fmt])
    if key not in _LIBRARIES:
        library = Library(build.build(source, ARCH[fmt], compilers.require()))
        _known_answer(library, fmt)
        _LIBRARIES[key] = library
    return _LIBRARIES[key]


def _shuffle_path(checkout: Checkout) -> Path:
    """aiter/ops/shuffle.py beside csrc/ (a checkout) or beside aiter_meta/ (a wheel)."""
    path = checkout.root / "aiter" / "ops" / "shuffle.py"
    return path if path.is_file() else checkout.root.parent / "aiter" / "ops" / "shuffle.py"


def _shuffle_weight(checkout: Checkout):
    """The checkout's own shuffle_weight (aiter/ops/shuffle.py), its one aiter import stubbed."""
    path = _shuffle_path(checkout)
    if not path.is_file():
        raise ProducerError(f"aiter-src:{checkout.label}: the op has no preshuffle and aiter/ops/shuffle.py is"
                            " missing")
    text = re.sub(r"^from aiter import .*$|^import aiter\b.*$", "", path.read_text(), flags=re.M)
    namespace: dict = {"__name__": "aiter_shuffle_from_source"}
    exec(compile(text, str(path), "exec"), namespace)
    return namespace["shuffle_weight"]


def writer_for(checkout: Checkout, built: dict[FP8Format, Library]):
    """The writer of one located checkout; `built`: its libraries by format, filled as calls need them (the
    sources are read and hashed once per format for this checkout, not at every call)."""
    def writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn, layout=None):
        if k.device.type != "cpu" or kv_cache.device.type != "cpu":
            raise ProducerError("aiter-src runs on the CPU: give --device cpu")
        fmt = FP8Format.from_torch_dtype(fp8_dtype)
        if fmt not in built:
            built[fmt] = library_for(checkout, fmt)
        library = built[fmt]
        shuffle = (layout or Layout.SHUFFLE.value) == Layout.SHUFFLE.value
        slots, preshuffle = slot_mapping.to(torch.int64).contiguous(), shuffle and checkout.form.preshuffle
        write = functools.partial(library.run, k.to(torch.bfloat16).contiguous(), kv_cache, slots, quant_block_size,
                                  scale_fmt or "", preshuffle)
        if shuffle and not preshuffle:  # as the `aiter` producer does: only written tokens' bytes shuffled
            from .adapters.aiter import shuffle_written
            shuffle_written(write, kv_cache, slots, k.shape[1], _shuffle_weight(checkout), fp8_dtype)
        else:
            write()

    return writer


def provenance(checkout: Checkout, fmt: FP8Format | None) -> dict:
    compiler, shuffle = compilers.find(), _shuffle_path(checkout)
    commit = re.fullmatch(r"[0-9a-f]{40}", checkout.revision)
    where = {"revision": "HEAD" if not is_git(checkout.label) else checkout.label.split(":")[1],
             "commit": checkout.revision} if commit else {"release": checkout.revision}
    return {"function": "indexer_k_quant_and_cache", "source": checkout.label, **where,
            "file": f"{checkout.label.rstrip('/')}/{OP_FILE}", "sha256": checkout.op_sha256,
            "form": checkout.form.value, "arch": ARCH[fmt] if fmt else "by --fp8",
            "compiler": compiler.description if compiler else "none",
            "flags": "-O3 -std=c++20 -ffp-contract=off (no contraction), FTZ|DAZ while kernels run",
            "emulated": EMULATED,
            **({} if checkout.form.preshuffle or not shuffle.is_file() else
               {"shuffle_weight": f"{shuffle}, sha256 {hashlib.sha256(shuffle.read_bytes()).hexdigest()}"})}


def load(name: Name, *, fp8: FP8Format | None = None):
    """The Producer for `aiter-src:...`; with `fp8` the op is built (or taken from the cache) and checked now."""
    checkout = locate(name)
    built = {fp8: library_for(checkout, fp8)} if fp8 is not None else {}
    description = (f"aiter's C++ indexer_k_quant_and_cache ({checkout.revision}) built for the CPU"
                   f" ({'preshuffle' if checkout.form.preshuffle else 'row-major + shuffle_weight'})")
    return Producer(name.text, description, writer_for(checkout, built), keywords=frozenset(EXTRA_KEYWORDS),
                    provenance=provenance(checkout, fp8))
