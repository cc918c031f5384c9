"""The pages' rendering, shared by every route module: the Jinja2 templates with their filters,
and the responses a route returns (a page, a message page, a redirect after a form).

Templates autoescape, so every bot name, tournament name or stderr line is escaped where it
is printed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates

HERE = Path(__file__).resolve().parent

templates = Jinja2Templates(directory=str(HERE / "templates"))
templates.env.autoescape = True
templates.env.filters["u"] = lambda s: quote(str(s), safe="@")
templates.env.filters["pct"] = lambda x: "-" if x is None else f"{100 * x:.1f}%"
templates.env.filters["num"] = lambda x, d=0: "-" if x is None else f"{x:.{d}f}"


def _duration(s: float | None) -> str:
    if s is None:
        return "-"
    s = int(s)
    return f"{s // 3600}h {s % 3600 // 60:02d}m" if s >= 3600 else (f"{s // 60}m {s % 60:02d}s" if s >= 60 else f"{s}s")


templates.env.filters["duration"] = _duration
templates.env.globals["asset"] = lambda name: "/static/" + name  # the app links hashed names instead
templates.env.filters["age"] = lambda ts: _duration(time.time() - ts) if ts else "-"
templates.env.filters["when"] = lambda ts: time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "-"


def render(request: Request, name: str, status: int = 200, **context: Any) -> Response:
    """The template ``name`` with ``context``, plus how the server was started (``opts``, ``store``)."""
    opts = request.app.state.options
    context.update(opts=opts, store=opts.store.name)  # the file name: a visitor learns no server path
    return templates.TemplateResponse(request, name, context, status_code=status)


def message(request: Request, title: str, text: str, status: int) -> Response:
    return render(request, "message.html", status, title=title, text=text)


def redirect(url: str) -> Response:
    """After a form: the browser GETs ``url`` (303 See Other)."""
    return RedirectResponse(url, status_code=303)
