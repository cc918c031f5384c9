"""Deal seeds that no bot can predict: HMAC of a secret kept in the store.

A deal seed used to be ``sha256("palace:{base}:{table}:{deal}")`` with a public
base seed, so any bot could rebuild every deal (its opponents' face-down cards,
the stock order) with the engine's own ``start_game``. Now the operator's seed
still names the deals (the same store and ``--seed`` give the same games, and
``arena replay`` reads the seed from the record) but the bytes that turn it
into cards are a secret bots never see:

* with a store, ``<store dir>/secret.key``: 32 random bytes, created once,
  mode 0600 (the directory 0700 when we create it), so every run on that store
  deals the same cards for the same seed;
* without a store, :func:`run_secret`: fresh random bytes for this run only.

Game records keep the deal seed they were played with; they are the operator's
(the store is closed to bots), which is what makes a replay possible.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

from ..store.games import add_secret, deal_secret
from .store import StoreError

SECRET_FILE = "secret.key"
SECRET_BYTES = 32


class SecretError(StoreError):
    """The store's secret cannot be read or made safely; the message says how to fix it."""


def run_secret() -> bytes:
    """A secret for a run that has no store: its deals cannot be played again, nor guessed."""
    return os.urandom(SECRET_BYTES)


def load_secret(store_dir: str | Path) -> bytes:
    """The store's secret, created on first use.

    Creation is atomic and exclusive: the bytes are written to a private temporary
    file (``O_CREAT|O_EXCL``, 0600) that is then hard-linked to ``secret.key``, which
    fails if another process got there first; both then read the same secret. A key
    that others can read, or that is not ours, is refused rather than used: a bot
    that could read it could deal every game itself."""
    root = Path(store_dir)
    path = root / SECRET_FILE
    if not root.exists():
        try:
            root.mkdir(mode=0o700, parents=True)
        except FileExistsError:
            pass
    if not path.exists():
        _create(path)
    return _read(path)


def _create(path: Path) -> None:
    tmp = path.with_name(f".{SECRET_FILE}.{os.getpid()}.{os.urandom(4).hex()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError as e:
        raise SecretError(f"cannot create the deal secret in {path.parent}: {e.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(os.urandom(SECRET_BYTES))
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another run made it first: use theirs
    finally:
        tmp.unlink(missing_ok=True)


def _read(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        raise SecretError(f"cannot read the deal secret {path}: {e.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise SecretError(f"{path} must belong to uid {os.geteuid()} with mode 0600 (it is "
                              f"{st.st_mode & 0o777:04o}, uid {st.st_uid}): if no one else read it, "
                              f"fix it with: chmod 600 {path}")
        data = fh.read(SECRET_BYTES + 1)
    if len(data) != SECRET_BYTES:
        raise SecretError(f"{path} holds {len(data)} bytes, not {SECRET_BYTES}: it is damaged; the games "
                          "already stored keep their seeds, but the same seeds cannot be dealt again")
    return data


def deal_seed(secret: bytes, base: int, table: int, deal: int) -> int:
    """A 63-bit deal seed from the secret and the public (base seed, table, deal).

    HMAC-SHA256 rather than a plain hash: knowing every public input and any number
    of other deal seeds tells nothing about this one without the secret."""
    msg = f"palace-deal:{base}:{table}:{deal}".encode()
    return int.from_bytes(hmac.new(secret, msg, hashlib.sha256).digest()[:8], "big") >> 1


def ladder_batch_seed(ladder: str, seed: int, batch: int) -> int:
    """The public base seed of a ladder run's batch ``batch``: every batch deals new cards, and
    anyone can recompute it (a season's verifier checks that no batch picked its own)."""
    digest = hashlib.sha256(f"palace-ladder:{ladder}:{seed}:{batch}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1


def ladder_tournament_seed(tournament: str, seed: int) -> int:
    """The public base seed of a ladder's own tournament (its seeding round-robin, a placement): one
    of its own, from its id, so no two of them deal the same cards, nor any tournament an operator
    seeds with a number of its own. With the ladder's seed as every placement's base, placement table
    t dealt the cards of the seeding round-robin's table t and of every earlier placement's, whose
    ends (and stored games) show every card: a bot shipped with those deals read its opponents'
    hidden cards through its whole placement."""
    digest = hashlib.sha256(f"palace-ladder-tournament:{tournament}:{seed}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def stage_deal_seed(secret: bytes, base: int, stage: int, deal: int, table: int | None = None) -> int:
    """The deal seed of a staged tournament's stage (a Swiss round, a knockout round, a heat):
    one set of deals for every table of the stage (duplicate deals), apart from any table's; with
    ``table``, that table's own (strangers' tables: formats._games)."""
    msg = f"palace-stage-deal:{base}:{stage}:{deal}{'' if table is None else f':{table}'}".encode()
    return int.from_bytes(hmac.new(secret, msg, hashlib.sha256).digest()[:8], "big") >> 1


# --------------------------------------------------------------------------- named, committed secrets

def commitment(secret: bytes) -> str:
    """What is published before a secret is used: its sha256. 32 random bytes cannot be found
    from it, and no other secret has it, so the games dealt later were fixed when it was shown."""
    return hashlib.sha256(secret).hexdigest()


def make_named_secret(store, name: str) -> str:
    """A fresh secret kept in the store as ``name`` (a season's deals); returns its commitment."""
    import time
    secret = os.urandom(SECRET_BYTES)
    add_secret(store.db, name, secret, commitment(secret), time.time())
    return commitment(secret)


def named_secret(store, name: str) -> bytes:
    """The secret a tournament with ``deal_secret = name`` deals from; refused if the store lacks it."""
    secret = deal_secret(store.db, name)
    if secret is None:
        raise SecretError(f"the store {store.path} has no deal secret {name!r}: the games that use it cannot be dealt")
    return secret
