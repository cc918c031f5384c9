"""The ``arena`` command line.

* :func:`main` - the console script (``arena = "arena.cli:main"``): ``arena --version`` answers
  before the command line is built, everything else goes to the app in :mod:`.main`;
* :mod:`.main` - the app and the commands of one game, a check, a tournament and its results:
  ``rules``, ``play``, ``check``, ``tournament``, ``standings``, ``games``, ``export``, ``bots``;
* :mod:`.ladder` - ``arena submit`` and ``arena ladder ...`` (:mod:`.ladder_live` their live
  display); :mod:`.match` - ``arena match``; :mod:`.replay` - ``arena replay``, ``arena report`` and ``arena debug``;
  :mod:`.deals` - ``arena deals`` (deal suites);
  :mod:`.serve` - ``arena serve``;
* :mod:`.play` - the terminal table of ``arena play``, where people sit with bots;
* :mod:`.common` - what every command shares: one error style, Ctrl-C without a traceback.

Commands import what they need when they run, so ``arena --help`` loads neither trio, numpy nor
the tournament machinery (``bench/bench_cli.py`` measures it; ``tests/test_dependencies.py``
checks that it starts with no extra installed).
"""

from __future__ import annotations

import sys


def main() -> None:
    """Run the ``arena`` command; ``--version`` alone is answered without loading the app."""
    if sys.argv[1:] == ["--version"]:
        from .. import __version__
        print(f"palace-arena {__version__}")
        return
    from .main import app
    app()
