"""Heuristic: keeps its 2s and 10s, completes burns, plays high against a player on table cards."""
from arena.botkit import serve
from arena.strategies import heuristic

serve(heuristic, "heuristic", "1.0")
