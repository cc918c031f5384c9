"""Tournaments: what to play, who plays it where, and where the games are kept.

* :mod:`.config` - the tournament file and flags (:class:`TournamentConfig`), checked, and its bots;
* :mod:`.schedule` - every game of a tournament: tables, duplicate deals, seat rotations (pure);
* :mod:`.seeds` - deal seeds from the store's secret, so no bot can predict a deal;
* :mod:`.run` - :func:`run_tournament`: plays the games the store lacks, on one executor;
* :mod:`.executors` - the executor interface and the in-process one with its bot pool;
  :mod:`.worker` (referee processes, ``python -m arena.tournament.worker``) and
  :mod:`.cluster` (Dask) are the other two;
* :mod:`.store` - the game store (:mod:`arena.store.games`) as commands name it, and private files
  for exports; :mod:`.runlock` - one run per tournament and store;
* :mod:`.live` - the progress display and live standings;
* :mod:`.check` - ``arena check``: one bot played through every kind of decision, on deals of a
  secret of its own run; the ladder's entry test and the web's uploads run it too.

Importing the package loads nothing: ``arena.tournament.store`` is read by the replay and the web
pages without the runner or its executors.
"""

from pathlib import Path

DEFAULT_STORE = Path("arena-data") / "arena.sqlite"  # where every command keeps its games by default
