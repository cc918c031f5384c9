"""Highest-first: a deliberately bad bot that throws its best cards away first."""
from arena.botkit import serve
from arena.strategies import highest_first

serve(highest_first, "highest", "1.0")
