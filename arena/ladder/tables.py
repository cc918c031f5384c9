"""What a ladder keeps in the game store, beside its games.

* ``ladders`` - the settings that decide what a game *is* (rules, options, seats), recorded on
  first use, so a ladder whose file later changes them is refused instead of silently mixing two
  games in one rating pool;
* ``ladder_members`` - who is on the ladder: label (name@version), files hash, where its copy of
  the bot's files is (relative to the store directory, so a copied store still finds them), when it
  joined and which tournament placed it;
* ``ladder_bot_status`` - members taken out of matchmaking: ``retired`` by the operator or
  ``suspended`` after repeated faults (with the last stderr lines);
* ``rating_snapshots`` - the fitted table over time (schema shared with ``arena serve``);
* ``ladder_views`` - when ``arena ladder NAME`` was last shown, for "games since the last view".

Every game is a normal game of a normal tournament whose id starts with ``ladder:<name>:``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from ..bots.launch import ARENA_COPIES
from ..bots.folder import V3, FolderError, copy_folder, read_folder
from ..bots.manifest import BotSpec, ManifestError, load_bot
from ..store import ladders
from ..store.games import game_results
from ..store.notes import Kind
from ..store.reads import member_refs
from ..tournament.store import Store
from .config import Ladder, LadderError, ladder_toml

@dataclass
class Member:
    ladder: str
    label: str
    name: str
    version: str
    hash: str
    ref: str
    origin: str
    placement: str
    registered: float


def open_store(ladder: Ladder, path: str | Path | None = None) -> Store:
    """The ladder's store (``path`` overrides the file's); its ladder tables come with the schema."""
    return Store(path or ladder.store)


def _has_tables(store: Store) -> bool:
    return ladders.has_ladder_tables(store.db)


def members(store: Store, ladder: str) -> list[Member]:
    if not _has_tables(store):
        return []
    return [Member(*r[:5], resolve_ref(store, r.ref), *r[6:]) for r in ladders.member_rows(store.db, ladder)]


def store_dir(store: Store) -> Path:
    return store.path.resolve().parent


def resolve_ref(store: Store, ref: str) -> str:
    """A stored bot reference as a loadable one: bundled names stay names; a relative path is
    relative to the store directory; an absolute path into a ``ladder-bots`` copy that no longer
    exists (the store was moved) is looked up under this store's ``ladder-bots``."""
    if "/" not in ref and not ref.endswith(".toml"):
        return ref
    p = Path(ref)
    if not p.is_absolute():
        return str(store_dir(store) / p)
    if not p.exists() and "ladder-bots" in p.parts:
        moved = store_dir(store).joinpath(*p.parts[p.parts.index("ladder-bots"):])
        if moved.exists():
            return str(moved)
    return ref


def _stored_ref(store: Store, ref: str) -> str:
    """What ``ladder_members.ref`` holds: a path inside the store directory is kept relative to it."""
    p = Path(ref)
    if p.is_absolute():
        try:
            return str(p.resolve().relative_to(store_dir(store)))
        except ValueError:
            pass
    return ref


def member(store: Store, ladder: str, label: str) -> Member | None:
    return next((m for m in members(store, ladder) if m.label == label), None)


def _add_member(store: Store, ladder: Ladder, spec: BotSpec, origin: str, placement: str,
                say: Callable[[str], None] = lambda text: None) -> Member:
    """Register ``spec`` (a snapshot of its files is what the ladder runs from then on); an existing
    member with the same files is returned as is, one with other files is refused."""
    digest = spec.files_hash()
    m = member(store, ladder.name, spec.label)
    if m is None:
        ref = _snapshot(store, ladder, spec, digest)  # bots run from it (arena.bots.launch.runnable)
        # a concurrent insert of the same label is fine if the files match
        ladders.add_member(store.db, ladders.MemberRow(ladder.name, spec.label, spec.name, spec.version, digest,
                                             _stored_ref(store, ref), origin, placement, time.time()))
        m = member(store, ladder.name, spec.label)
        assert m is not None
    m = _rehash(store, m)
    if m.hash != digest:
        raise LadderError(_bump_message(ladder, m, digest))
    return m


