"""The ``arena`` command line.

* :mod:`.main` - the app (``arena = "arena.cli.main:app"``) and the commands of one game, a check,
  a tournament and its results: ``rules``, ``play``, ``check``, ``tournament``, ``standings``,
  ``games``, ``export``, ``bots``;
* :mod:`.ladder` - ``arena submit`` and ``arena ladder ...``; :mod:`.match` - ``arena match``;
* :mod:`.play` - the terminal table of ``arena play``, where people sit with bots;
* :mod:`.common` - what every command shares: one error style, Ctrl-C without a traceback.

The replay and the web arena add their own commands (:mod:`arena.replay.cli`,
:mod:`arena.serve.cli`). Commands import what they need when they run, so ``arena --help``
loads neither numpy nor the tournament machinery.
"""
