"""Charts drawn on the server as SVG: no chart library, no network, no script.

Both return :class:`markupsafe.Markup`; every piece of text in them (bot names
are user text) goes through :func:`markupsafe.escape`. Elements carry classes
and data attributes (``g.series[data-bot]``, ``rect.cell[data-row][data-col]``)
so tests can count what was drawn.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from markupsafe import Markup, escape

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#7f7f7f", "#bcbd22", "#393b79", "#637939"]


@dataclass(frozen=True)
class Band:
    """One rating snapshot of one bot: Elo with its interval, after ``games`` ladder games."""

    games: int
    taken_at: float
    elo: float
    lo: float
    hi: float


def _ticks(lo: float, hi: float, want: int = 5) -> list[float]:
    """Round-numbered ticks covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / want
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 1)]


def _fmt(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 10 or v == int(v) else f"{v:.1f}"


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def rating_chart(series: dict[str, list[Band]], order: list[str], width: int = 760, height: int = 330,
                 selected: str | None = None) -> Markup:
    """Elo over the ladder's games, one line per bot, the x axis from game 0.

    Each bot's 95% interval is drawn as a band that stays hidden until its line is hovered or
    focused (site.css), or always for the ``selected`` bot: a dozen overlapping bands read as one
    grey stack.  The y range follows the lines (and the selected bot's band); a wide band is
    clipped to the plot rather than squeezing every line flat."""
    bots = [b for b in order if series.get(b)]
    if not bots:
        return Markup('<p class="empty" id="rating-chart-empty">No rating history yet: the ladder stores a '
                      'snapshot of its ratings every few games while <code>arena ladder run</code> plays.</p>')
    left, right, top, bottom = 52, 16, 12, 40
    pts = [p for b in bots for p in series[b]]
    x0, x1 = 0, max(p.games for p in pts)
    if x1 <= x0:
        x1 = x0 + 1
    ys = [p.elo for p in pts] + [v for p in series.get(selected or "", []) for v in (p.lo, p.hi)]
    y0, y1 = min(ys), max(ys)
    pad = max(25.0, (y1 - y0) * 0.08)
    y0, y1 = y0 - pad, y1 + pad
    w, h = width - left - right, height - top - bottom
    sx = lambda x: left + (x - x0) / (x1 - x0) * w  # noqa: E731
    sy = lambda y: top + (1 - (y - y0) / (y1 - y0)) * h  # noqa: E731
    out = [f'<svg id="rating-chart" class="chart" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="Elo rating over ladder games" xmlns="http://www.w3.org/2000/svg">'
           f'<defs><clipPath id="plot-area"><rect x="{left}" y="{top}" width="{w}" height="{h}"/></clipPath></defs>']
    for t in _ticks(y0, y1):
        y = sy(t)
        out.append(f'<line class="grid" x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}"/>'
                   f'<text class="tick" x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    for t in _ticks(x0, x1, 6):
        x = sx(t)
        out.append(f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + h}"/>'
                   f'<text class="tick" x="{x:.1f}" y="{top + h + 16}" text-anchor="middle">{_fmt(t)}</text>')
    out.append(f'<text class="axis" x="{left + w / 2:.0f}" y="{height - 4}" text-anchor="middle">ladder games</text>'
               f'<text class="axis" transform="translate(12 {top + h / 2:.0f}) rotate(-90)" text-anchor="middle">Elo</text>')
    out.append('<g clip-path="url(#plot-area)">')
    for i, bot in enumerate(bots):
        p = series[bot]
        c = color(i)
        upper = " ".join(f"{sx(q.games):.1f},{sy(q.hi):.1f}" for q in p)
        lower = " ".join(f"{sx(q.games):.1f},{sy(q.lo):.1f}" for q in reversed(p))
        line = " ".join(f"{sx(q.games):.1f},{sy(q.elo):.1f}" for q in p)
        last = p[-1]
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(last.taken_at))
        tip = escape(f"{bot}: {last.elo:.0f} ({last.lo:.0f} to {last.hi:.0f}) after {last.games} games, {when}")
        cls = "series selected" if bot == selected else "series"
        out.append(f'<g class="{cls}" data-bot="{escape(bot)}" data-points="{len(p)}" tabindex="0"><title>{tip}</title>'
                   f'<polygon class="band" points="{upper} {lower}" fill="{c}"/>'
                   f'<polyline class="hit" points="{line}"/>'
                   f'<polyline class="line" points="{line}" stroke="{c}"/>'
                   f'<circle cx="{sx(last.games):.1f}" cy="{sy(last.elo):.1f}" r="3.5" fill="{c}"/></g>')
    out.append("</g></svg>")
    legend = "".join(f'<li><span class="swatch" style="background:{color(i)}"></span>{escape(b)}</li>'
                     for i, b in enumerate(bots))
    return Markup("".join(out) + f'<ul class="legend" id="rating-legend">{legend}</ul>'
                  '<p class="hint">Hover or focus a line for its 95% interval.</p>' * (selected is None))


