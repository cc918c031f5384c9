"""The tables a tournament's results print as: its standings and a staged event's rounds or bracket.

Their own module so that the commands that read a store (``arena standings``, the end of ``arena
tournament``) load neither the runner nor trio (:mod:`.live` shows a running tournament with them).
"""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from .standings import Line, elo_text, los_text, ms_text, rate_text


def standings_table(lines: list[Line], title: str = "Standings", *, provisional: bool = False) -> Table:
    """The standings as a table: the columns `arena ladder` prints, for a tournament's lines."""
    table = Table(title=title, title_justify="left",
                  caption=None if provisional else
                  "Elo: one Plackett-Luce fit with ties over these games (pool mean 1500); ± and [ ] are 95% "
                  "intervals. LOS↓: likelihood of superiority over the next bot down.", caption_justify="left")
    table.add_column("#", justify="right")
    table.add_column("bot", no_wrap=True)
    table.add_column("Elo" + (" (provisional)" if provisional else " ± 95%"), justify="right", no_wrap=True)
    for col in ("games", "win % [95%]", "avg place", "draw % [95%]", "faults", "LOS↓"):
        table.add_column(col, justify="right")
    timed = any(l.decisions for l in lines)
    if timed:
        table.add_column("ms/decision", justify="right")
    for i, l in enumerate(lines, 1):
        elo = ("-" if l.elo is None else f"{l.elo:.0f}") if provisional else \
            elo_text(l.elo, l.elo_low, l.elo_high, l.rated, l.games)
        faults = ", ".join(f"{k} {v}" for k, v in sorted(l.faults.items())) or "0"
        row = [str(i), escape(l.bot), elo, str(l.games), rate_text(l.win_rate, l.win_low, l.win_high, l.games),
               f"{l.avg_place:.2f}", rate_text(l.draw_rate, l.draw_low, l.draw_high, l.games), faults,
               los_text(l.los_next)]
        table.add_row(*row, *([ms_text(l)] if timed else []))
    return table


def stages_table(fmt: str, stages: list, title: str = "Stages") -> Table:
    """A staged event's rounds (a Swiss) or bracket (a knockout, heats): one row per stage, each
    table's bots best first with their points, who went on in bold, and a Swiss round's account of
    what its pairing minimised."""
    from .formats import stage_rows
    table = Table(title=title, title_justify="left", show_lines=True,
                  caption="points per table: 1 per seat finished behind, ½ per seat tied, over every game of "
                          "the table" + ("; bold: went on" if fmt != "swiss" else ""), caption_justify="left")
    table.add_column("stage", no_wrap=True)
    table.add_column("tables")
    if fmt == "swiss":
        table.add_column("pairing minimised")
    table.add_column("waiting" if fmt != "swiss" else "byes")
    for stage in stages:
        parts = []
        for cells, went_on in stage_rows(fmt, stage):
            parts.append(" · ".join(
                (f"[bold]{escape(b)}[/]" if b in went_on else escape(b)) + ("" if p is None else f" {p:g}")
                for b, p in cells))
        row = [stage.title, "\n".join(parts)]
        if fmt == "swiss" and stage.pairing is not None:
            row.append(escape("\n".join(filter(None, (stage.pairing.clashes_words(), stage.pairing.repeats_words(),
                                                          stage.pairing.spread_words())))))
        elif fmt == "swiss":
            row.append("-")
        row.append(", ".join(escape(b) for b in stage.byes) or "-")
        table.add_row(*row)
    return table
