"""Conformance tests for the starter bots in examples/bots/<lang>/.

Each starter is copied to a temporary directory, built with the `build` argv
from its bot.toml (if any), started with its `command`, and driven through a
scripted conversation using only the protocol envelope.  Starters whose
toolchain is not installed are skipped with a reason naming the missing tool.

All reads from a bot go through a queue with a timeout, so a bot that hangs
fails its test instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import threading
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOTS_DIR = ROOT / "examples" / "bots"

# Starter directory -> tools that must be on PATH to build and run it.
STARTERS: dict[str, list[str]] = {
    "python": ["python3"],
    "javascript": ["node"],
    "c": ["sh", "gcc"],
    "bash": ["bash", "grep"],
    "java": ["javac", "java"],
    "rust": ["cargo"],
}
LANGS = sorted(STARTERS)

BUILD_TIMEOUT_S = 120
# How long a reply or the exit is waited for: a bound that only a broken starter reaches, not a
# timing (a test asserts no speed). A reply that comes returns at once; under a loaded suite the
# bash starter took over 10 s to answer the ~900 KiB request, and a 10 s wait failed it.
WAIT_S = 120

NAME_RE = re.compile(r"^[a-z0-9-]+$")


def load_manifest(lang: str) -> dict:
    with open(BOTS_DIR / lang / "bot.toml", "rb") as fh:
        return tomllib.load(fh)


# --------------------------------------------------------------------------
# Manifests (no toolchain needed)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("lang", LANGS)
def test_manifest_shape(lang: str) -> None:
    m = load_manifest(lang)
    assert NAME_RE.match(m.get("name", "")), m.get("name")
    assert isinstance(m.get("version"), str) and m["version"]
    assert isinstance(m.get("author"), str) and m["author"]
    cmd = m.get("command")
    assert isinstance(cmd, list) and cmd and all(isinstance(a, str) and a for a in cmd)
    build = m.get("build")
    if build is not None:
        assert isinstance(build, list) and build and all(isinstance(a, str) and a for a in build)
    workdir = BOTS_DIR / lang / m.get("workdir", ".")
    assert workdir.is_dir()
    assert (BOTS_DIR / lang / "README.md").is_file()


def test_manifest_names_unique() -> None:
    names = [load_manifest(lang)["name"] for lang in LANGS]
    assert len(names) == len(set(names)), names


# --------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------


@dataclass
class BuiltBot:
    lang: str
    manifest: dict
    workdir: Path
    # Paths (relative to the starter directory) that the build step created.
    build_outputs: list[str] = field(default_factory=list)


def _files_under(d: Path) -> set[str]:
    return {p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file() or p.is_symlink()}


def _clean_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    # The arena gives a Python bot its own package on PYTHONPATH (arena.bots.launch); so does
    # this, whichever python3 is first on PATH.
    env["PYTHONPATH"] = str(ROOT)
    # PYTHONUNBUFFERED would hide a missing flush in the Python starter.
    for var in ("BOT_SEED", "PYTHONUNBUFFERED", "CARGO_TARGET_DIR", "CARGO_BUILD_TARGET_DIR"):
        env.pop(var, None)
    env.update(extra)
    return env


@pytest.fixture(scope="module", params=LANGS)
def bot(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> BuiltBot:
    lang: str = request.param
    missing = [t for t in STARTERS[lang] if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{lang} starter: required tool(s) not found on PATH: {', '.join(missing)}")

    manifest = load_manifest(lang)
    dest = tmp_path_factory.mktemp(f"starter-{lang}") / lang
    # Do not copy build outputs that may exist from an in-place build.
    shutil.copytree(BOTS_DIR / lang, dest, ignore=shutil.ignore_patterns("target", "*.class"))
    if lang == "c":
        (dest / "bot").unlink(missing_ok=True)
    workdir = dest / manifest.get("workdir", ".")

    outputs: list[str] = []
    build = manifest.get("build")
    if build:
        before = _files_under(dest)
        try:
            res = subprocess.run(
                build, cwd=workdir, env=_clean_env(), capture_output=True, timeout=BUILD_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"{lang}: build {build} took more than {BUILD_TIMEOUT_S}s")
        if res.returncode != 0:
            pytest.fail(
                f"{lang}: build {build} failed (rc={res.returncode})\n"
                f"stdout:\n{res.stdout.decode(errors='replace')}\n"
                f"stderr:\n{res.stderr.decode(errors='replace')}"
            )
        outputs = sorted(_files_under(dest) - before)
    return BuiltBot(lang, manifest, workdir, outputs)


def test_build_outputs_are_gitignored(bot: BuiltBot) -> None:
    """Building in place (as the arena does) must not leave untracked files."""
    if not bot.build_outputs:
        return
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("git or the repository metadata is not available")
    prefix = f"examples/bots/{bot.lang}/"
    paths = [prefix + p for p in bot.build_outputs]
    res = subprocess.run(
        ["git", "-C", str(ROOT), "check-ignore", "--no-index", "--stdin"],
        input="\n".join(paths) + "\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    ignored = set(res.stdout.splitlines())
    not_ignored = [p for p in paths if p not in ignored]
    assert not not_ignored, f"build outputs not ignored by git: {not_ignored[:10]}"


# --------------------------------------------------------------------------
# Driving a bot process
# --------------------------------------------------------------------------


class ExampleBot:
    def __init__(self, bot: BuiltBot, seed: str | None = None) -> None:
        self.bot = bot
        env = _clean_env(**({"BOT_SEED": seed} if seed is not None else {}))
        self.proc = subprocess.Popen(
            bot.manifest["command"],
            cwd=bot.workdir,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._stderr: list[bytes] = []
        self._threads = [
            threading.Thread(target=self._pump_stdout, daemon=True),
            threading.Thread(target=self._pump_stderr, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _pump_stdout(self) -> None:
        assert self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            self._lines.put(raw)
        self._lines.put(None)  # EOF

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in iter(self.proc.stderr.readline, b""):
            self._stderr.append(raw)

    def stderr_text(self) -> str:
        return b"".join(self._stderr).decode("utf-8", errors="replace")

    def _diag(self) -> str:
        return f"[{self.bot.lang}] rc={self.proc.poll()} stderr:\n{self.stderr_text()[-2000:]}"

    def send(self, msg: dict | str) -> None:
        line = msg if isinstance(msg, str) else json.dumps(msg, ensure_ascii=False)
        assert "\n" not in line
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line.encode("utf-8") + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            pytest.fail(f"could not write to bot ({exc}); {self._diag()}")

    def read_line(self, timeout: float = WAIT_S) -> str:
        try:
            raw = self._lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"no reply within {timeout}s; {self._diag()}")
        if raw is None:
            pytest.fail(f"bot closed stdout instead of replying; {self._diag()}")
        assert raw.endswith(b"\n"), f"reply not newline-terminated: {raw!r}"
        try:
            return raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError:
            pytest.fail(f"reply is not UTF-8: {raw!r}")

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def expect_exit(self, timeout: float = WAIT_S) -> None:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"bot did not exit within {timeout}s; {self._diag()}")
        assert rc == 0, f"bot exited with {rc}; {self._diag()}"
        for t in self._threads:  # both pipes drained to their end: stderr_text() is then whole
            t.join(timeout=WAIT_S)
        extra = []
        while True:
            try:
                item = self._lines.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                extra.append(item)
        assert not extra, f"unexpected output on stdout: {extra!r}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass


@pytest.fixture
def run_bot(bot: BuiltBot):
    procs: list[ExampleBot] = []

    def start(seed: str | None = "7") -> ExampleBot:
        p = ExampleBot(bot, seed)
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.kill()


def check_hello(line: str, bot: BuiltBot) -> None:
    msg = json.loads(line)
    assert isinstance(msg, dict), line
    assert msg.get("type") == "hello", line
    assert msg.get("protocol") == 1, line
    assert msg.get("name") == bot.manifest["name"], line
    assert isinstance(msg.get("version"), str) and msg["version"], line


def check_action(line: str, request_text: str) -> int:
    """Validate a reply to `request_text` (JSON object or bare int); return the action id."""
    req = json.loads(request_text)
    n = len(req["actions"])
    text = line.strip()
    if re.fullmatch(r"[0-9]+", text):
        action = int(text)
    else:
        try:
            msg = json.loads(text)
        except ValueError:
            pytest.fail(f"reply is neither JSON nor a bare action id: {line!r}")
        assert isinstance(msg, dict), line
        assert msg.get("type") == "action", line
        assert msg.get("request") == req["id"] and type(msg.get("request")) is type(req["id"]), (
            f"reply {line!r} does not name request {req['id']!r}"
        )
        action = msg.get("action")
        assert type(action) is int, line
    assert 0 <= action < n, f"action {action} out of range 0..{n - 1} for request {req['id']}"
    return action


# --------------------------------------------------------------------------
# Scripted messages
# --------------------------------------------------------------------------

HELLO = '{"type":"hello","protocol":1,"arena":"0.1.0"}'
START_1 = (
    '{"type":"start","game":"g-1","seat":0,"players":2,'
    '"opponents":[{"seat":1,"name":"other","type":"request"}],"rules":{"deck":52,"actions":[0]}}'
)

# Plain request, 2 actions (the documented example).
REQ_1 = (
    '{"type":"request","id":17,"game":"g-1","decision":"play",'
    '"view":{"hand":["7H","9C"],"pile":[]},"events":[],'
    '"actions":[{"id":0,"kind":"play","cards":["7H"],"from":"hand"},{"id":1,"kind":"pick_up"}],'
    '"clock":{"move_ms":1000,"bank_ms":10000}}'
)

# Adversarial layout, 1 action: "type" and "id" come late, nested objects carry
# their own "type"/"id"/"actions" keys (including "shutdown"!), strings contain
# escaped quotes, brackets, commas and colons, non-ASCII text, odd whitespace,
# and a large id.
REQ_2 = (
    '{ "view" : {"type":"shutdown","id":99,"actions":[{"id":0},{"id":1},{"id":2}],'
    '"note":"he said \\"}]{[\\" , \\"type\\":\\"hello\\" \\\\","names":["Zoë ♠","🂡"]},'
    '\t"actions" : [ { "kind" : "pick_up" , "why":"no \\"id\\": here, [x]" } ] ,'
    '"events":[{"type":"request","id":3},{"type":"end","list":[[],[[{}]]]}],'
    '"decision":"pick_up", "weird":[null,true,false,-1.5e3,"\\u0041\\n"],'
    '  "type" :  "request" ,  "id" : 123456789012 , "game":"g-1",'
    '"clock":{"move_ms":1000,"bank_ms":0} }'
)

# 7 actions with nested structure; a decoy "actions" array appears first.
REQ_3 = json.dumps(
    {
        "decoy": {"actions": list(range(12)), "type": "hello"},
        "type": "request",
        "game": "g-1",
        "decision": "set_face_up",
        "view": {"face_up": [["KH", "KD"], []], "flags": {"a": {"b": {"c": [1, {"d": "]"}]}}}},
        "events": [],
        "actions": [
            {
                "id": i,
                "kind": "stack" if i % 2 else "set_face_up",
                "cards": ["7H", "7D"][: i % 3],
                "meta": {"id": 100 + i, "type": "x", "tags": ["a,b", "]", "{"]},
            }
            for i in range(7)
        ],
        "clock": {"move_ms": 250, "bank_ms": 5000},
        "id": 19,
    },
    ensure_ascii=False,
    separators=(", ", ": "),
)

ERROR = (
    '{"type":"error","reason":"illegal_action",'
    '"message":"action 9 is not legal: \\"id\\" out of range","request":19}'
)
# Unknown type that looks a lot like a request: must be ignored.
UNKNOWN = '{"type":"ping","id":5,"actions":[{"id":0},{"id":1}],"nested":{"type":"request"}}'
END_1 = (
    '{"type":"end","game":"g-1","result":{"winner":1,"places":[1,0],"type":"normal"},'
    '"reveal":{"0":{"hand":["2C"],"face_down":["AS","3D","QH"]}}}'
)
START_2 = '{"type":"start","game":"g-2","seat":1,"players":3}'
REQ_G2 = (
    '{"type":"request","id":1,"game":"g-2","decision":"flip","view":{},"events":[],'
    '"actions":[{"id":0,"kind":"flip"},{"id":1,"kind":"flip"},{"id":2,"kind":"done"}],'
    '"clock":{"move_ms":1000,"bank_ms":10000}}'
)
SHUTDOWN = '{"type":"shutdown"}'


def test_all_scripted_messages_are_valid_json() -> None:
    for text in (HELLO, START_1, REQ_1, REQ_2, REQ_3, ERROR, UNKNOWN, END_1, START_2, REQ_G2):
        assert isinstance(json.loads(text), dict)
    assert [len(json.loads(r)["actions"]) for r in (REQ_1, REQ_2, REQ_3, REQ_G2)] == [2, 1, 7, 3]


# --------------------------------------------------------------------------
# Conversations
# --------------------------------------------------------------------------


def test_conversation(bot: BuiltBot, run_bot) -> None:
    """Two games in one process; the bot answers exactly hello and requests.

    A reply to a message that needs none would be read in place of the next
    expected reply and fail its validation, so "no reply" is checked without
    sleeping.
    """
    p = run_bot()
    p.send(HELLO)
    check_hello(p.read_line(), bot)

    p.send(START_1)
    for req in (REQ_1, REQ_2, REQ_3):
        p.send(req)
        check_action(p.read_line(), req)

    p.send(ERROR)
    p.send(UNKNOWN)
    p.send(END_1)
    p.send(START_2)
    p.send(REQ_G2)
    check_action(p.read_line(), REQ_G2)

    p.send(SHUTDOWN)
    p.expect_exit()

    log = p.stderr_text()
    assert "g-1" in log and "g-2" in log, f"expected a log line per game on stderr, got:\n{log}"


def test_eof_exits_and_large_message(bot: BuiltBot, run_bot) -> None:
    """A ~900 KiB request (protocol max is 1 MiB) is answered; EOF ends the bot."""
    cards = [r + s for r in "23456789TJQKA" for s in "CDHS"]
    big = json.dumps(
        {
            "type": "request",
            "id": 42,
            "game": "g-9",
            "decision": "play",
            "view": {
                "log": "x" * 300_000,
                "history": [{"type": "played", "cards": [cards[i % 52]]} for i in range(20_000)],
            },
            "events": [],
            "actions": [{"id": i, "kind": "play", "cards": [cards[i]]} for i in range(5)],
            "clock": {"move_ms": 1000, "bank_ms": 10000},
        },
        separators=(",", ":"),
    )
    assert 800_000 < len(big) < 1_000_000
    p = run_bot()
    p.send(HELLO)
    check_hello(p.read_line(), bot)
    p.send(START_1.replace("g-1", "g-9"))
    p.send(big)
    check_action(p.read_line(), big)
    p.close_stdin()
    p.expect_exit()


def _play_many(bot: BuiltBot, run_bot, seed: str) -> list[int]:
    p = run_bot(seed)
    p.send(HELLO)
    check_hello(p.read_line(), bot)
    p.send(START_1)
    choices = []
    for i in range(30):
        req = json.dumps(
            {
                "type": "request",
                "id": 1000 + i,
                "game": "g-1",
                "decision": "play",
                "view": {},
                "events": [],
                "actions": [{"id": j, "kind": "play", "cards": ["5S"]} for j in range(10)],
            }
        )
        p.send(req)
        choices.append(check_action(p.read_line(), req))
    p.send(SHUTDOWN)
    p.expect_exit()
    return choices


def test_seeded_choices_are_reproducible(bot: BuiltBot, run_bot) -> None:
    first = _play_many(bot, run_bot, "12345")
    second = _play_many(bot, run_bot, "12345")
    assert first == second, "same BOT_SEED should give the same choices"
    assert len(set(first)) > 1, f"choices do not look random: {first}"


def _game_choices(p: "ExampleBot", game: str, start_seed: int | None) -> list[int]:
    start = {"type": "start", "game": game, "seat": 0, "players": 2}
    if start_seed is not None:
        start["seed"] = start_seed
    p.send(json.dumps(start))
    choices = []
    for i in range(20):
        req = json.dumps({"type": "request", "id": i, "game": game, "decision": "play", "view": {}, "events": [],
                          "actions": [{"id": j, "kind": "play", "cards": ["5S"]} for j in range(10)]})
        p.send(req)
        choices.append(check_action(p.read_line(), req))
    p.send(json.dumps({"type": "end", "game": game, "result": {}}))
    return choices


def test_each_game_is_seeded_from_its_start_seed(bot: BuiltBot, run_bot) -> None:
    """As protocol/PROTOCOL.md recommends, so `arena debug` replays an unmodified starter: a game's
    choices follow its start.seed, whatever BOT_SEED says and whatever games the process played
    before (one process plays many games); another start.seed gives other choices."""
    def games(bot_seed: str, seeds: list[int]) -> list[list[int]]:
        p = run_bot(bot_seed)
        p.send(HELLO)
        check_hello(p.read_line(), bot)
        out = [_game_choices(p, f"g-{n}", seed) for n, seed in enumerate(seeds)]
        p.send(SHUTDOWN)
        p.expect_exit()
        return out

    first, again, other = games("1", [2026006079, 2026006079, 11])
    assert first == again, "the same start.seed in a later game of the process should replay the same choices"
    assert len(set(first)) > 1, f"choices do not look random: {first}"
    assert first != other, "another start.seed should give other choices"
    (elsewhere,) = games("2", [2026006079])
    assert elsewhere == first, "BOT_SEED should not matter once a start.seed is given"
