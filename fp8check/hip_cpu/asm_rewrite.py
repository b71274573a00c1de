"""Inline AMDGPU asm -> calls of the runtime's instruction emulator (runtime/src/isa_runner.cpp), which runs
the instructions it knows and stops the run naming any other one, when executed. The template expression is
kept as written (string literals, or macros standing for them), and so is the line count, so that compiler
messages point at the original lines. Statements that do not parse are left as they are: clang then rejects
them where they are emitted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ASM = re.compile(r"\b(?:asm|__asm__|__asm)\b(?:\s+(?:volatile|__volatile__|__volatile|goto|inline))*\s*\(")
_SEMICOLON = re.compile(r"\s*;")


@dataclass(frozen=True)
class AsmOperand:
    name: str | None
    constraint: str  # the C string literal, quotes included
    expr: str


@dataclass(frozen=True)
class AsmStatement:
    start: int  # offset of `asm`
    end: int  # offset after the closing `)` (and a following `;` if any)
    template: str
    outputs: tuple[AsmOperand, ...]
    inputs: tuple[AsmOperand, ...]


def _scan(text: str, i: int = 0):
    """(index, character) of each character of `text` from `i` on, string and character literals skipped."""
    while i < len(text):
        if text[i] in "\"'":
            quote, i = text[i], i + 1
            while i < len(text) and text[i] != quote:
                i += 2 if text[i] == "\\" else 1
        else:
            yield i, text[i]
        i += 1


def _split_top(text: str, separator: str) -> list[str] | None:
    """`text` split at `separator` outside (), [], {} and string literals; None if unbalanced."""
    parts, depth, start = [], 0, 0
    for i, c in _scan(text):
        depth += (c in "([{") - (c in ")]}")
        if depth < 0:
            return None
        if c == separator and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return None if depth else parts + [text[start:]]


_OPERAND = re.compile(r"^\s*(?:\[\s*(\w+)\s*\])?\s*(\"(?:[^\"\\]|\\.)*\")\s*\((.*)\)\s*$", re.S)


def _operands(section: str) -> tuple[AsmOperand, ...] | None:
    if not section.strip():
        return ()
    matches = [_OPERAND.match(item) for item in _split_top(section, ",") or [""]]
    return None if None in matches else tuple(AsmOperand(*match.groups()) for match in matches)


def _closing(text: str, open_paren: int) -> int | None:
    depth = 0
    for i, c in _scan(text, open_paren):
        depth += (c == "(") - (c == ")")
        if depth == 0:
            return i
    return None


def find_statements(text: str) -> list[AsmStatement]:
    statements = []
    for match in _ASM.finditer(text):
        open_paren = match.end() - 1
        close = _closing(text, open_paren)
        if close is None:
            continue
        parts = _split_top(text[open_paren + 1:close].replace("\\\n", " "), ":")  # macro continuations out
        if parts is None or len(parts) < 2 or len(parts) > 4 or not parts[0].strip():
            continue  # basic asm without operands: nothing in the op's headers; left as written
        outputs, inputs = _operands(parts[1]), _operands(parts[2]) if len(parts) > 2 else ()
        if outputs is None or inputs is None:
            continue
        semicolon = _SEMICOLON.match(text, close + 1)
        end = semicolon.end() if semicolon else close + 1
        statements.append(AsmStatement(match.start(), end, parts[0].strip(), outputs, inputs))
    return statements


def _name(op: AsmOperand) -> str:
    return f'"{op.name}"' if op.name else "nullptr"


def replacement(statement: AsmStatement, original: str) -> str:
    """The C++ block standing for one asm statement, followed by the newlines it spanned."""
    operands = [*statement.outputs, *statement.inputs]
    if operands:
        # outputs bind to the lvalue (written back); inputs are copied (a vector element is fine there)
        items = ", ".join(f"::hipcpu::isa::{'output' if i < len(statement.outputs) else 'input'}({op.constraint},"
                          f" {_name(op)}, ({op.expr}))" for i, op in enumerate(operands))
        call = (f"{{ ::hipcpu::isa::AsmOperand hipcpu_asm_ops_[] = {{{items}}}; "
                f"hipcpu_run_asm({statement.template}, hipcpu_asm_ops_, {len(operands)}); }}")
    else:
        call = f"{{ hipcpu_run_asm({statement.template}, nullptr, 0); }}"
    call = " ".join(line.strip().rstrip("\\") for line in call.splitlines())
    escaped = original.count("\\\n")
    return call + " \\\n" * escaped + "\n" * (original.count("\n") - escaped)


def rewrite(text: str) -> tuple[str, int]:
    """(text with every parsable asm statement replaced, how many were replaced)."""
    statements = find_statements(text)
    out, last = [], 0
    for statement in statements:
        out += [text[last:statement.start], replacement(statement, text[statement.start:statement.end])]
        last = statement.end
    return "".join(out) + text[last:], len(statements)
