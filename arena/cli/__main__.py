"""``python -m arena.cli ...``: the ``arena`` command without the console script."""

from .main import app

app()