def verified_spec(m: Member) -> BotSpec | None:
    """The member's bot as its snapshot holds it now, or None where the files are missing or no
    longer what it joined with (its label or files hash differ): such a member is never played."""
    try:
        spec = load_bot(m.ref)
        return spec if spec.label == m.label and spec.has_files(m.hash) else None
    except (ManifestError, OSError):
        return None


def _rehash(store: Store, m: Member) -> Member:
    """A member stored with an older files hash (unframed v1, or v2 without modes and folders),
    given the v3 hash of its own snapshot where that snapshot still verifies against the stored
    hash: another folder that splits the same bytes differently, or differs in an executable bit or
    an empty folder (and so shares the old hash), is then told apart. A member whose snapshot does
    not verify keeps its hash, which no new reading equals."""
    if m.hash.startswith(V3):
        return m
    own = verified_spec(m)
    try:
        if own is None:
            return m
        digest = own.files_hash()
    except (ManifestError, OSError):
        return m
    ladders.rehash_member(store.db, m.ladder, m.label, m.hash, digest)
    return member(store, m.ladder, m.label) or m


SNAPSHOT_KEEP = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.@-")
SNAPSHOT_NAME_MAX = 200  # bytes; a file name may have 255


def snapshot_name(label: str) -> str:
    """The folder name of a label's snapshot: the label with every byte outside ``[a-z0-9.@-]``
    written ``%XX`` (``_``, ``%`` and capitals too), so two labels never share a folder, even on a
    disk that ignores case (macOS, a casefold folder), and no name is one the lossy map of older
    stores (``+`` to ``_``) gave another label. A very long label keeps a prefix and its sha256
    (``%~`` never occurs in an escaped name)."""
    out = "".join(c if c in SNAPSHOT_KEEP else "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass"))
                  for c in label)
    if len(out) > SNAPSHOT_NAME_MAX:
        out = out[:120] + "%~" + hashlib.sha256(label.encode("utf-8", "surrogatepass")).hexdigest()
    return out


def snapshot_dir(store: Store, ladder: Ladder, label: str) -> Path:
    return store.path.resolve().parent / "ladder-bots" / ladder.name / snapshot_name(label)


def _owner(store: Store, folder: Path) -> str | None:
    """The label of the member of any ladder in ``store`` that runs from ``folder``, if one does.
    Folders are compared by identity (device and inode), not by their paths' text: a member's
    folder reached by another spelling (a bind mount, a disk that ignores case) is still its own."""
    if not _has_tables(store):
        return None
    for label, ref in member_refs(store.db):
        if "/" in ref and _same_file(resolve_ref(store, ref), folder):
            return label
    return None


