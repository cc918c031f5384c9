"""A course's bench: each member plays only the reference bots, on the same duplicate deals.

A bench is one gauntlet per member (``BENCH/MEMBER``), every one with the same seed, so table
``t`` deal ``d`` is dealt from the same seed for every member: member A's third game against the
reference bots is member B's third game, card for card. A member is graded on its own games
only, so a member added late plays its games alone and changes no one's grade. At the deadline
(its first run after it) each member's folder is copied to the bench's snapshot folder and the
copies are played: what a member changes after the deadline is not graded. A bench may also
take its members from a ladder: the active version of each of its bots at the deadline.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..safetext import printable
from .config import ConfigError, TournamentConfig, _resolve, load_config
from .formats import points


@dataclass(frozen=True)
class Bench:
    name: str
    references: list[str]
    members: list[str]
    deadline: dt.datetime | None
    bands: dict[str, float]
    store: str
    shared: dict[str, Any] = field(default_factory=dict)  # rules, seats, deals, seed, clock: for every gauntlet
    ladder: str = ""  # members also taken from this ladder's active versions at the deadline
    ladder_store: str = ""  # the store that holds it


def load_bench(path: str | Path) -> Bench:
    from ..config import ConfigFileError, bench_data, read_toml
    p = Path(path)
    try:
        data = bench_data(read_toml(p, "bench file"), str(p))
    except ConfigFileError as e:
        raise ConfigError(str(e)) from None
    deadline = None
    if data.get("deadline"):
        try:
            deadline = dt.datetime.fromisoformat(data["deadline"])
        except ValueError:
            raise ConfigError(f"{p}: deadline: {data['deadline']!r} is not an ISO 8601 time") from None
        if deadline.tzinfo is None:
            raise ConfigError(f"{p}: deadline: give its zone (e.g. {data['deadline']}Z): a course spans time zones")
    members = [_resolve(m, p.parent) for m in data.get("members", [])]
    for m in members:
        if not Path(m).is_dir():
            raise ConfigError(f"{p}: members: {m} is not a bot folder")
    shared = {k: v for k, v in data.items()
              if k not in ("name", "references", "members", "deadline", "bands", "store", "ladder", "ladder_store")}
    store = str(p.parent / data["store"]) if "store" in data else "arena-data/arena.sqlite"
    return Bench(data.get("name", p.stem), [_resolve(r, p.parent) for r in data["references"]], members,
                 deadline, dict(data.get("bands", {"pass": 0.5, "fail": 0.0})), store, shared,
                 data.get("ladder", ""), str(p.parent / data["ladder_store"]) if "ladder_store" in data else store)


def snapshot_dir(bench: Bench) -> Path:
    return Path(bench.store).parent / "bench" / bench.name


@dataclass(frozen=True)
class Refused:
    """A member the bench does not play, and why: one student's folder never stops the others' grading."""

    member: str  # its folder, as the bench file (or the ladder) names it
    why: str


def snapshot(bench: Bench, now: dt.datetime, from_ladder: Callable[[Bench], list[str]] | None = None,
             refused: list[Refused] | None = None) -> list[str]:
    """The folders to play: before the deadline, nothing (an error); at or after it, copies of the
    members' folders, taken once. A bench without a deadline plays the folders as they are.

    With a ``ladder``, ``from_ladder`` gives its active versions' folders; the list taken at the
    first run after the deadline is kept beside the copies, so a later change to the ladder
    changes no member.

    A member's folder the reader refuses (a FIFO, a file too large, ...) is a :class:`ConfigError`
    naming it; with ``refused``, it goes there instead and the others are copied. A refusal at the
    deadline is kept beside the copies (``.refused``), so a folder fixed after the deadline is
    still not played; remove that file to take the folder again."""
    if bench.deadline is None:
        return list(bench.members)
    if now < bench.deadline:
        raise ConfigError(f"bench {bench.name}: its deadline is {bench.deadline.isoformat()}; nothing is played before it")
    root = snapshot_dir(bench)
    root.mkdir(parents=True, exist_ok=True)
    folders = list(bench.members)
    if bench.ladder:
        taken = root / "ladder.json"
        if not taken.exists():
            if from_ladder is None:
                raise ConfigError(f"bench {bench.name}: its members come from ladder {bench.ladder}, which was not read")
            tmp = root / ".ladder.json.tmp"
            tmp.write_text(json.dumps(from_ladder(bench)))
            tmp.rename(taken)  # the members as they were at the deadline, whole or not at all
        folders += json.loads(taken.read_text())
    from ..bots.folder import ARENA_COPIES, FolderError, copy_folder, read_folder
    (root / ARENA_COPIES).touch()  # the arena's own copies: a root referee seats each from a sealed copy of it
    out = []
    for i, m in enumerate(folders):
        copy = root / f"{i}-{Path(m).name}"
        marker = copy.with_name(copy.name + ".refused")
        if not copy.exists():
            if marker.is_file():
                why = marker.read_text(encoding="utf-8", errors="replace")
            else:
                tmp = root / f".{copy.name}.tmp"
                shutil.rmtree(tmp, ignore_errors=True)
                try:  # the one folder reader: caps, no special files, sparse files counted, links kept inside
                    copy_folder(read_folder(Path(m)), tmp)
                    tmp.rename(copy)  # whole or not at all: a killed copy is taken again
                    out.append(str(copy))
                    continue
                except FolderError as e:
                    shutil.rmtree(tmp, ignore_errors=True)
                    why = str(e)
                    if refused is not None:
                        _write_whole(marker, why)
            if refused is None:
                raise ConfigError(f"bench {bench.name}: member {m}: {why}")
            refused.append(Refused(m, why))
            continue
        out.append(str(copy))
    root.chmod(0o755)
    return out


def _write_whole(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.rename(path)


def member_config(bench: Bench, folder: str, label: str, overrides: dict[str, Any] | None = None) -> TournamentConfig:
    """The member's gauntlet: the references as the field, the same seed and deals for all."""
    return load_config(None, {**bench.shared, **(overrides or {}), "name": f"{bench.name}/{label}",
                              "format": "gauntlet", "bots": bench.references, "candidates": [folder],
                              "store": bench.store})


