"""``python -m arena.cli ...``: the ``arena`` command without the console script."""

from . import main

main()