def _same_file(a: str | Path, b: str | Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them is gone: not the same folder
        return False


def _snapshot(store: Store, ladder: Ladder, spec: BotSpec, digest: str) -> str:
    """Copy the bot's directory next to the store, so a member keeps playing exactly the files it
    joined with even after its author edits them in place (for the next version). The copy is
    made by the one reader of bot folders (links stay links, inside the folder), checked against
    ``digest``; another member's folder is never removed or replaced."""
    data_dir = store.path.resolve().parent
    if data_dir.is_relative_to(spec.root.resolve()):
        raise LadderError(f"{spec.label}: its folder {spec.root} holds the store {store.path}; a bot folder "
                          "may not hold the store (its secret would become the bot's file)")
    dest = snapshot_dir(store, ladder, spec.label)
    owner = _owner(store, dest) if dest.exists() else None
    if owner is not None and owner != spec.label:
        raise LadderError(f"{spec.label}: its folder {dest} belongs to the member {owner}; nothing was changed")
    if dest.exists():
        try:
            if load_bot(dest).files_hash() == digest:
                return str(dest)
        except ManifestError:
            pass
        if owner is not None:  # this label's own member with other files: never replaced
            raise LadderError(f"{spec.label}: the ladder's copy at {dest} differs from {spec.root}; nothing "
                              "was changed")
        shutil.rmtree(dest)  # left by an attempt that never registered (members are checked first)
    dest.parent.mkdir(parents=True, exist_ok=True)
    (dest.parent.parent / ARENA_COPIES).touch()  # contained bots run from a readable copy of these
    tmp = dest.with_name(f"{dest.name}%partial-{os.getpid()}")  # '%p' is in no snapshot's name
    shutil.rmtree(tmp, ignore_errors=True)  # this process's own leftover
    try:
        folder = read_folder(spec.root)
        if folder.digest != digest:
            raise FolderError(f"{spec.root}: {spec.label}'s files changed while submitting; submit again")
        copy_folder(folder, tmp)
        os.replace(tmp, dest)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if not dest.exists():
            raise LadderError(f"could not copy {spec.label} from {spec.root} to {dest}: {e}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    copy = load_bot(dest)
    if copy.files_hash() != digest or copy.label != spec.label:
        raise LadderError(f"the copy of {spec.label} at {dest} differs from {spec.root} (files changed while "
                          "submitting?); submit again")
    return str(dest)


def _bump_message(ladder: Ladder, m: Member, digest: str) -> str:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(m.registered))
    return (f"{m.label} is already on ladder {ladder.name} (registered {when}, files {m.hash[:12]}) and these "
            f"files differ ({digest[:12]}); a label names one exact bot, so bump `version` in its bot.toml "
            f"to submit the changed bot as a new entry")


def check_identity(store: Store, ladder: Ladder) -> None:
    """Record the ladder's rules on first use; refuse a ladder file that changed them since."""
    now = ladder.identity()
    before = ladders.ladder_identity(store.db, ladder.name, now, time.time())
    # options the engine gained since (absent from the record) are not a change of the ladder's rules
    changed = [f"rules.{k}" for k in now["rules"] if k in before["rules"] and before["rules"][k] != now["rules"][k]]
    if before["seats"] != now["seats"]:
        changed.append("seats")
    if changed:
        raise LadderError(f"ladder {ladder.name}: the file changes {', '.join(changed)} since its games in "
                          f"{store.path} were played; games under other rules cannot share one rating pool - "
                          f"make a new ladder file (or use another --store)")


def ladder_results(store: Store, ladder: Ladder) -> list[tuple[list[str], dict[str, Any]]]:
    """(seats, result) of every game of every tournament of the ladder, in a stable order."""
    return [(g.seats, g.result) for g in game_results(store.db, prefix=ladder.prefix)]


def rebase_refs(store: Store, tid: str, stored: list[str]) -> list[str]:
    """Bot refs of a stored (unfinished) tournament, as this machine loads them; when the store was
    moved since, the tournament's recorded config is updated to match so that it resumes."""
    refs = [resolve_ref(store, r) for r in stored]
    if refs != stored:
        t = store.tournament(tid)
        assert t is not None
        config = t["config"]
        moved = dict(zip(stored, refs))
        for key in ("bots", "candidates"):
            config[key] = [moved.get(r, resolve_ref(store, r)) for r in config.get(key, [])]
        store.set_config(tid, config)
    return refs


def keep_ladder_file(store: Store, ladder: Ladder) -> Path:
    """Write the ladder's file into the store directory (``ladders/NAME.toml``), its initial bots
    pointing at the store's copies of their files, so the store directory alone is the ladder."""
    by_label: dict[str, str] = {}
    for m in members(store, ladder.name):
        by_label[m.label] = m.ref
    bots = []
    for ref in ladder.bots:
        try:
            label = load_bot(ref).label
        except (ManifestError, OSError):
            label = None
        kept = by_label.get(label or "")
        bots.append(os.path.relpath(kept, store_dir(store) / "ladders") if kept and "/" in kept else ref)
    dest = store_dir(store) / "ladders" / f"{ladder.name}.toml"
    suite = ""
    if ladder.suite:  # a copy beside the file (0600 in the closed store directory), so the store alone plays it
        from ..tournament.suites import save_suite
        suite = f"{ladder.name}.suite.json"
        kept = dest.parent / suite
        if Path(ladder.suite).resolve() != kept.resolve():
            dest.parent.mkdir(parents=True, exist_ok=True)
            save_suite(kept, ladder.deal_suite())
    text = ladder_toml(ladder, bots, suite)
    if not dest.is_file() or dest.read_text(encoding="utf-8") != text:
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, dest)
    return dest


