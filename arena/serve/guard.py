"""Who may change anything: the server is read-only unless started with ``--allow-play`` or
``--allow-submit``, and then every write needs the token printed at start.

The token comes as a form field or as the ``arena_token`` cookie (set by opening any page with
``?token=...``; HttpOnly, SameSite=Strict). A request from another site's page (its ``Origin``
differs) is refused even with the cookie.
"""

from __future__ import annotations

import secrets

from starlette.exceptions import HTTPException
from starlette.requests import Request


def require(request: Request, feature: str, form_token: str | None = None) -> None:
    """Raise 403 unless ``feature`` ('play' or 'submit') is on and the request carries the token."""
    opts = request.app.state.options
    if not getattr(opts, f"allow_{feature}"):
        raise HTTPException(403, f"{feature.capitalize()} is off: this server is read-only. "
                                 f"Start it with `arena serve --allow-{feature}` to turn it on.")
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.headers.get('host', '')}":
        raise HTTPException(403, "This request came from another site's page; refused.")
    given = form_token or request.cookies.get("arena_token", "")
    if not (given and opts.token and secrets.compare_digest(given, opts.token)):
        raise HTTPException(403, "This needs the token `arena serve` printed when it started "
                                 "(open the address it printed, with ?token=..., or paste the token).")


def enabled(request: Request, feature: str) -> None:
    """Raise 403 when ``feature`` is off (for the pages that show its form)."""
    opts = request.app.state.options
    if not getattr(opts, f"allow_{feature}"):
        raise HTTPException(403, f"{feature.capitalize()} is off: this server is read-only. "
                                 f"Start it with `arena serve --allow-{feature}` to turn it on.")


def has_token(request: Request) -> bool:
    opts = request.app.state.options
    given = request.cookies.get("arena_token", "") or request.query_params.get("token", "")
    return bool(given and opts.token and secrets.compare_digest(given, opts.token))
