"""Pieces of a released CUDA source, cut out by name: one kernel, one preprocessor block, one host
statement, and the project headers a file pulls in. Pure text functions: what is built is the project's
own text, never a copy kept in fp8check (STYLE.md habit 19)."""

from __future__ import annotations

import re
from pathlib import Path

from ..core.errors import ProducerError

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
_COMMENT = re.compile(r"//[^\n]*|/\*.*?(?:\*/|\Z)", re.S)  # an unclosed one runs to the end


def _skip(text: str, i: int) -> int:
    """The index after a comment or a string/char literal starting at i (i itself when none starts there)."""
    if comment := _COMMENT.match(text, i):
        return comment.end()
    if text[i] in "\"'":
        quote, j = text[i], i + 1
        while j < len(text) and text[j] != quote:
            j += 2 if text[j] == "\\" else 1
        return j + 1
    return i


def _matching(text: str, start: int, opening: str, closing: str) -> int:
    """The index just past the bracket that closes the one at `start`, comments and literals skipped."""
    depth, i = 0, start
    while i < len(text):
        after = _skip(text, i)
        if after != i:
            i = after
            continue
        if text[i] == opening:
            depth += 1
        elif text[i] == closing:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ProducerError(f"unbalanced {opening}{closing} from offset {start}")


def function(source: str, name: str, *, kernel: bool, what: str) -> str:
    """The definition of function `name` (a `__global__` kernel, with its `template <...>` line, or a host
    function), from its first line to its closing brace."""
    head = r"__global__\s+void\s+" if kernel else r"^\s*void\s+"
    match = re.search(head + re.escape(name) + r"\s*\(", source, re.M)
    if match is None:
        raise ProducerError(f"{what}: no {'__global__ ' if kernel else ''}function {name}")
    template = re.search(r"template\s*<[^;{}]*>\s*$", source[:match.start()])
    begin = template.start() if kernel and template is not None else match.start()
    body = source.index("{", _matching(source, match.end() - 1, "(", ")"))  # past the signature
    return source[begin:_matching(source, body, "{", "}")]


def block_defining(source: str, symbol: str, what: str) -> str:
    """The `#if ... #endif` block (or the single line) that defines `symbol`: a constant chosen per arch."""
    at = re.search(rf"\b{re.escape(symbol)}\s*=", source)
    if at is None:
        raise ProducerError(f"{what}: {symbol} is not defined")
    opening = source.rfind("\n#if", 0, at.start())
    closing = source.find("#endif", at.start())
    if opening < 0 or closing < 0 or "#endif" in source[opening + 1:at.start()]:
        return source[source.rfind("\n", 0, at.start()) + 1:source.index(";", at.start()) + 1]  # the one line
    return source[opening + 1:closing + len("#endif")]


def statement(body: str, pattern: str, what: str) -> str:
    """The first statement of `body` that starts with `pattern` (a regex), up to its `;`."""
    match = re.search(r"^\s*" + pattern, body, re.M)
    if match is None:
        raise ProducerError(f"{what}: no statement matching {pattern!r}")
    start = body.rfind("\n", 0, match.start()) + 1
    end = start
    while body[end] != ";":
        end = _matching(body, end, "(", ")") if body[end] == "(" else max(_skip(body, end), end + 1)
    return body[start:end + 1].strip()


def headers(root: Path, start: str) -> tuple[str, ...]:
    """The project headers `start` (relative to root) pulls in through quoted includes, transitively, itself
    included; includes not under root (CUDA's, torch's, a HIP branch's) are left to the compiler."""
    found: list[str] = []
    pending = [start]
    while pending:
        relative = pending.pop()
        if relative in found:
            continue
        found.append(relative)
        path = root / relative
        for included in _INCLUDE.findall(path.read_text(errors="replace")):
            for base in (path.parent, root):
                candidate = (base / included).resolve()
                if candidate.is_file() and candidate.is_relative_to(root.resolve()):
                    pending.append(str(candidate.relative_to(root.resolve())))
                    break
    return tuple(sorted(found))
