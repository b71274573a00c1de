"""`make mutation`: mutation testing of three real writers' source, and how well fp8check names the cause.

    python bench/mutation.py [--targets NAME ...] [--operators NAME ...] [--limit N] [--no-gate]
                             [--json FILE] [--markdown FILE]

Standard mutation operators (OPERATORS below: arithmetic and comparison swaps, constants, a removed abs,
max/min exchanged, offsets +-1, swapped arguments, `.to()`/`.view()` dtype changes, a removed mask, ue8m0
rounding, a dropped store) are applied one at a time to the kernel and wrapper functions of fp8check's Triton
writer (this tree), vLLM 0.33.0's writer file and SGLang 0.5.23's preset writer (both read from the pinned
released wheels at run time, never stored here). Each mutant that still compiles is run through the real
paths: `compare` with its defaults, then the gate's writer cases (configs/ci.toml with the mutant as the
candidate of every case whose candidate is fp8check's writer, the cases the unmutated writer passes, in
order, stopping at the first failure). A mutant no path kills is compared with the unmutated writer on
EQUIVALENCE_INPUTS: identical bytes on all of them is shown equivalence; any difference is a gate gap.

The expected family of a mutant's cause follows from its operator, or for the generic operators from what
the mutated line computes (FAMILIES). A benchmark, not a test: it prints the tables and exits 0.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import tempfile
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Which causes belong to each family: what a mutation of that kind of line can rightly be called.
FAMILIES = {
    "placement": {"shift", "permutation", "layout", "stray-write", "unwritten", "zero-input"},
    "scale": {"amax", "scale-ratio", "scale-pow2", "scale-ulp", "amax-floor", "ue8m0-rounding", "scale-format",
              "shift"},
    "amax": {"amax", "amax-floor"},
    "value": {"integer-cast", "fp8-format", "rounding", "saturation-nan", "signed-zero", "quotient"},
    "rounding": {"ue8m0-rounding", "scale-pow2", "scale-format", "scale-ratio"},
}
ROLE = "role"  # the family follows from the mutated line (line_family)
MUTANT_TIMEOUT_S = 60.0  # a mutant that loops forever is killed (a crash); the slowest case takes ~5 s


@dataclass(frozen=True)
class Operator:
    name: str
    family: str  # a FAMILIES key, or ROLE
    pattern: str
    replace: dict | None = None  # matched text -> replacements; None: `with_` for every match
    with_: tuple[str, ...] = ()


OPERATORS = (
    Operator("arithmetic", ROLE, r"(?<= )(//|[+\-*/%])(?= )",
             {"+": ("-",), "-": ("+",), "*": ("/",), "/": ("*",), "//": ("/",), "%": ("//",)}),
    Operator("comparison", ROLE, r"<=|>=|==|!=|<|>",
             {"<": ("<=",), "<=": ("<",), ">": (">=",), ">=": (">",), "==": ("!=",), "!=": ("==",)}),
    Operator("constant", ROLE, r"\b(?:448\.0|448|224\.0|224|1e-4|0\.5)\b",
             {"448.0": ("447.0", "449.0"), "448": ("447", "449"), "224.0": ("223.0", "225.0"), "224": ("223", "225"),
              "1e-4": ("1e-3", "1e-5"), "0.5": ("0.25",)}),
    Operator("abs", "amax", r"tl\.abs\((\w+)\)|(\w+)\.abs\(\)", None, (r"\1\2",)),
    Operator("max-min", ROLE, r"tl\.maximum|tl\.minimum|\btl\.max\b|\btl\.min\b|_elementwise_max",
             {"tl.maximum": ("tl.minimum",), "tl.minimum": ("tl.maximum",), "tl.max": ("tl.min",),
              "tl.min": ("tl.max",), "_elementwise_max": ("_elementwise_min",)}),
    Operator("offset", ROLE, r"\b(?:slot|slot_id|loc|block_offset|tile_block_offset|token_id|tid|t|block|block_id"
             r"|loc_page_index|loc_token_offset_in_page|token_in_tile|col_in_tile|rows|cols)\b(?!\s*=[^=])(?!\s*:)",
             None, (r"(\g<0> + 1)", r"(\g<0> - 1)")),
    Operator("swap-args", ROLE, r"(?<=[(\s])(\w+), (\w+)(?=[,)])", None, (r"\2, \1",)),
    Operator("dtype", "value", r"\.to\((?:value_ptr\.dtype\.element_ty|kv_cache_ptr\.type\.element_ty)\)",
             None, (".to(tl.uint8)", ".to(tl.float8e5)")),
    Operator("view", "value", r"\.view\((?:fp8_dtype|FP8_DTYPE|torch\.float8_e4m3fn)\)", None, ("",)),
    Operator("mask", "placement", r", mask=[^,()\[\]]+(?:\[[^\]]*\])?(?=[,)])", None, ("",)),
    Operator("ue8m0", "rounding", r"tl\.ceil|\bif (?:UE8M0|USE_UE8M0|round_scale):",
             {"tl.ceil": ("tl.floor",), "if UE8M0:": ("if not UE8M0:",), "if USE_UE8M0:": ("if not USE_UE8M0:",),
              "if round_scale:": ("if not round_scale:",)}),
    Operator("store", "placement", r"^(\s*)tl\.store\(", None, (r"\g<1>0 and tl.store(",)),
)

# the flags that pick the divisor (IS_FNUZ) or the ue8m0 rounding are lines of the scale too
SCALE_LINE = re.compile(r"\bamax\b|\bscale\s*=|log2|exp2|ceil|1e-4|448|224|\bDIV\b|abs\(|fp8_max|log_val"
                        r"|log_ceil|\bIS_FNUZ\b|UE8M0\b")
CLAMP_LINE = re.compile(r"\bfp8_min\s*=|\by\s*=\s*tl\.m")  # the values' clamp to +-max
# a cast of the values; an index cast (.to(tl.int64)) is no value
VALUE_LINE = re.compile(r"\.to\((?!tl\.int)|\by\s*=|fp8_val\s*=|/ scale|scale_broadcast")


def line_family(line: str, column: int) -> str:
    """What a mutation at `column` of `line` changes: where bytes go (placement), the scale, or the values.
    In a store, the pointer and mask arguments are placement and the stored value is what it computes."""
    store = line.find("tl.store(")
    if store >= 0:
        args = _top_level_args(line, store + len("tl.store("))
        for index, (start, end) in enumerate(args):
            if start <= column < end:
                return "placement" if index != 1 else ("scale" if "scale" in line[start:end] else "value")
        return "placement"
    if CLAMP_LINE.search(line):
        return "value"
    if SCALE_LINE.search(line):
        return "scale"
    if VALUE_LINE.search(line):
        return "value"
    return "placement"


def _top_level_args(line: str, start: int) -> list[tuple[int, int]]:
    spans, depth, begin = [], 0, start
    for i in range(start, len(line)):
        c = line[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                spans.append((begin, i))
                return spans
            depth -= 1
        elif c == "," and depth == 0:
            spans.append((begin, i))
            begin = i + 1
    spans.append((begin, len(line)))
    return spans


# ---- the writers under test --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    name: str
    files: tuple[str, ...]  # paths as the origin names them; mutants change one of them
    functions: tuple[str, ...]  # the functions whose lines are mutated
    formats: tuple[str, ...] | None = None  # the FP8 formats the writer writes (None: both)

    def sources(self) -> dict[str, str]:
        if self.name == "fp8check-triton":
            text = (ROOT / self.files[0]).read_text()
            # a copy outside the package: its relative imports name the package
            text = re.sub(r"^from \.\.(\w*)", lambda m: f"from fp8check.{m.group(1)}".rstrip("."), text, flags=re.M)
            text = re.sub(r"^from \.(\w+)", r"from fp8check.producers.\1", text, flags=re.M)
            return {self.files[0]: text}
        from fp8check.code.projects.compose import origin_for
        from fp8check.code.projects.table import preset

        key = {"vllm-0.33.0": "vllm/triton", "sglang-0.5.23": "sglang/triton"}[self.name]
        origin = origin_for(preset(key, "writer"), None)
        return {path: origin.read(path).data.decode() for path in self.files}

    def candidate(self, folder: Path, files: dict[str, str]) -> tuple[str, str | None]:
        """(the candidate name, the --repo folder or None) for these file texts written under `folder`."""
        for path, text in files.items():
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / path).write_text(text)
        if self.name == "fp8check-triton":
            return f"file:{folder / self.files[0]}:fixed_writer", None
        if self.name == "vllm-0.33.0":
            return f"vllm-file:{folder / self.files[0]}", None
        return "preset:sglang/triton", str(folder)


TARGETS = (
    Target("fp8check-triton", ("fp8check/producers/triton.py",), ("_quant_and_cache", "launch")),
    Target("vllm-0.33.0", ("vllm/v1/attention/ops/rocm_aiter_mla_sparse.py",),
           ("_indexer_k_quant_and_cache_kernel", "indexer_k_quant_and_cache_triton")),
    Target("sglang-0.5.23", ("sglang/kernels/ops/quantization/act_quant_triton.py",
                             "sglang/kernels/ops/kvcache/dsa_index_k_cache.py"),
           ("_act_quant_kernel", "act_quant", "_set_k_and_s_triton", "_set_k_and_s_triton_kernel"), ("e4m3fn",)),
)


@dataclass(frozen=True)
class Mutant:
    target: str
    file: str
    line: int
    operator: str
    family: str
    before: str
    after: str

    @property
    def id(self) -> str:
        return f"{self.target}:{Path(self.file).name}:{self.line}:{self.operator}:{self.after.strip()}"


def _mutable_lines(text: str, functions: tuple[str, ...]) -> list[int]:
    """Line numbers (1-based) of code in the named functions: no docstrings, comments, decorators or the
    signature."""
    tree = ast.parse(text)
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in functions:
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
                body = body[1:]
            for statement in body:
                lines.extend(range(statement.lineno, statement.end_lineno + 1))
    return sorted(set(lines))


def mutants(target: Target, sources: dict[str, str], operators=OPERATORS) -> list[Mutant]:
    """Every mutant of the target's functions, one operator at one place each; two operators that make the
    same line make one mutant (the first operator's)."""
    found, made = [], set()
    for path, text in sources.items():
        lines = text.splitlines(keepends=True)
        for number in _mutable_lines(text, target.functions):
            line = lines[number - 1]
            code = line.split("#", 1)[0].rstrip("\n")
            if not code.strip() or code.strip().startswith(("def ", "assert ", "raise ", '"', "f\"")):
                continue
            for op in operators:
                for match in re.finditer(op.pattern, code):
                    texts = op.replace.get(match.group(0), ()) if op.replace else op.with_
                    for replacement in texts:
                        new = code[: match.start()] + match.expand(replacement) + code[match.end():]
                        if new == code:
                            continue
                        family = line_family(code, match.start()) if op.family == ROLE else op.family
                        mutated = "".join(lines[: number - 1]) + new + line[len(code):] + "".join(lines[number:])
                        try:
                            ast.parse(mutated)
                        except SyntaxError:
                            continue
                        if (path, number, new.strip()) in made:
                            continue
                        made.add((path, number, new.strip()))
                        found.append(Mutant(target.name, path, number, op.name, family, code.strip(), new.strip()))
    return found


def mutated_sources(sources: dict[str, str], mutant: Mutant) -> dict[str, str]:
    lines = sources[mutant.file].splitlines(keepends=True)
    line = lines[mutant.line - 1]
    code = line.split("#", 1)[0].rstrip("\n")
    indent = code[: len(code) - len(code.lstrip())]
    lines[mutant.line - 1] = indent + mutant.after + line[len(code):]
    return {**sources, mutant.file: "".join(lines)}


# ---- running a mutant through the real paths -------------------------------------------------------------


@dataclass
class Verdict:
    mutant: Mutant
    compare: str = ""  # killed | crashed | survived | checker-error
    top: str | None = None
    causes: list = field(default_factory=list)
    hint: str | None = None
    gate: str = ""  # killed | survived | not run
    gate_case: str | None = None
    equivalent: str = ""  # "" | equivalent on N inputs | differs: case
    seconds: float = 0.0

    @property
    def in_family(self) -> bool:
        return self.top in FAMILIES[self.mutant.family]


def _limits():
    from fp8check.core.isolation import Limits

    return Limits(timeout_s=MUTANT_TIMEOUT_S)


def compare_defaults(candidate: str, repo: str | None, baseline: str = "auto", **values):
    """`fp8check compare --candidate NAME` with its defaults, through the request path the CLI uses."""
    from fp8check.run.gate import run_request

    given = {"candidate": candidate, "baseline": baseline, **values}
    if repo is not None:
        given["repo"] = repo
    return run_request("compare", given, where="mutation benchmark", isolation=_limits())


def with_candidate(config_text: str, candidate: str, repo: str | None, *, replaces: str = "triton") -> str:
    """configs/ci.toml's writer cases with `candidate` in place of `replaces` (fp8check's writer): every
    other case is dropped. The one place that knows how a gate case names its candidate."""
    config = tomllib.loads(config_text)
    cases = [dict(case, candidate=candidate, **({"repo": repo} if repo else {}))
             for case in config.get("case", []) if case.get("candidate") == replaces]
    return _toml({"defaults": config.get("defaults", {}), "case": cases})


def _toml(data: dict) -> str:
    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return json.dumps(v)

    out = ["[defaults]", *(f"{k} = {value(v)}" for k, v in data["defaults"].items())]
    for case in data["case"]:
        out += ["", "[[case]]", *(f"{k} = {value(v)}" for k, v in case.items())]
    return "\n".join(out) + "\n"


def gate_cases(candidate: str, repo: str | None, folder: Path):
    from fp8check.run import gate_config

    text = with_candidate((ROOT / "configs" / "ci.toml").read_text(), candidate, repo)
    path = folder / "gate.toml"
    path.write_text(text)
    return gate_config.load(path).cases


def run_gate(cases, keep: list[int] | None = None) -> tuple[str, str | None]:
    """("killed", the first case that failed) or ("survived", None), over the cases at `keep` (all: None)."""
    from fp8check.run.gate import run_case

    for index, case in enumerate(cases):
        if keep is not None and index not in keep:
            continue
        outcome = run_case(case, isolation=_limits())
        if outcome.exit_code != 0:
            return "killed", case.id
    return "survived", None


def passing_cases(candidate: str, repo: str | None, folder: Path) -> list[int]:
    """The gate cases the unmutated writer passes: a mutant is killed only by a case its original passes
    (SGLang's writer writes e4m3fn only; vLLM's divides where aiter multiplies)."""
    from fp8check.run.gate import run_case

    return [i for i, case in enumerate(gate_cases(candidate, repo, folder))
            if run_case(case, isolation=_limits()).exit_code == 0]


# Inputs an equivalent mutant must write exactly as the unmutated writer does: every input kind with both
# scale formats, with the slot patterns, both FP8 formats and four geometries in turn: 112 tokens (no
# multiple of 32) in the shuffle layout and in the linear one, 576 tokens in blocks of 64 (more than one
# program's tile), and 300 one-token blocks.
SLOT_PATTERNS = ("sequential", "shuffled", "padded", "sparse")
GEOMETRIES = ({"block": 16, "num_blocks": 7}, {"block": 16, "num_blocks": 7, "layout": "linear"},
              {"block": 64, "num_blocks": 9}, {"block": 1, "num_blocks": 300})
EQUIVALENCE_INPUTS = [
    {"inputs": d, "slots": SLOT_PATTERNS[(i + j) % 4], "scale_fmt": f, "fp8": ("e4m3fn", "e4m3fnuz")[(i // 4 + j) % 2],
     **GEOMETRIES[(i + 2 * j) % 4]}
    for i, d in enumerate(("normal", "uniform", "outliers", "ue8m0-boundary", "ties", "tiny", "specials", "mixed"))
    for j, f in enumerate(("ue8m0", "fp32"))
]


def equivalence(candidate: str, repo: str | None, original: str, original_repo: str | None, *,
                formats: tuple[str, ...] | None = None) -> str:
    from fp8check.core.errors import UserError

    # the unmutated writer as the baseline: a preset's two sides differ only in their --repo; inputs the
    # unmutated writer cannot write (SGLang's writer writes e4m3fn only) are no evidence either way
    for values in EQUIVALENCE_INPUTS:
        if formats is not None and values["fp8"] not in formats:
            continue
        try:
            if repo is not None and original_repo != repo:
                base = compare_defaults(original, original_repo, baseline="reference", **values)
                mut = compare_defaults(candidate, repo, baseline="reference", **values)
                same = (base.result.candidate.buffer.flat.equal(mut.result.candidate.buffer.flat)
                        and base.result.candidate.buffer.guards.equal(mut.result.candidate.buffer.guards))
            else:
                same = compare_defaults(candidate, None, baseline=original, **values).result.identical
        except UserError as exc:
            return f"differs: {values} ({str(exc).splitlines()[0][:80]})"
        if not same:
            return f"differs: {values}"
    runs = sum(formats is None or v["fp8"] in formats for v in EQUIVALENCE_INPUTS)
    return f"equivalent on {runs} inputs"


def judge(target: Target, sources: dict[str, str], mutant: Mutant, folder: Path, gate, original) -> Verdict:
    """compare defaults; then, for a mutant they miss, identical bytes to the unmutated writer on
    EQUIVALENCE_INPUTS (shown equivalent), else the gate's cases the original passes (`gate()`: their
    indices, computed once per target; None: no gate)."""
    from fp8check.diagnose.words import explain
    from fp8check.core.errors import UserError

    verdict = Verdict(mutant)
    start = time.perf_counter()
    candidate, repo = target.candidate(folder, mutated_sources(sources, mutant))
    try:
        checked = compare_defaults(candidate, repo)
        if checked.passed:
            verdict.compare = "survived"
        else:
            verdict.compare = "killed"
            diagnosis = checked.diagnosis
            verdict.causes = [(c.category.value, c.bytes) for c in diagnosis]
            if diagnosis.top is not None:
                verdict.top = diagnosis.top.category.value
                verdict.hint = explain(diagnosis.top, checked.result.spec)[1]
    except UserError as exc:
        verdict.compare, verdict.top = "crashed", None
        verdict.hint = str(exc).splitlines()[0]
    except Exception as exc:  # fp8check's own failure (exit 3): reported, never a kill
        verdict.compare, verdict.top = "checker-error", None
        verdict.hint = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    if verdict.compare == "survived" and gate is not None:
        verdict.equivalent = equivalence(candidate, repo, *original, formats=target.formats)
        if not verdict.equivalent.startswith("equivalent") and gate is not None:
            verdict.gate, verdict.gate_case = run_gate(gate_cases(candidate, repo, folder), gate())
    verdict.seconds = time.perf_counter() - start
    return verdict


# ---- the report -----------------------------------------------------------------------------------------


def summary(verdicts: list[Verdict]) -> dict:
    n = len(verdicts)
    equivalent = [v for v in verdicts if v.equivalent.startswith("equivalent")]
    live = [v for v in verdicts if v not in equivalent]
    by_compare = [v for v in live if v.compare in ("killed", "crashed")]
    by_gate = [v for v in live if v.compare in ("killed", "crashed") or v.gate == "killed"]  # the gate runs
    # only where compare defaults missed a mutant that is not equivalent
    diagnosed = [v for v in live if v.compare == "killed"]
    right = [v for v in diagnosed if v.in_family]
    unknown = [v for v in diagnosed if v.top == "unknown"]
    return {"mutants": n, "equivalent": len(equivalent), "non_equivalent": len(live),
            "killed_by_compare": len(by_compare), "crashed": sum(v.compare == "crashed" for v in live),
            "killed_by_compare_or_gate": len(by_gate), "diagnosed": len(diagnosed), "top_in_family": len(right),
            "top_unknown": len(unknown),
            "survivors": [v.mutant.id for v in live if v not in by_gate]}


def markdown(verdicts: list[Verdict]) -> str:
    s = summary(verdicts)

    def pct(a, b):
        return f"{100 * a / b:.1f}%" if b else "-"

    out = ["| | count | share |", "|---|---:|---:|",
           f"| mutants | {s['mutants']} | |", f"| shown equivalent | {s['equivalent']} | |",
           f"| killed by `compare` defaults | {s['killed_by_compare']} | {pct(s['killed_by_compare'], s['non_equivalent'])} |",
           f"| of which crashes | {s['crashed']} | |",
           f"| killed by `compare` or the gate | {s['killed_by_compare_or_gate']} |"
           f" {pct(s['killed_by_compare_or_gate'], s['non_equivalent'])} |",
           f"| DIFFERENT with a diagnosis | {s['diagnosed']} | |",
           f"| top cause in the expected family | {s['top_in_family']} | {pct(s['top_in_family'], s['diagnosed'])} |",
           f"| top cause `unknown` | {s['top_unknown']} | {pct(s['top_unknown'], s['diagnosed'])} |", ""]
    out += ["| mutant | family | compare | top cause | gate | equivalence |", "|---|---|---|---|---|---|"]
    for v in verdicts:
        mark = "" if v.compare != "killed" else (" (in family)" if v.in_family else " (**outside**)")
        out.append(f"| `{v.mutant.id}` | {v.mutant.family} | {v.compare} | {v.top or '-'}{mark} | {v.gate or '-'} |"
                   f" {v.equivalent or '-'} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", nargs="*", default=[t.name for t in TARGETS])
    parser.add_argument("--operators", nargs="*", default=[o.name for o in OPERATORS])
    parser.add_argument("--limit", type=int, default=None, help="at most N mutants per target, evenly spread")
    parser.add_argument("--no-gate", action="store_true", help="compare defaults only (no equivalence, no gate)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args(argv)
    import torch

    # every mutant runs in a forked child: a parent whose intra-op thread pool has run may fork a child
    # that waits forever on that pool's lock (seen here); one thread keeps the forks sound
    torch.set_num_threads(1)
    operators = tuple(o for o in OPERATORS if o.name in args.operators)
    verdicts = []
    for target in (t for t in TARGETS if t.name in args.targets):
        sources = target.sources()
        chosen = mutants(target, sources, operators)
        if args.limit and len(chosen) > args.limit:
            step = len(chosen) / args.limit
            chosen = [chosen[int(i * step)] for i in range(args.limit)]
        with tempfile.TemporaryDirectory(prefix="fp8check-mutation-") as tmp:
            original = target.candidate(Path(tmp) / "original", sources)
            passing: list = []

            def keep() -> list[int]:
                if not passing:
                    passing.append(passing_cases(*original, Path(tmp) / "original"))
                    print(f"{target.name}: the unmutated writer passes {len(passing[0])} gate cases", flush=True)
                return passing[0]

            for i, mutant in enumerate(chosen):
                folder = Path(tmp) / f"m{i}"
                verdict = judge(target, sources, mutant, folder, None if args.no_gate else keep, original)
                verdicts.append(verdict)
                print(f"{mutant.id}: compare {verdict.compare} top {verdict.top} gate {verdict.gate or '-'}"
                      f" {verdict.equivalent} ({verdict.seconds:.1f} s)", flush=True)
    text = markdown(verdicts)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"summary": summary(verdicts),
                                         "mutants": [{**asdict(v), "id": v.mutant.id, "in_family": v.in_family}
                                                     for v in verdicts]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
