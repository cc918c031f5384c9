"""Small helpers that let the engine's scenario tests read like stories.

    from tests.conftest import table, play, pile

    s = table("classic", "7H 9C | QS | 4D", "5S | KD | 3C", pile="8D")
    s, ev = play(s, "9C")
    assert pile(s) == "8D 9C" and s.to_move == 1

A seat is written ``"hand | face-up | face-down"``; cards are separated by spaces,
a face-up stack is joined with ``+`` (``"JH+JD"``), and ``-`` is a face-down place
already played. The position goes through :func:`arena.engine.views.from_position`,
so the helper builds nothing the engine could not load itself.
"""

from __future__ import annotations

from typing import Any

from arena.engine import IllegalActionError, apply_action, legal_actions, parse_card
from arena.engine.cards import card_str
from arena.engine.model import Done, Flip, PickUp, Play, SetFaceUp, Stack, State
from arena.engine.rules import Rules, preset
from arena.engine.views import action_json, event_for, from_position


def _cards(text: str) -> list[str]:
    return [card_str(parse_card(t)) for t in text.split()]


def _seat(text: str) -> dict[str, Any]:
    parts = [p.strip() for p in text.split("|")] + ["", ""]
    hand, up, down = parts[:3]
    return {
        "hand": _cards(hand),
        "face_up": [sorted(_cards(s.replace("+", " ")), key=parse_card) for s in up.split()],
        "face_down": [None if t == "-" else card_str(parse_card(t)) for t in down.split()],
    }


def table(rules: str | Rules, *seats: str, pile: str = "", stock: str = "", burned: str = "",
          to_move: int = 0, known: dict[int, str] | None = None, places: dict[int, int] | None = None,
          need: int = 0, descending: bool = False, direction: int = 1, turn: int = 0, stale: int = 0,
          max_turns: int = 2000, phase: str = "play", deciding: tuple[int, ...] = (),
          **options: Any) -> State:
    """A position in play: a preset (or Rules) with options, and each seat as ``"hand | up | down"``.

    ``deciding`` lists seats that still owe their setup choice (use with ``phase="setup"``).
    """
    r = preset(rules) if isinstance(rules, str) else rules
    if options:
        r = r.replace(**options)
    data = {
        "rules": r.options(), "seats": [_seat(s) for s in seats],
        "pile": _cards(pile), "stock": _cards(stock), "burned": _cards(burned),
        "to_move": to_move, "need": need, "descending": descending, "direction": direction,
        "turn": turn, "stale": stale, "max_turns": max_turns, "phase": phase,
    }
    for i, text in (known or {}).items():
        data["seats"][i]["known"] = _cards(text)
    for i, place in (places or {}).items():
        data["seats"][i]["place"] = place
    for i in deciding:
        data["seats"][i]["setup"] = "face_up"
    return from_position(data)


def show(cards) -> str:
    """Cards as one readable string: ``"7H 8C"``."""
    return " ".join(card_str(c) for c in cards)


def pile(s: State) -> str:
    return show(s.pile)


def hand(s: State, seat: int) -> str:
    return show(s.seats[seat].hand)


def moves(s: State) -> list[str]:
    """The legal actions in words: ``"play 7H 7S"``, ``"play 4D from face_up"``, ``"pick_up"``, ``"flip 2"``."""
    out = []
    for a in legal_actions(s):
        j = action_json(a)
        if j["kind"] == "play":
            text = "play " + " ".join(j["cards"])
            if j["from"] != "hand":
                text += " from " + j["from"]
            if "target" in j:
                text += f" to {j['target']}"
        elif j["kind"] == "pick_up":
            text = "pick_up" + (" " + j["surrender"] if "surrender" in j else "")
        elif j["kind"] == "flip":
            text = f"flip {j['position']}"
        elif j["kind"] == "set_face_up":
            text = "set_face_up " + " ".join("+".join(st) for st in j["face_up"])
        elif j["kind"] == "stack":
            text = "stack " + " ".join(j["cards"])
        else:
            text = j["kind"]
        out.append(text)
    return out


def play(s: State, cards: str, target: int | None = None):
    """Play these cards (from hand, else from face-up); fails the test if that is not legal."""
    want = tuple(sorted(parse_card(c) for c in cards.split()))
    for a in legal_actions(s):
        if isinstance(a, Play) and tuple(sorted(a.cards)) == want and a.target == target:
            return apply_action(s, a)
    raise IllegalActionError(f"play {cards} is not legal; legal: {moves(s)}")


def can(s: State, cards: str) -> bool:
    """Whether some legal action plays exactly these cards."""
    want = tuple(sorted(parse_card(c) for c in cards.split()))
    return any(isinstance(a, Play) and tuple(sorted(a.cards)) == want for a in legal_actions(s))


def pick_up(s: State, surrender: str | None = None):
    return apply_action(s, PickUp(None if surrender is None else parse_card(surrender)))


def flip(s: State, position: int):
    return apply_action(s, Flip(position))


def log(events) -> list[dict[str, Any]]:
    """The omniscient record of ``events``."""
    return [event_for(e, None) for e in events]


