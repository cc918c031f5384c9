"""Lowest-first: the lowest legal card, power cards last; picks up only when it must."""
from arena.botkit import serve
from arena.strategies import lowest_first

serve(lowest_first, "lowest", "1.0")
