"""A small kit for Python bots: the protocol loop, typed requests, and the resampler.

    from arena.botkit import Request, serve

    def choose(req: Request) -> int:
        plays = req.plays()
        return min(plays, key=lambda a: a.rank).id if plays else req.actions[0].id

    serve(choose, "my-bot", "1.0", typed=True)

* :func:`serve` runs the protocol (hello, start, request, end, shutdown) and keeps
  stray prints off stdout;
* :class:`Request`, :class:`View`, :class:`Player`, :class:`Action`, :class:`Card`
  read a request as typed objects, parsing a field only when it is used;
* :class:`Game` follows one game and samples full engine states consistent with
  everything the seat saw and every inference the rules allow (for search bots).

Only the standard library and the ``arena`` package itself are needed: no other
package. ``protocol/PROTOCOL.md`` remains the contract for bots in any language.
"""

from .serve import Chooser, serve
from .types import Action, Card, Player, Request, View

__all__ = ["Action", "Card", "Chooser", "Game", "Player", "Request", "View", "serve"]


def __getattr__(name: str):
    if name == "Game":  # loads the engine: only when asked for
        from .game import Game
        return Game
    raise AttributeError(name)