def _heat(score: float) -> str:
    """Red (row always behind) through white (even) to green (row always ahead)."""
    s = max(0.0, min(1.0, score))
    if s < 0.5:
        t = s / 0.5
        r, g, b = 214 + (255 - 214) * t, 69 + (255 - 69) * t, 65 + (255 - 65) * t
    else:
        t = (s - 0.5) / 0.5
        r, g, b = 255 + (46 - 255) * t, 255 + (160 - 255) * t, 255 + (90 - 255) * t
    return f"rgb({r:.0f},{g:.0f},{b:.0f})"


def _short(label: str, n: int = 18) -> str:
    return label if len(label) <= n else label[: n - 1] + "\u2026"


READABLE = 0.75  # the head-to-head map is never drawn smaller than this: its 12 px digits stay 9 px


def heat_map(order: list[str], cells: dict[str, dict[str, tuple[float | None, int]]], cell: int = 54) -> Markup:
    """Score of row over column (wins + half the ties, per game both played) with game counts."""
    n = len(order)
    if n < 2:
        return Markup('<p class="empty" id="heat-map-empty">The head-to-head map needs games between two bots.</p>')
    label_w, head_h = 150, 110
    width, height = label_w + n * cell + 90, head_h + n * cell + 8  # room on the right for slanted labels
    out = [f'<svg id="heat-map" class="chart heat" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="Head-to-head score, row against column" xmlns="http://www.w3.org/2000/svg" '
           f'style="max-width:{width}px;min-width:{round(width * READABLE)}px">']  # its box scrolls on a phone
    for j, col in enumerate(order):
        x = label_w + j * cell + cell / 2
        out.append(f'<text class="col-label" transform="translate({x:.0f} {head_h - 6}) rotate(-45)">'
                   f'<title>{escape(col)}</title>{escape(_short(col))}</text>')
    for i, row in enumerate(order):
        y = head_h + i * cell
        out.append(f'<text class="row-label" x="{label_w - 6}" y="{y + cell / 2 + 4:.0f}" text-anchor="end">'
                   f'<title>{escape(row)}</title>{escape(_short(row))}</text>')
        for j, col in enumerate(order):
            x = label_w + j * cell
            if i == j:
                out.append(f'<rect class="diag" x="{x}" y="{y}" width="{cell - 2}" height="{cell - 2}"/>')
                continue
            score, games = cells.get(row, {}).get(col, (None, 0))
            attrs = f'data-row="{escape(row)}" data-col="{escape(col)}" data-games="{games}"'
            tip = escape(f"{row} against {col}: " + (f"{100 * score:.0f}% over {games} games" if score is not None
                                                      else "no games"))
            if score is None:
                out.append(f'<g><title>{tip}</title><rect class="cell empty" {attrs} x="{x}" y="{y}" '
                           f'width="{cell - 2}" height="{cell - 2}"/>'
                           f'<text class="cell-text" x="{x + cell / 2 - 1:.0f}" y="{y + cell / 2 + 4:.0f}">\u2013</text></g>')
                continue
            out.append(f'<g><title>{tip}</title><rect class="cell" {attrs} data-score="{score:.4f}" x="{x}" y="{y}" '
                       f'width="{cell - 2}" height="{cell - 2}" fill="{_heat(score)}"/>'
                       f'<text class="cell-text" x="{x + cell / 2 - 1:.0f}" y="{y + cell / 2 - 2:.0f}">{100 * score:.0f}%</text>'
                       f'<text class="cell-count" x="{x + cell / 2 - 1:.0f}" y="{y + cell / 2 + 13:.0f}">{games}</text></g>')
    out.append("</svg>")
    return Markup("".join(out))