# --------------------------------------------------------------------------- retired and suspended bots

class MemberStatus(StrEnum):
    """Whether a member is in matchmaking; the store keeps only the other two (``ladder_bot_status``)."""

    ACTIVE = "active"
    RETIRED = "retired"  # by the operator
    SUSPENDED = "suspended"  # by the ladder: its files changed, or it faulted game after game


@dataclass
class BotStatus:
    label: str
    status: MemberStatus  # retired or suspended
    since: float
    reason: str
    detail: dict[str, Any]


def bot_statuses(store: Store, ladder: str) -> dict[str, BotStatus]:
    """Members out of matchmaking, by label (a bot not listed is active)."""
    if not _has_tables(store):
        return {}
    return {r.label: BotStatus(r.label, MemberStatus(r.status), r.since, r.reason, r.detail)
            for r in ladders.status_rows(store.db, ladder)}


@dataclass(frozen=True)
class Actor:
    """Who changed a ladder, for the audit: an account (None: the server's terminal) and from where."""

    account: int | None = None
    origin: str = "terminal"


def set_status(store: Store, ladder: str, label: str, status: MemberStatus, reason: str,
               detail: dict[str, Any] | None = None, by: Actor = Actor()) -> None:
    """Retire or suspend a member; its owner (on a club server) is told why, and the audit keeps
    who did it, in the same transaction."""
    detail = detail or {}
    kind = Kind.SUSPENDED if status == MemberStatus.SUSPENDED else Kind.RETIRED
    ladders.set_status(store.db, ladder, label, status.value, reason, detail, account=by.account, origin=by.origin,
                  action="suspend" if status == MemberStatus.SUSPENDED else "retire", kind=kind,
                  text=f"{label} was {kind.value} on ladder {ladder}: {reason}",
                  link=_fault_link(detail) or f"/bots/{label}", now=time.time())


def _fault_link(detail: dict[str, Any]) -> str:
    """The replay of the game a suspension was decided on, at the fault's turn, as its seat saw it."""
    game = detail.get("last_game")
    if not game:
        return ""
    turn, seat = detail.get("last_turn"), detail.get("last_seat")
    return f"/games/{game}" + (f"#t{turn}" + (f"/s{seat}" if isinstance(seat, int) else "")
                               if isinstance(turn, int) else "")


def clear_status(store: Store, ladder: str, label: str, by: Actor = Actor()) -> bool:
    """Put a retired or suspended member back in matchmaking (its owner is told; audited)."""
    return ladders.clear_status(store.db, ladder, label, account=by.account, origin=by.origin,
                           text=f"{label} is back in play on ladder {ladder}", link=f"/bots/{label}", now=time.time())


def reinstated_after(store: Store, ladder: str, label: str) -> int:
    """The last game row stored when ``label`` was last reinstated on ``ladder`` (0: never): only
    faults after it count towards suspending it again."""
    return ladders.reinstated_after(store.db, ladder, label)


# --------------------------------------------------------------------------- paused ladders

def pause(store: Store, ladder: str, reason: str, by: Actor = Actor()) -> None:
    """Pause ``ladder``: ``arena ladder run`` plays no new batch until it is resumed (audited)."""
    ladders.pause(store.db, ladder, reason, account=by.account, origin=by.origin, now=time.time())


def resume(store: Store, ladder: str, by: Actor = Actor()) -> bool:
    """Resume a paused ladder; False when it was not paused."""
    return ladders.resume(store.db, ladder, account=by.account, origin=by.origin, now=time.time())


def paused(store: Store, ladder: str) -> str | None:
    """Why ``ladder`` is paused, or None when it plays."""
    return ladders.paused(store.db, ladder)


def roster(store: Store) -> dict[str, Any]:
    """Every ladder's members with their status and owner, and the paused ladders: the admin's view."""
    return ladders.roster(store.db)
