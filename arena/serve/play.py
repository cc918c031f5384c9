"""Play: a person takes a seat against bots in the browser.

The seat is a :class:`WebPlayer`, a person's seat at the blocking referee's table: the
referee sends it exactly the ``start``, ``request`` and ``end`` messages a bot
in that seat would get, and the page draws only those (it also shows them raw).
The game runs on a thread of its own (:func:`arena.referee.blocking.in_thread`); the
seat hands each message to the server's loop and waits there for the person's answer.
Nothing else about the game reaches the browser while it is played. The game is
stored like ``arena play`` stores one (tournament ``play``), and its replay
opens once it is over.
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..bots.blocking import Interrupted
from ..bots.manifest import HUMAN, ManifestError, bundled_bots, load_bot
from ..engine import PRESETS, RulesError, rules_from
from ..faults import Timeout
from ..referee import TimeControl
from ..referee.blocking import BlockingPlayer, PersonSeat, blocking_launch, in_thread
from ..referee.blocking import play_game as referee_play
from ..replay.view import Names, describe_action, describe_event, result_text
from ..store import reads
from . import guard
from .limits import LimitedBody, TooLarge, client_of
from .pages import redirect, render

log = logging.getLogger("arena.serve")

IDLE_S = 300  # a person who leaves forfeits after this long without a move
GAME_S = 3600  # ... and a person still at the table this long after the game began: a game's places are few
# A chosen seed names a deal through the store's secret, as every game's does, at a table number
# no tournament uses: a person who knows the seed (or a tournament's, whose replays are public)
# cannot compute the bots' cards.
PLAY_TABLE = -1
MAX_SESSIONS = 4  # games in play at once (each runs bot processes)
PER_PLAYER = 1  # ... of which one person (an account, else an address) plays at most this many
MOVE_BYTES = 1024  # a move's body, {"request": N, "action": N}: read whole into memory, exempt from the write limit
KEEP_S = 3600  # finished sessions stay readable this long


@dataclass
class Session:
    """One browser game: the messages the person's seat was sent, and the answers coming back."""

    id: str
    seat: int
    names: list[str]
    player: str = ""  # who started it: 'account:ID', or 'address:ADDR' (PER_PLAYER)
    ends_at: float = math.inf  # the trio time by which the person's seat has played or forfeits (GAME_S)
    messages: list[dict[str, Any]] = field(default_factory=list)
    status: str = "starting"  # playing, over, failed
    game_id: str = ""
    stored: bool = False
    error: str = ""
    ended: float | None = None
    final: dict[str, Any] | None = None  # the person's view of the board once the game is over
    changed: trio.Event = field(default_factory=trio.Event)
    answers: tuple = field(default_factory=lambda: trio.open_memory_channel(16))

    def push(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self.touch()

    def touch(self) -> None:
        changed, self.changed = self.changed, trio.Event()
        changed.set()

    def finish(self, status: str, error: str = "") -> None:
        self.status, self.error, self.ended = status, error, time.time()
        self.touch()


class WebPlayer(PersonSeat):
    """A person in the browser (see the module docstring). Waits up to ``idle_s`` per move, and
    no later than the session's ``ends_at``, then forfeits like a bot that timed out, and the bots
    play the game to its end: one holder of the server's token kept all four places for days
    (15 minutes a move, 10,000 turns). Called on the game's thread; the session is only touched
    on the server's loop."""

    def __init__(self, session: Session, idle_s: float = IDLE_S):
        self.name = HUMAN.name
        self.session = session
        self.idle_s = idle_s
        self.why = ""  # why the last wait ended with no move

    def _started(self, message: dict[str, Any]) -> None:
        self.session.status = "playing"
        self.session.push(message)

    def begin(self, message: dict[str, Any]) -> None:
        trio.from_thread.run_sync(self._started, message)

    def choose(self, message: dict[str, Any], timeout: float) -> int:
        try:
            choice = trio.from_thread.run(self._answer, message)
        except trio.Cancelled:  # the server is stopping: no forfeit, the game is dropped
            raise Interrupted from None
        if choice is None:
            raise Timeout(self.why)
        return choice

    async def _answer(self, message: dict[str, Any]) -> int | None:
        """The person's choice for ``message`` (one of its actions), or None after ``idle_s``."""
        self.session.push(message)
        receive = self.session.answers[1]
        left = self.session.ends_at - trio.current_time()
        with trio.move_on_after(max(0.0, min(self.idle_s, left))):
            while True:
                request_id, choice = await receive.receive()
                if request_id == message["id"] and 0 <= choice < len(message["actions"]):
                    return choice
        self.why = (f"no move within {_span(self.idle_s)}" if self.idle_s < left else
                    f"the game was still on after {_span(GAME_S)}, the most a browser game may last")
        return None

    def finish(self, message: dict[str, Any]) -> None:
        trio.from_thread.run_sync(self.session.push, message)

    def fault(self, reason: str, message: str, request_id: int | None) -> None:
        from ..referee.protocol import error
        trio.from_thread.run_sync(self.session.push, error(reason, message, request_id))


def _span(seconds: float) -> str:
    return f"{seconds / 60:g} minutes" if seconds >= 60 else f"{seconds:g} s"


def annotate(message: dict[str, Any], who: Names) -> dict[str, Any]:
    """The message as sent, with sentences for its events and actions (made from the message alone)."""
    out: dict[str, Any] = {"raw": message}
    if message.get("events"):
        out["events"] = [describe_event(e, who)[0] for e in message["events"]]
    if message.get("type") == "request":
        out["actions"] = [describe_action(a, who) for a in message["actions"]]
    if message.get("type") == "end":
        out["result"] = result_text(message["result"], who)
    return out


def _save(store: Path, labels: list[str], record: dict[str, Any]) -> None:
    from ..tournament.store import Store
    db = Store(store)
    try:
        db.begin_tournament("play", {"kind": "single games"}, 0)
        while True:  # another process may take the same index: try the next one
            idx = 1 + max(db.done_indexes("play"), default=0)
            if db.save_game("play", idx, labels, record) or db.game_record(record["game_id"]) is not None:
                return
    finally:
        db.close()


async def play_game(app: Starlette, session: Session, specs: list, rules: Any, seed: int, clock: TimeControl,
                    max_turns: int, launcher: Any = None) -> None:
    """Play the game; ``launcher`` starts the bots (:func:`members_launcher`: the sandbox of the
    ladders whose members are seated; the default's for bundled bots only)."""
    from ..bots.launch import Launcher
    from ..tournament.seeds import deal_seed, load_secret
    launch = blocking_launch(launcher or Launcher())
    session.ends_at = trio.current_time() + GAME_S
    players: list[Any] = [WebPlayer(session, IDLE_S) if s.human else BlockingPlayer(s, launch, clock) for s in specs]
    session.game_id = f"play-{int(time.time() * 1000)}-{secrets.token_hex(2)}"

    def play() -> Any:
        try:
            return referee_play(players, rules, dealt, game_id=session.game_id, clock=clock, max_turns=max_turns)
        finally:  # the game's thread settles their grace (in_thread)
            for p in players:
                p.shutdown()

    try:
        dealt = deal_seed(load_secret(Path(app.state.options.store).parent), seed, PLAY_TABLE, 0)
        record = await in_thread(play)
        session.final = final_view(record.as_json(), session.seat)
        await trio.to_thread.run_sync(_save, app.state.options.store, [s.label for s in specs], record.as_json())
        session.stored = True
        session.finish("over")
    except Exception as e:  # the page says what happened; the server keeps serving
        log.exception("browser game %s failed", session.game_id)
        session.finish("failed", f"{type(e).__name__}: {e}")
    finally:  # its bots are settled (in_thread): a member's build copy goes with the game
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(launch.release)


def final_view(record: dict[str, Any], seat: int) -> dict[str, Any] | None:
    """The board as the game ended, seen from ``seat``: the last request's view is older than the
    moves after it (a burn, a seat going out), so the page draws this one once the game is over."""
    from ..engine.views import seat_view
    from ..replay.simulate import simulate
    try:
        return seat_view(simulate(record).final, seat)
    except Exception:  # the page keeps the last board it drew; the game itself is stored regardless
        log.exception("could not rebuild the final board of %s", record.get("game_id"))
        return None


def ladder_opponents(store: Path) -> dict[str, str]:
    """Ladder members a person may play against, label -> their files (the store's copy): every
    member of every ladder in the store but the bundled bots (offered already) and suspended ones."""
    from ..ladder.tables import resolve_ref
    from .data import open_read
    db = open_read(store)
    if db is None:
        return {}
    try:
        suspended = reads.suspended_labels(db.db)
        bundled = set(bundled_bots())
        out: dict[str, str] = {}
        for label, ref in reads.member_refs(db.db):
            if ref not in bundled and label not in suspended:
                out.setdefault(label, resolve_ref(db, ref))
        return out
    finally:
        db.db.close()


def members_launcher(store: Path, ladders_dir: Path | None, labels: list[str]) -> Any:
    """The launcher a browser game seats the ladder members ``labels`` with: the containment and
    system view their ladders' own games give them (gVisor where the file names it, the stranger
    view for strangers' seats: :func:`arena.ladder.placement.check_containment`), never a weaker
    one. A browser game ran every member under the default (bubblewrap, the host's view) whatever
    its ladder named: a stranger's bot placed under gVisor ran on the host kernel here, and two
    strangers' bots at one table had the kernel's shared counters between them. Refused
    (ValueError) where a member's ladder cannot be read or cannot seat it on this store, or where
    the members' ladders name different sandboxes (one game has one)."""
    from ..bots.launch import Launcher
    from ..ladder import LadderError, SeatsRefused, load_ladder
    from ..ladder.placement import check_containment
    from .data import open_read
    if not labels:
        return Launcher()
    db = open_read(store)
    if db is None:
        raise ValueError("the store holds no ladders")
    try:
        found: dict[tuple, str] = {}
        for name in reads.ladders_seating(db.db, labels):
            try:
                ladder = load_ladder(name, ladders_dir, check_bots=False, store_dir=Path(db.path).parent,
                                     store=db.path)
            except SeatsRefused as e:
                raise ValueError(f"ladder {name} cannot seat its members on this store ({e.reason}), "
                                 "so neither can a browser game") from None
            except (LadderError, OSError):
                raise ValueError(f"ladder {name}'s file cannot be read here, so neither can the sandbox it "
                                 "names for its members: start the server with --ladders where it is") from None
            named = check_containment(ladder).get("launcher") or Launcher()
            found.setdefault((named.containment, named.system, named.view), name)
    finally:
        db.db.close()
    if len(found) != 1:
        raise ValueError(f"these opponents play on ladders with different sandboxes ({', '.join(found.values())}): "
                         "choose opponents of one of them")
    containment, system, view = next(iter(found))
    return Launcher(containment=containment, system=system, view=view)


def _sessions(request: Request) -> dict[str, Session]:
    return request.app.state.play_sessions


def _session(request: Request) -> Session:
    s = _sessions(request).get(request.path_params["sid"])
    if s is None:
        raise HTTPException(404, "No such game in play (finished games are kept for an hour; see Games).")
    return s


def _form_page(request: Request, status: int = 200, error: str = "",
               members: dict[str, str] | None = None) -> Response:
    if members is None:
        members = ladder_opponents(request.app.state.options.store)
    return render(request, "play_new.html", status, title="Play", presets=list(PRESETS), bots=bundled_bots(),
                  members=list(members), has_token=guard.has_token(request), error=error)


async def new_game(request: Request) -> Response:
    guard.enabled(request, "play")
    return _form_page(request)


def _parse(form: Any, members: dict[str, str]) -> tuple[Any, list, int, int, int, int]:
    """(rules, specs with the person in their seat, seat, seed, turn cap, ms per decision) from the
    form; an opponent is a bundled bot or a ladder member's label (``members``: label -> files)."""
    try:
        rules = rules_from(str(form.get("rules", "classic")), {})
    except RulesError as e:
        raise ValueError(str(e)) from None
    bundled = set(bundled_bots())
    opponents = [o for o in form.getlist("opponent") if o]
    if any(o not in bundled and o not in members for o in opponents):
        raise ValueError("opponents must be bundled bots or ladder members")
    seats = 1 + len(opponents)
    if not rules.min_players <= seats <= rules.max_players:
        raise ValueError(f"{rules.name} is for {rules.min_players}-{rules.max_players} players, not {seats}")
    try:
        seat = int(form.get("seat", 0))
        seed = int(form.get("seed") or secrets.randbelow(2**31))
        max_turns = int(form.get("max_turns") or 2000)
        move_ms = int(form.get("move_ms") or 1000)
    except ValueError:
        raise ValueError("seat, seed, turn cap and time must be whole numbers") from None
    if not 0 <= seat < seats:
        raise ValueError(f"your seat must be 0 to {seats - 1}")
    if not 1 <= max_turns <= 10_000 or not 10 <= move_ms <= 60_000:
        raise ValueError("turn cap must be 1-10000 and time per decision 10-60000 ms")
    if max_turns * move_ms > GAME_S * 1000:  # the bots' own time: a bot that thinks its whole time kept a place for days
        raise ValueError(f"turn cap times time per decision is at most {_span(GAME_S)} (the most a browser game "
                         f"lasts): {max_turns} turns of {move_ms} ms are {_span(max_turns * move_ms / 1000)}")
    try:
        specs = [load_bot(o if o in bundled else members[o]) for o in opponents]
    except ManifestError as e:
        raise ValueError(str(e)) from None
    changed = [o for o, spec in zip(opponents, specs) if o not in bundled and spec.label != o]
    if changed:
        raise ValueError(f"the files of {changed[0]} in the store are no longer that version")
    specs.insert(seat, HUMAN)
    return rules, specs, seat, seed, max_turns, move_ms


async def start_game(request: Request) -> Response:
    form = await request.form(max_files=0, max_fields=20)
    guard.require(request, "play", str(form.get("token", "")) or None)
    opts = request.app.state.options
    members = ladder_opponents(opts.store)
    try:
        rules, specs, seat, seed, max_turns, move_ms = _parse(form, members)
        seated = [s.label for s in specs if not s.human and s.label in members]
        launcher = await trio.to_thread.run_sync(members_launcher, opts.store, opts.ladders_dir, seated)
    except ValueError as e:
        return _form_page(request, 400, str(e), members)
    sessions = _sessions(request)
    now = time.time()
    for sid in [k for k, s in sessions.items() if s.ended is not None and now - s.ended > KEEP_S]:
        del sessions[sid]
    player = await request.app.state.identify(request.scope) or f"address:{client_of(request.scope)}"
    playing = [s for s in sessions.values() if s.ended is None]
    if sum(s.player == player for s in playing) >= PER_PLAYER:
        return _form_page(request, 429, "you have a game in play already: finish it first (a game you leave ends "
                                        f"after {_span(IDLE_S)} without a move)", members)
    if len(playing) >= MAX_SESSIONS:
        return _form_page(request, 429, f"{MAX_SESSIONS} games are being played already: try again later (a game "
                                        f"lasts at most {_span(GAME_S)})", members)
    session = Session(secrets.token_urlsafe(12), seat, Names([s.name for s in specs]).labels, player)
    sessions[session.id] = session
    clock = TimeControl(move_ms=move_ms, bank_ms=10 * move_ms)
    request.app.state.nursery.start_soon(play_game, request.app, session, specs, rules, seed, clock, max_turns,
                                         launcher)
    return redirect(f"/play/{session.id}")


async def page(request: Request) -> Response:
    s = _session(request)
    return render(request, "play.html", title="Play", session=s)


async def state(request: Request) -> Response:
    """Long poll: the messages after the first ``seen``, once there are any (or after 20 s)."""
    s = _session(request)
    try:
        seen = max(0, int(request.query_params.get("seen", "0")))
    except ValueError:
        seen = 0
    with trio.move_on_after(20):
        while len(s.messages) <= seen and s.status in ("starting", "playing"):
            await s.changed.wait()
    who = Names(s.names)
    return JSONResponse({"status": s.status, "seat": s.seat, "names": s.names, "game": s.game_id,
                         "error": s.error, "count": len(s.messages),
                         "replay": f"/games/{s.game_id}" if s.stored else None, "final": s.final,
                         "messages": [annotate(m, who) for m in s.messages[seen:]]},
                        headers={"Cache-Control": "no-store"})


async def act(request: Request) -> Response:
    guard.require(request, "play", request.headers.get("x-arena-token"))  # before the lookup: no probing of ids
    s = _session(request)
    try:
        body = await Request(request.scope, LimitedBody(request.receive, MOVE_BYTES)).json()
        answer = (int(body["request"]), int(body["action"]))
    except TooLarge:
        return JSONResponse({"ok": False, "error": f"a move is at most {MOVE_BYTES} bytes"}, status_code=413)
    except (ValueError, KeyError, TypeError, OverflowError, RecursionError):  # Infinity, 1e999, [[[[...
        return JSONResponse({"ok": False, "error": "send {request: ID, action: ID}"}, status_code=400)
    try:
        s.answers[0].send_nowait(answer)
    except trio.WouldBlock:
        return JSONResponse({"ok": False, "error": "too many answers at once"}, status_code=429)
    return JSONResponse({"ok": True})


def routes() -> list[Route]:
    return [Route("/play", new_game, methods=["GET"]), Route("/play", start_game, methods=["POST"]),
            Route("/play/{sid}", page), Route("/play/{sid}/state", state),
            Route("/play/{sid}/act", act, methods=["POST"])]


def setup(app: Starlette) -> None:
    app.state.play_sessions = {}