def kinds(events) -> list[str]:
    return [e.kind for e in events]


def _stacks(text: str) -> list[tuple[int, ...]]:
    return sorted(tuple(sorted(parse_card(c) for c in t.split("+"))) for t in text.split())


def choose(s: State, face_up: str):
    """Setup: lay these face up (``"JH+JD 5S 9C"``); the rest of the seat's cards are its hand."""
    want = _stacks(face_up)
    for a in legal_actions(s):
        if isinstance(a, SetFaceUp) and sorted(a.stacks) == want:
            return apply_action(s, a)
    raise IllegalActionError(f"face-up {face_up} is not a legal choice; legal: {moves(s)}")


def stack(s: State, cards: str):
    return apply_action(s, Stack(tuple(sorted(parse_card(c) for c in cards.split()))))


def done(s: State):
    return apply_action(s, Done())


# --------------------------------------------------------------------------- the checkout stays as it was

import os as _os
import subprocess as _subprocess
from pathlib import Path as _Path

import pytest as _pytest

_ROOT = _Path(__file__).resolve().parent.parent
_CACHES = ("__pycache__/", ".pytest_cache/", ".hypothesis/", ".venv/", ".egg-info/", "build/", ".so", "_compiled.json")


# A tracked file of these kinds that changes during a run is a person editing while tests run,
# not a test: only new files, and changes to tracked files of other kinds (a picture, a store,
# a JSON of weights), are the tests' doing.
_EDITED = (".py", ".pyi", ".md", ".toml", ".txt", ".in", ".c", ".html", ".css", ".js", ".yml", ".sh")


def checkout_state(root: _Path = _ROOT) -> dict[str, tuple[int, int] | None]:
    """Every file git would report (changed, new or ignored; caches and build outputs left out),
    with its size and modification time, so a test that writes into the checkout shows up."""
    out = _subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--ignored"],
                          capture_output=True, text=True, check=True).stdout
    state: dict[str, tuple[int, int] | None] = {}
    shots = _os.environ.get("ARENA_SCREENSHOTS")  # docs/take-screenshots writes there on purpose
    for line in out.splitlines():
        path = line[3:].strip('"')
        if any(part in path or path.endswith(part) for part in _CACHES):
            continue
        if shots and (root / path).resolve().is_relative_to(_Path(shots).resolve()):
            continue
        if line[:2] not in ("??", "!!") and path.endswith(_EDITED):
            continue
        try:
            st = _os.stat(root / path)
            state[line] = (st.st_size, st.st_mtime_ns)
        except OSError:
            state[line] = None
    return state


