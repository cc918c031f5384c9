"""Palace Arena: referee, tournaments, ladders and replays for Palace (Shithead) bots."""

__version__ = "0.1.0"
