"""Draw the learning curve of a training run: win rate against ``heuristic`` over training steps.

    python examples/rl/plot.py examples/rl/run/log.csv examples/rl/curve.png [SHIPPED_STEPS]

Reads the ``log.csv`` that ``train.py`` writes (each row: steps, the greedy policy's win
rate over duplicate deals and its 95% half-width). Needs matplotlib (the train extra).
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(log: Path, png: Path, shipped: int | None = None) -> None:
    rows = list(csv.DictReader(log.open()))
    steps = [int(r["steps"]) / 1000 for r in rows]
    win = [100 * float(r["win_vs_heuristic"]) for r in rows]
    half = [100 * float(r["half_width"]) for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    ax.fill_between(steps, [w - h for w, h in zip(win, half)], [w + h for w, h in zip(win, half)],
                    alpha=0.25, label="95% interval")
    ax.plot(steps, win, marker="o", ms=3, label="greedy policy vs heuristic")
    ax.axhline(50, color="grey", lw=0.8, ls=":")
    ax.axhline(60, color="tab:red", lw=0.8, ls="--", label="target 60%")
    if shipped is not None:
        ax.axvline(shipped / 1000, color="tab:green", lw=0.8, ls="-.", label="the shipped weights")
    ax.set_xlabel("training steps (learner decisions, thousands)")
    ax.set_ylabel("win rate (%)")
    args = log.with_name("args.json")
    deals = json.loads(args.read_text())["eval_deals"] if args.exists() else "the same"
    ax.set_title(f"MaskablePPO vs heuristic, classic, 2 players (each point: {deals} deals x 2 seats)")
    ax.set_ylim(0, 100)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(png)
    print(f"wrote {png}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else None)