@_pytest.fixture
def open_tmp():
    """A folder a bot's private uid can enter, where pytest's tmp_path (0700) is closed to it: for
    bots, their stores and runsc's state. Removed afterwards."""
    import shutil
    import tempfile
    d = _Path(tempfile.mkdtemp(prefix="arena-test-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@_pytest.fixture(autouse=True, scope="module")
def _checkout_unchanged(request):
    """Tests write to temporary directories, never into the checkout (a store, a screenshot)."""
    if not (_ROOT / ".git").exists():
        yield
        return
    before = checkout_state()
    yield
    after = checkout_state()
    changed = sorted(set(before.items()) ^ set(after.items()))
    assert not changed, f"{request.module.__name__} changed the checkout: {sorted({k for k, _ in changed})}"


@_pytest.fixture(autouse=True)
def _ctrl_c_handler_unchanged():
    """A test leaves Ctrl-C's handler as it found it: a test that left SIGINT ignored or caught
    would make a later test of Ctrl-C see no KeyboardInterrupt, far from the cause."""
    import signal
    before = signal.getsignal(signal.SIGINT)
    yield
    after = signal.getsignal(signal.SIGINT)
    if after is not before:
        signal.signal(signal.SIGINT, before)
        _pytest.fail(f"the test left SIGINT's handler changed ({before!r} -> {after!r})")


WORKERS_MAX = 2  # the machine the suite is sized and checked on: 2 cores (README, "Tests")


LONGEST_FIRST = ("test_serve_browser", "test_gvisor", "test_sandbox_attacks", "test_cli_firsthour",
                 "test_hostile_tournament", "test_ladder", "test_bot_process", "test_ladder_run", "test_cli_human",
                 "test_engine_properties", "test_serve_live_browser", "test_cluster", "test_serve_club_browser",
                 "test_gvisor_system", "test_serve", "test_replay", "test_stranger_attacks7", "test_ai",
                 "test_stranger_attacks19", "test_seasons", "test_uploads", "test_serve_accounts", "test_fairplay",
                 "test_stranger_attacks21", "test_protocol", "test_serve_deadlines", "test_resample",
                 "test_serve_queue", "test_cpu_seats", "test_executors", "test_formats", "test_referee")
"""The files that took longest, longest first (each file's test times summed, from a whole run of main at
3a4565d on two workers; close enough is enough, as the order only has to put the long files early)."""


def _build_the_arena_command_once() -> None:
    """Typer's test runner builds the click command from the app on every ``invoke``: for the
    arena's app, about 0.07 s of inspecting signatures each time, paid by every in-process command
    of the suite (hundreds). The arena's app does not change while the suite runs, so its command
    is built once per test process; any other app (a test's own) is built as before."""
    import typer.testing

    from arena.cli.main import app
    build = typer.testing._get_command
    built = build(app)
    typer.testing._get_command = lambda given: built if given is app else build(given)


def _hypothesis_derandomized(config: Any) -> None:
    """Every property test draws the same examples on every run: a failing example found by luck
    in CI is a real bug, but it shows as a random red that the next run does not repeat (Hypothesis
    does this by itself only where it sees a CI variable; here it is the suite's rule wherever it
    runs). Derandomized, Hypothesis also keeps no example database (``.hypothesis/``), so no run
    replays what an earlier one on this machine happened to find. ``--hypothesis-seed=N`` explores
    other examples (a test's own ``derandomize=True`` stays fixed)."""
    from hypothesis import settings
    if config.getoption("hypothesis_seed", None) is None:
        settings.register_profile("arena", derandomize=True)
        settings.load_profile("arena")


def pytest_configure(config: Any) -> None:
    """Byte-compile the arena package once, before any worker starts. The suite starts hundreds of
    Python processes that import it (each ``arena`` command, server and dask worker); where the
    environment sets ``PYTHONDONTWRITEBYTECODE`` (CI machines often do) none of them writes a
    ``.pyc``, so each compiled every arena module it imported from source again, about a fifth of
    a short command's CPU. A ``.pyc`` is only a cache: a changed source is compiled afresh."""
    _build_the_arena_command_once()
    _hypothesis_derandomized(config)
    if hasattr(config, "workerinput"):
        return
    import compileall
    compileall.compile_dir(str(_ROOT / "arena"), quiet=1)
    _rewrite_the_test_modules_once(config)


def _test_modules(config: Any) -> list[_Path]:
    """The test modules this run may import: those under the paths it was given."""
    import fnmatch
    patterns = config.getini("python_files")
    found: set[_Path] = set()
    for arg in config.args:
        path = _Path(arg.split("::", 1)[0]).resolve()
        files = path.rglob("*.py") if path.is_dir() else [path]
        found.update(f for f in files
                     if f.name == "conftest.py" or any(fnmatch.fnmatch(f.name, p) for p in patterns))
    return sorted(found)


def _rewrite_the_test_modules_once(config: Any) -> None:
    """Rewrite the test modules' asserts once, before any worker starts. pytest keeps a test
    module's rewritten code in a ``.pyc`` beside it, but writes none where the environment sets
    ``PYTHONDONTWRITEBYTECODE``: there each worker rewrote and compiled every test module at
    collection, about two thirds of its collection's CPU, and the next run did it all again. Here
    pytest's own functions write its own cache file (hash-checked: a test module whose source
    changed is rewritten afresh when imported, as without this), into the tests' ``__pycache__``,
    never outside the checkout. Where pytest's internals differ, nothing is written and each
    worker rewrites as before."""
    try:
        from _pytest.assertion.rewrite import (
            PYC_TAIL,
            _read_pyc,
            _rewrite_test,
            _write_pyc,
            assertstate_key,
            get_cache_dir,
        )
        state = config.stash[assertstate_key]
    except (ImportError, KeyError):
        return
    if config.getoption("assertmode") != "rewrite":
        return
    for source in _test_modules(config):
        if not source.is_relative_to(_ROOT):
            continue
        cache = get_cache_dir(source)
        pyc = cache / (source.name[:-3] + PYC_TAIL)
        if _read_pyc(source, pyc) is not None:
            continue
        try:
            cache.mkdir(exist_ok=True)
            source_hash, code = _rewrite_test(source, config)
            _write_pyc(state, code, source_hash, pyc)
        except (OSError, SyntaxError):
            continue  # the import reports it, as it would have
        except (TypeError, ValueError, AttributeError):
            return  # pytest's internals differ from these: the workers rewrite as before


def pytest_collection_modifyitems(config: Any, items: list) -> None:
    """On xdist workers, the longest files first. Under ``--dist loadfile`` a file runs whole on
    one worker, and the scheduler hands files out in collection order (pyproject's
    ``--no-loadscope-reorder``; its default order, most tests first, put the long files of few
    tests last, where one ran alone at the end): long files first, short ones fill in behind."""
    if not hasattr(config, "workerinput"):
        return
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))


def pytest_xdist_auto_num_workers(config: Any) -> int:
    """``-n auto`` (the default in pyproject.toml): one worker per core, at most
    :data:`WORKERS_MAX`, so a many-core box runs the suite as it was checked to run."""
    import os
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, WORKERS_MAX))


@_pytest.fixture(scope="session")
def shared_chromium():
    """One headless Chromium per test process, for the browser files that need no browser options
    of their own (tests/test_serve_browser.py, tests/test_serve_club_browser.py): a start and a
    quit each costs more than a small test. Each file's ``chrome`` fixture takes it with no cookies
    and the desktop viewport, so no file sees another's logins."""
    from tests.test_serve_browser import start_chromium
    driver = start_chromium()
    yield driver
    driver.quit()
