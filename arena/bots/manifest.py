"""Bot manifests (``bot.toml``): who a bot is and how to run it.

A manifest names the bot, its version and author, the command to run, the
working directory and an optional build command. ``arena`` accepts a manifest
path, a directory holding ``bot.toml``, or the name of a bundled reference bot.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .folder import SKIP_DIRS, V2, V3, FolderError, ManifestError, read_folder, read_manifest

__all__ = ["BUNDLED_DIR", "HUMAN", "MANIFEST", "NAME_RE", "BotSpec", "FolderError", "ManifestError",
           "bundled_bots", "load_bot", "parse_manifest", "refused_bot"]

MANIFEST = "bot.toml"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
BUNDLED_DIR = Path(__file__).resolve().parents[2] / "bots"


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
    env: dict[str, str] = field(default_factory=dict, compare=False, hash=False)  # never what the arena sets
    python: str | None = None  # replaces python3/python in command: bot.toml's interpreter or venv
    description: str = ""
    refused: str = field(default="", compare=False, hash=False)  # why every start is refused (:func:`refused_bot`)

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}"

    def files_hash(self) -> str:
        """The framed ``v3:`` hash of the manifest and every file and link of the bot's folder, as
        :func:`arena.bots.folder.read_folder` reads it (build outputs, .git, node_modules, target
        and .venv excluded), read once per spec: every later copy or pack of the bot is checked
        against it. It does not cover what the command runs outside that folder: the interpreter,
        system libraries, a venv's installed packages. A bot without a ``build`` whose folder holds
        build outputs (``Bot.class``, ``target/``, ``node_modules/``...) is refused here
        (:func:`prebuilt_refusal`), on every path that reads it."""
        return self._folder_hashes()[0]

    def has_files(self, stored: str) -> bool:
        """Whether a hash a store recorded names this bot's files: a ``v3:`` hash is compared with
        :meth:`files_hash`, an older one (``v2:``, or unframed) with that kind of hash of the same
        reading."""
        v3, v1, v2 = self._folder_hashes()
        return stored == (v3 if stored.startswith(V3) else v2 if stored.startswith(V2) else v1)

    def _folder_hashes(self) -> tuple[str, str, str]:
        known = self.__dict__.get("_files_hashes")
        if known is None:
            folder = read_folder(self.root)
            if folder.outputs and self.build is None:
                raise prebuilt_refusal(self.root, folder.outputs)
            known = (folder.digest, folder.digest_v1, folder.digest_v2)
            object.__setattr__(self, "_files_hashes", known)
        return known


def prebuilt_refusal(root: Path, outputs: tuple[str, ...]) -> FolderError:
    """Why a bot with no ``build`` whose folder holds the build ``outputs`` is refused. No seat,
    ladder snapshot or cluster bundle holds what the folder's reader leaves out, so such a bot would
    play with them where it ran from its author's folder and without them everywhere else (a Java
    bot shipping only ``Bot.class``: "could not find or load main class"); it is refused alike on
    every path instead, saying what to do."""
    named = ", ".join(repr(o) for o in outputs)
    return FolderError(f"{root}: holds build outputs ({named}) and has no `build`: the arena never serves a "
                       "bot's .class, .o, target/, node_modules/ or .venv/ from its folder (they are in no "
                       "files hash); add a `build` to bot.toml that makes them (it runs in the arena's copy "
                       "of the folder, in every mode), or remove them")


HUMAN = BotSpec("human", "-", (), Path("."), Path("."), human=True)


def refused_bot(label: str, ref: str, why: str) -> BotSpec:
    """A stand-in for the bot ``label`` that no longer loads as the run read it (its folder edited,
    broken or gone mid-run): every start of it is refused with ``why``, as the bot's own fault, so
    it forfeits its games and the run goes on."""
    name, _, version = label.partition("@")
    return BotSpec(name, version, (), Path(ref), Path(ref), refused=why)


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
        known = ", ".join(bundled_bots()) or (
            f"none: they live in {BUNDLED_DIR} of a checkout, which an install from a wheel ("
            "`pip install .` without -e) leaves out; install the checkout with `pip install -e .`")
        raise ManifestError(f"no bot at {str(ref)!r}: give a bot.toml, a directory holding one, or a bundled bot ({known})")
    text = read_manifest(path)  # its refusal (a FolderError) says why as it is, never as bad TOML
    try:
        data = tomllib.loads(text)
    except RecursionError:  # tomllib parses nested tables and arrays recursively
        raise ManifestError(f"{path}: not valid TOML: tables or arrays nested too deep") from None
    except ValueError as e:  # a decode error, or a number past Python's digit limit (4,300), raised bare
        from ..config import toml_error
        raise ManifestError(f"{path}: not valid TOML: {toml_error(e)}") from None
    return parse_manifest(data, path.parent.resolve(), str(path))


def parse_manifest(data: dict[str, Any], root: Path, where: str = "bot.toml") -> BotSpec:
    """A validated manifest (:class:`arena.config.BotManifest`) as the spec the launcher runs."""
    from ..config import BOT_TOML_DOC, ConfigFileError, manifest_data
    try:
        m = manifest_data(data, where)
    except ConfigFileError as e:
        raise ManifestError(f"{e} (bot.toml reference: {BOT_TOML_DOC})") from None
    workdir = (root / m.workdir).resolve()
    if not workdir.is_relative_to(root):
        raise ManifestError(f"{where}: workdir must stay inside the bot's directory")
    left_out = sorted(set(workdir.relative_to(root).parts) & SKIP_DIRS)
    if left_out:  # absent from the copy every seat and build runs in: it would fail as an unreadable folder
        raise ManifestError(f"{where}: workdir {m.workdir!r} lies in {left_out[0]}/, which the arena leaves out of "
                            f"the bot ({', '.join(sorted(SKIP_DIRS))} are not part of it, nor of any copy it runs "
                            "from); make workdir a folder of the bot's own files")
    if m.interpreter and m.venv:
        raise ManifestError(f"{where}: give interpreter or venv, not both")
    python = None
    if m.venv:
        venv = (root / m.venv).resolve()
        if m.venv.startswith("/") or not venv.is_relative_to(root):  # nothing is looked up outside
            raise ManifestError(f"{where}: venv must be a folder inside the bot's directory (got {m.venv!r})")
        python = str(venv / "bin" / "python")
        if not (venv / "bin" / "python").exists():
            raise ManifestError(f"{where}: venv {m.venv!r} has no bin/python (create it with: "
                                f"python3 -m venv {m.venv})")
    elif m.interpreter:
        python = m.interpreter if m.interpreter.startswith("/") else str((root / m.interpreter).resolve())
    return BotSpec(name=m.name, version=m.version, command=tuple(m.command), workdir=workdir, root=root,
                   author=m.author, build=tuple(m.build) if m.build else None,
                   limits=m.limits.model_dump(exclude_none=True), env=dict(m.env), python=python,
                   description=m.description)
