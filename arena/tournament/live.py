"""Showing a running tournament: a rich progress bar with live standings, or plain log lines."""

from __future__ import annotations

import sys
import time
from collections import Counter

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ..referee import GameRecord
from ..safetext import SafeConsole, printable
from .config import TournamentConfig
from .run import Reporter
from .schedule import ScheduledGame
from .standings import Line, add_game, outcomes, ranked
from .tables import standings_table


def summary(incidents: list[str]) -> str:
    """The arena's own trouble in a run, for its last line ("" when there was none)."""
    if not incidents:
        return ""
    deaths = sum("replaced" in t for t in incidents)
    if deaths:
        return f"; {deaths} referee worker death(s), each replaced and its games played again"
    dask = sum(t.startswith("Dask worker") for t in incidents)
    if dask == len(incidents):
        return f"; {dask} Dask worker death(s), their games played again on other workers"
    return f"; {len(incidents)} incident(s)"



def finishing_order(order: list[list[int]], seats: list[str]) -> str:
    """A result's finishing order by name, best first, ties joined: ``a@1 > b@1 = c@1``."""
    return " > ".join(" = ".join(seats[i] for i in group) for group in order) or "no order"

class _Base(Reporter):
    def __init__(self) -> None:
        self.lines: dict[str, Line] = {}  # running tallies: memory stays flat however long the run
        self.faults: Counter = Counter()
        self.total = self.done = self.base = 0
        self.t0 = time.perf_counter()
        self.incidents: list[str] = []

    def incident(self, text: str) -> None:
        self.incidents.append(text)

    def started(self, cfg: TournamentConfig, total: int, done: int) -> None:
        self.cfg, self.total, self.done, self.base = cfg, total, done, done
        self.t0 = time.perf_counter()

    def game_done(self, game: ScheduledGame, record: GameRecord) -> None:
        self.done += 1
        assert record.result is not None
        add_game(self.lines, list(game.seats), record.result)
        for f in record.faults:
            self.faults[(game.seats[f["seat"]], f["reason"])] += 1

    @property
    def rate(self) -> float:
        dt = time.perf_counter() - self.t0
        return (self.done - self.base) / dt if dt > 0 else 0.0


class PlainReporter(_Base):
    """One line per finished game and a summary every ``every`` games: for CI and pipes."""

    def __init__(self, every: int = 50, stream=None) -> None:
        super().__init__()
        self.every = every
        self.out = stream or sys.stdout

    def started(self, cfg: TournamentConfig, total: int, done: int) -> None:
        super().started(cfg, total, done)
        resumed = f", resuming with {done} already stored" if done else ""
        where = (f"on the Dask cluster at {cfg.cluster} ({cfg.concurrency} worker(s) now, a game at a time each)"
                 if cfg.cluster else f"{cfg.workers} at a time")
        from .config import ACCEPTED_CHANNELS
        accepted = f"; {ACCEPTED_CHANNELS}" if cfg.channels_accepted else ""
        self.say(f"tournament {cfg.name}: {total} games, {cfg.seats} seats, rules {cfg.rules}, {where}{resumed}"
                 f"{accepted}")

    def game_done(self, game: ScheduledGame, record: GameRecord) -> None:
        super().game_done(game, record)
        r = record.result or {}
        faults = "".join(f" fault:{game.seats[f['seat']]}:{f['reason']}" for f in record.faults)
        if self.done % self.every == 0 or record.faults or self.done == self.total:
            self.say(f"[{self.done}/{self.total}] {record.game_id} {' '.join(game.seats)} -> {r.get('reason')}: "
                     f"{finishing_order(r.get('order') or [], game.seats)}{faults} ({self.rate:.1f} games/s)")

    def incident(self, text: str) -> None:
        super().incident(text)
        self.say(f"arena: {text}")

    def stage(self, title: str, text: str) -> None:
        print(f"{title}: {text}", file=self.out, flush=True)

    def finished(self, interrupted: bool) -> None:
        state = "interrupted" if interrupted else "finished"
        self.say(f"{state}: {self.done}/{self.total} games stored{summary(self.incidents)}")

    def say(self, line: str) -> None:
        """One line out; a bot's label or text in it shown escaped (arena.safetext)."""
        print(printable(line, lines=True), file=self.out, flush=True)


class RichReporter(_Base):
    """A progress bar (done, games/s, ETA) over a live standings table with fault counts."""

    def __init__(self, console: Console | None = None, refresh_every: int = 1) -> None:
        super().__init__()
        self.console = console or SafeConsole()
        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[rate]:.1f} games/s"), TimeRemainingColumn(),
                                 console=self.console)
        self.live: Live | None = None
        self.refresh_every = refresh_every
        from ..ratings import ProvisionalRatings
        self.provisional: ProvisionalRatings | None = ProvisionalRatings()
        self.min_interval = 0.25  # the table is re-tallied from every result: at most at the display's rate
        self._rendered = 0.0

    def _render(self) -> Group:
        lines = ranked(self.lines)
        if self.provisional is not None:
            by_bot = {row.name: row for row in self.provisional.table()}
            for line in lines:
                row = by_bot.get(line.bot)
                line.elo = None if row is None else row.elo
            lines.sort(key=lambda l: -(l.elo or 0))
        table = standings_table(lines, "Live standings (this run; Elo is openskill's running estimate)",
                                provisional=True)
        return Group(self.progress, table)

    def started(self, cfg: TournamentConfig, total: int, done: int) -> None:
        super().started(cfg, total, done)
        self.task = self.progress.add_task(cfg.name, total=total, completed=done, rate=0.0)
        self.live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False)
        self.live.start()

    def game_done(self, game: ScheduledGame, record: GameRecord) -> None:
        super().game_done(game, record)
        if self.provisional is not None and record.result is not None:
            for outcome in outcomes([(list(game.seats), record.result)]):
                if len(outcome.groups) > 1:  # a draw among everyone carries no information
                    self.provisional.update(outcome)
        self.progress.update(self.task, completed=self.done, rate=self.rate)
        now = time.perf_counter()
        if self.live and (self.done == self.total or (self.done % self.refresh_every == 0
                                                      and now - self._rendered >= self.min_interval)):
            self._rendered = now
            self.live.update(self._render())

    def stage(self, title: str, text: str) -> None:
        self.console.print(f"[bold]{escape(title)}[/]: {escape(text)}", highlight=False)

    def finished(self, interrupted: bool) -> None:
        if self.live:
            self.live.update(self._render())
            self.live.stop()
        if self.incidents:
            self.console.print(f"[yellow]{summary(self.incidents).lstrip('; ')}[/]")
            for text in self.incidents:
                self.console.print(f"  {text}", markup=False)
        if interrupted:
            self.console.print(f"[yellow]interrupted[/] after {self.done}/{self.total} games; "
                               "run the same command again to resume")
