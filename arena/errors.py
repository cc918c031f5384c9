"""The root of the arena's own errors: catch :class:`ArenaError` to catch any of them.

Every exception the arena defines derives from it: a bad config, ladder or bot file, a store
that cannot be used, a bot's fault (:mod:`arena.faults`), the arena failing to start a bot or
to play every game, a worker or cluster gone. Each keeps the built-in class it had beside
(``ValueError`` for a bad file, ``RuntimeError`` for a store), so ``except ValueError`` still
catches what it did. The command line reports any of them in one ``error:`` line, exit
status 2 (:mod:`arena.cli.common`).

The engine's errors (``RulesError``, ``IllegalActionError``) are not here: the engine is a
library below the arena and knows nothing of it (and its hot modules are compiled by mypyc).

No imports: every layer may import this module.
"""


class ArenaError(Exception):
    """Something the arena itself reports: a message for the person running it, not a traceback."""