async def run_bench(bench: Bench, store: Any, *, now: dt.datetime, overrides: dict[str, Any] | None = None,
                    launcher: Callable | None = None,
                    from_ladder: Callable[[Bench], list[str]] | None = None,
                    refused: list[Refused] | None = None) -> list[str]:
    """Play every member's games the store does not hold yet; returns the members' labels.

    A member that cannot be played is a :class:`ConfigError` before any game; with ``refused``, it
    goes there (:class:`Refused`) and the others play: a folder the reader refuses, a manifest
    that does not load, a bot labelled as a reference bot, or as another member's bot (each member
    sharing a label is refused, naming the others: the games of one label are one member's)."""
    from ..bots.manifest import ManifestError, load_bot
    from .run import run_tournament
    out: list[Refused] = [] if refused is None else refused
    found = []
    for folder in snapshot(bench, now, from_ladder, out):
        try:
            spec = load_bot(folder)
            spec.files_hash()  # read here: a bench without a deadline plays the folders as they are
            found.append((folder, spec.label))
        except (ManifestError, OSError) as e:
            out.append(Refused(folder, str(e)))
    references = {load_bot(r).label for r in bench.references}  # the organiser's: an error stops the bench
    playable = []
    for folder, label in found:
        others = [f for f, other in found if other == label and f != folder]
        if label in references:
            out.append(Refused(folder, f"its bot is {label}, a reference bot of the bench: give it its own name"))
        elif others:
            out.append(Refused(folder, f"its bot is {label}, as the bot of {', '.join(others)} is: give each bot "
                                       "its own name"))
        else:
            try:
                playable.append((label, member_config(bench, folder, label, overrides)))
            except ConfigError as e:
                out.append(Refused(folder, str(e)))
    if refused is None and out:
        raise ConfigError(f"bench {bench.name}: member {out[0].member}: {out[0].why}")
    for _, config in playable:
        await run_tournament(config, store, launcher=launcher, collect=False)
    return [label for label, _ in playable]


@dataclass(frozen=True)
class Grade:
    member: str
    games: int
    score: float  # the share of the points it could take, 0 to 1
    by_reference: dict[str, float]  # the same, at the tables each reference sat at
    grade: str


def grade_of(score: float, bands: dict[str, float]) -> str:
    """The band with the highest floor the score reaches; below every floor: the lowest band."""
    reached = [(floor, name) for name, floor in bands.items() if score >= floor]
    return max(reached)[1] if reached else min((floor, name) for name, floor in bands.items())[1]


def grades(bench: Bench, store: Any, labels: list[str]) -> list[Grade]:
    out = []
    for label in labels:
        games = store.games(tournament=f"{bench.name}/{label}", limit=2**62)
        got = most = 0.0
        ref_got: dict[str, float] = {}
        ref_most: dict[str, float] = {}
        for g in games:
            seats = g["seats"]
            mine = points(seats, g["result"])[label]
            got += mine
            most += len(seats) - 1
            for other in seats:
                if other != label:
                    ref_got[other] = ref_got.get(other, 0.0) + mine
                    ref_most[other] = ref_most.get(other, 0.0) + len(seats) - 1
        score = got / most if most else 0.0
        out.append(Grade(label, len(games), score, {r: ref_got[r] / ref_most[r] for r in sorted(ref_got)},
                         grade_of(score, bench.bands)))
    return out


def write_csv(path: Path, rows: list[Grade], refused: Sequence[Refused] = ()) -> None:
    """The grades, then a row per member not played (its folder, grade ``not graded: why``)."""
    refs = sorted({r for g in rows for r in g.by_reference})
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["member", "games", "score", *[f"vs {r}" for r in refs], "grade"])
        for g in rows:
            w.writerow([g.member, g.games, f"{g.score:.3f}",
                        *[f"{g.by_reference[r]:.3f}" if r in g.by_reference else "" for r in refs], g.grade])
        for r in refused:  # (a reason names the member's files, whose names are the member's: shown escaped)
            w.writerow([printable(r.member), 0, "", *["" for _ in refs], f"not graded: {printable(r.why)}"])
