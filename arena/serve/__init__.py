"""``arena serve``: the arena in a browser, live.

* :mod:`arena.cli.serve` - the command: listens (127.0.0.1 by default), prints the address and token;
* :mod:`.app` - the Starlette app and its read-only pages; :mod:`.pages` - the templates and the
  responses every route module builds; :mod:`.views` and :mod:`.data` -
  what the pages show, read from the store on a read-only connection;
* :mod:`.charts` - rating-over-time and head-to-head charts as server-side SVG;
* :mod:`.live` - follows the store and pushes server-sent events to open pages;
* :mod:`.play` - a person's seat in the browser; :mod:`.submit` and :mod:`.upload` - bot uploads;
* :mod:`.guard` - the read-only default and the token for play and submit.

Templates (Jinja2, autoescaped) are in ``templates/``, CSS and scripts in ``static/``; nothing is
loaded from the network.
"""
