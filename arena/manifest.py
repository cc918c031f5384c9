"""Bot manifests (``bot.toml``): who a bot is and how to run it.

A manifest names the bot, its version and author, the command to run, the
working directory and an optional build command. ``arena`` accepts a manifest
path, a directory holding ``bot.toml``, or the name of a bundled reference bot.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MANIFEST = "bot.toml"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
BUNDLED_DIR = Path(__file__).resolve().parent.parent / "bots"
SKIP_DIRS = {".git", "__pycache__", "target", "node_modules", ".venv"}


class ManifestError(ValueError):
    """A manifest that is missing, unreadable or incomplete; the message says which field."""


@dataclass(frozen=True)
class BotSpec:
    name: str
    version: str
    command: tuple[str, ...]
    workdir: Path
    root: Path  # the directory holding the manifest
    author: str = ""
    build: tuple[str, ...] | None = None
    limits: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    human: bool = False

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}"

    def files_hash(self) -> str:
        """sha256 over the manifest and every file under the bot's directory (build outputs excluded)."""
        h = hashlib.sha256()
        for path in sorted(_walk(self.root)):
            h.update(str(path.relative_to(self.root)).encode() + b"\0")
            h.update(path.read_bytes())
        return h.hexdigest()


HUMAN = BotSpec("human", "-", (), Path("."), Path("."), human=True)


def _walk(root: Path):
    for p in root.iterdir():
        if p.is_dir():
            if p.name not in SKIP_DIRS:
                yield from _walk(p)
        elif p.is_file() and not p.name.endswith((".class", ".o", ".pyc")):
            yield p


def bundled_bots() -> list[str]:
    if not BUNDLED_DIR.is_dir():
        return []
    return sorted(p.name for p in BUNDLED_DIR.iterdir() if (p / MANIFEST).is_file())


def load_bot(ref: str | Path) -> BotSpec:
    """A manifest path, a bot directory, a bundled bot's name, or ``human``."""
    if str(ref) == "human":
        return HUMAN
    path = Path(ref)
    if not path.exists() and NAME_RE.match(str(ref)) and (BUNDLED_DIR / str(ref) / MANIFEST).is_file():
        path = BUNDLED_DIR / str(ref)
    if path.is_dir():
        path = path / MANIFEST
    if not path.is_file():
        known = ", ".join(bundled_bots())
        raise ManifestError(f"no bot at {ref!r}: give a bot.toml, a directory holding one, or a bundled bot ({known})")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ManifestError(f"{path}: not valid TOML: {e}") from None
    return parse_manifest(data, path.parent.resolve(), str(path))


def parse_manifest(data: dict[str, Any], root: Path, where: str = "bot.toml") -> BotSpec:
    def need(key: str, kind: type) -> Any:
        if key not in data:
            raise ManifestError(f"{where}: missing required field {key!r}")
        if not isinstance(data[key], kind):
            raise ManifestError(f"{where}: field {key!r} must be a {kind.__name__}")
        return data[key]

    name = need("name", str)
    if not NAME_RE.match(name):
        raise ManifestError(f"{where}: name {name!r} must be lower-case letters, digits, '.', '_' or '-'")
    command = need("command", list)
    if not command or not all(isinstance(a, str) for a in command):
        raise ManifestError(f"{where}: command must be a non-empty list of strings (argv)")
    build = data.get("build")
    if build is not None and (not isinstance(build, list) or not all(isinstance(a, str) for a in build)):
        raise ManifestError(f"{where}: build must be a list of strings (argv)")
    workdir = (root / str(data.get("workdir", "."))).resolve()
    if not workdir.is_relative_to(root):
        raise ManifestError(f"{where}: workdir must stay inside the bot's directory")
    limits = data.get("limits", {})
    if not isinstance(limits, dict):
        raise ManifestError(f"{where}: [limits] must be a table")
    return BotSpec(name=name, version=str(data.get("version", "0")), command=tuple(command),
                   workdir=workdir, root=root, author=str(data.get("author", "")),
                   build=tuple(build) if build else None, limits=limits)
