"""Finding a game's log: by id in the store, or in a file written by ``arena export --logs``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from ..tournament.store import Store, StoreError
from .simulate import ReplayError


def _is_record(obj: Any) -> bool:
    return isinstance(obj, dict) and "steps" in obj and "seed" in obj and "rules" in obj


def _field(path: Any) -> str:
    """A field's place in a JSON document, as ``log.steps[3].act.cards``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the record itself"


def checked_record(record: dict[str, Any], where: str, prefix: str = "") -> dict[str, Any]:
    """``record`` if it has a game record's shape (protocol/schemas/records/game.schema.json), else
    a ReplayError naming the file and the first field that is wrong. A file is the user's input,
    perhaps edited by hand: a wrong type must be refused here, not fail deep in the replay."""
    import jsonschema
    from ..referee.protocol import validator
    error = jsonschema.exceptions.best_match(validator("records/game").iter_errors(record))
    if error is None:
        return record
    field = _field([*([prefix] if prefix else []), *error.absolute_path])
    message = error.message if len(error.message) <= 200 else error.message[:200] + "..."
    raise ReplayError(f"{where}: not a game record as the arena writes it: {field}: {message}")


def _from_json(obj: Any, where: str) -> dict[str, Any]:
    if _is_record(obj):
        return checked_record(obj, where)
    if isinstance(obj, dict) and "log" in obj:
        if not _is_record(obj["log"]):
            raise ReplayError(f"{where}: the export line has no game log; export with `arena export FILE --logs`")
        return checked_record(obj["log"], where, "log")
    if isinstance(obj, dict) and "id" in obj and "seats" in obj:
        raise ReplayError(f"{where}: the export line has no game log; export with `arena export FILE --logs`")
    raise ReplayError(f"{where}: not a game log (a record with rules, seed and steps) nor an export line with 'log'")


def load_file(path: Path, pick: str | None = None) -> dict[str, Any]:
    """A game record from a JSON file (a record, or an object with ``log``) or a JSONL export."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ReplayError(f"cannot read {path}: {e}") from None
    try:
        return _from_json(json.loads(text), str(path))
    except json.JSONDecodeError:
        pass
    except RecursionError:
        raise ReplayError(f"{path}: not a game record: arrays or objects nested too deep") from None
    rows = []
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append((no, json.loads(line)))
        except json.JSONDecodeError as e:
            raise ReplayError(f"{path}:{no}: not JSON: {e}") from None
        except RecursionError:
            raise ReplayError(f"{path}:{no}: not a game record: arrays or objects nested too deep") from None
    if pick is not None:
        for no, row in rows:
            rec = row.get("log") if isinstance(row, dict) and "log" in row else row
            ids = {row.get("id") if isinstance(row, dict) else None, rec.get("game_id") if isinstance(rec, dict) else None}
            if pick in ids:
                return _from_json(row, f"{path}:{no}")
        raise ReplayError(f"{path}: no game {pick!r} in it")
    if len(rows) == 1:
        return _from_json(rows[0][1], f"{path}:{rows[0][0]}")
    ids = [str(r.get("id", r.get("game_id", "?"))) for _, r in rows if isinstance(r, dict)]
    raise ReplayError(f"{path} holds {len(rows)} games; name one: GAME='{path}#{ids[0] if ids else 'ID'}' "
                      f"(ids: {', '.join(ids[:8])}{' ...' if len(ids) > 8 else ''})")


def load_game(ref: str, store: Path | str) -> dict[str, Any]:
    """``ref`` is a path to an exported game (``FILE.jsonl#GAME_ID`` picks one line) or a game id in the store."""
    path, _, pick = ref.partition("#")
    if Path(ref).is_file():
        return load_file(Path(ref))
    if pick and Path(path).is_file():
        return load_file(Path(path), pick)
    try:
        db = Store(store, readonly=True)
    except StoreError as e:
        raise ReplayError(f"{ref!r} is not a file, and {e}") from None
    try:
        rec = db.game_record(ref)
        if rec is None:
            near = [g["id"] for g in db.games(limit=10**6) if ref in g["id"]][:5]
            hint = f"; did you mean {', '.join(near)}?" if near else "; list games with `arena games`"
            raise ReplayError(f"no game {ref!r} in {store}{hint}")
        return rec
    except (StoreError, sqlite3.DatabaseError) as e:
        raise ReplayError(f"{store}: {e}") from None
    finally:
        db.close()
