"""TOML configs: reading one with one-line errors, and finding one by path or by the name of a config
that ships inside the package (`fp8check/configs/NAME.toml`: `--config seed-table`)."""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

from .errors import ConfigError
from .paths import read_regular

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def builtin_names() -> list[str]:
    folder = resources.files("fp8check") / "configs"
    return sorted(p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml"))


def find(text: str | Path) -> Path:
    """A config by path, or by the name of a shipped one (with or without .toml)."""
    path = Path(text)
    if path.exists():
        return path
    name = path.name.removesuffix(".toml")
    if str(path) in (name, f"{name}.toml") and name in builtin_names():
        return Path(str(resources.files("fp8check") / "configs" / f"{name}.toml"))
    raise ConfigError(f"{text}: no such file, and no built-in config of that name (built in: {', '.join(builtin_names())})")


def load_toml(path: Path) -> dict:
    """A TOML file's tables, with one-line errors for missing or malformed files."""
    data = read_regular(path, error=ConfigError)  # a FIFO or a device is refused unopened
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    except RecursionError:  # tomllib recurses once per nesting level
        raise ConfigError(f"{path}: not valid TOML (nested too deeply)") from None
