"""The live display of ``arena ladder run`` and ``arena submit``: the tournament reporters plus
provisional openskill ratings. Its own module so that ``arena --help`` never loads the
tournament machinery; the ladder commands import it when they run."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table

from ..tournament.live import PlainReporter, RichReporter
from ..tournament.standings import outcomes


class _Provisional:
    """Live openskill ratings (clearly provisional) fed with the ladder's games so far, then each new one."""

    def _prov_init(self, focus: str | None, history: list) -> None:
        from ..ratings import ProvisionalRatings
        self.focus = focus
        self.prov = ProvisionalRatings()
        for o in outcomes(history):
            self.prov.update(o)

    def _prov_add(self, seats: list[str], result: dict[str, Any]) -> None:
        self.prov.update(outcomes([(seats, result)])[0])

    def _prov_text(self) -> str:
        rows = self.prov.table()
        if self.focus is not None:
            rows = [r for r in rows if r.name == self.focus]
        shown = ", ".join(f"{r.name} ~{r.elo:.0f} (conservative {r.elo_ordinal:.0f}, {r.games} games)"
                          for r in rows[:6])
        return f"provisional rating (live openskill estimate, not the ladder's fitted Elo): {shown}"

    def _prov_table(self) -> Table:
        table = Table(title="Provisional ratings (live openskill estimate; the ladder table is refitted at the end)",
                      title_justify="left")
        for col, just in (("bot", "left"), ("Elo~ (provisional)", "right"), ("conservative", "right"),
                          ("games", "right")):
            table.add_column(col, justify=just)  # type: ignore[arg-type]
        for r in self.prov.table():
            style = "bold yellow" if r.name == self.focus else None
            table.add_row(escape(r.name), f"{r.elo:.0f}", f"{r.elo_ordinal:.0f}", str(r.games), style=style)
        return table


class PlainLadderReporter(_Provisional, PlainReporter):
    def __init__(self, focus: str | None, history: list, stream=None, every: int = 50) -> None:
        PlainReporter.__init__(self, every=every, stream=stream)
        self._prov_init(focus, history)

    def game_done(self, game, record) -> None:
        super().game_done(game, record)
        self._prov_add(list(game.seats), record.result or {})
        if self.done % self.every == 0 or self.done == self.total:
            self.say(self._prov_text())


class RichLadderReporter(_Provisional, RichReporter):
    def __init__(self, focus: str | None, history: list, console: Console) -> None:
        self._prov_init(focus, history)
        RichReporter.__init__(self, console)

    def game_done(self, game, record) -> None:
        self._prov_add(list(game.seats), record.result or {})
        super().game_done(game, record)

    def _render(self) -> Group:
        return Group(self.progress, self._prov_table())
