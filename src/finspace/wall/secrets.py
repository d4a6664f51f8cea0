"""The admin token and the API keys, checked: who may switch models (``authorize``, by the switching mode:
"open", "off" or "token") and whether a token is the admin token or one of FINSPACE_API_KEYS, each compared in
constant time with bounded work for any length. Wrong tokens are counted per client by the caller's Throttle.
Used by finspace.service, the one place that checks them.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Iterable
from typing import Any

from finspace.errors import Forbidden, Unauthorized
from finspace.settings import ADMIN_TOKEN_MAX_CHARS
from finspace.wall.throttle import Throttle


def _given(token: Any) -> bytes:  # bounded work for any length
    return token.encode("utf-8", "surrogatepass")[: ADMIN_TOKEN_MAX_CHARS * 4 + 1] if isinstance(token, str) else b""


def is_admin_token(token: Any, admin_token: str | None) -> bool:
    """True when ``token`` is the admin token, compared in constant time."""
    if not isinstance(token, str) or not token or not admin_token:
        return False
    return hmac.compare_digest(_given(token), admin_token.encode("utf-8"))


def is_api_key(token: Any, api_keys: Iterable[str]) -> bool:
    """True when ``token`` is one of ``api_keys``, every key compared in constant time."""
    given = _given(token)
    matched = False
    for key in api_keys:  # every key compared, whichever matches
        matched |= hmac.compare_digest(given, key.encode("utf-8"))
    return matched and bool(given)


def authorize(
    mode: str, token: Any, is_admin: Callable[[Any], bool], throttle: Throttle, client: str | None, action: str
) -> None:
    """Raise unless ``token`` may switch models under ``mode`` (see finspace.service.Service.authorize)."""
    if mode == "open":
        return
    if mode == "off":
        raise Forbidden(
            "switching models is off on this public Space: its owner can set FINSPACE_ADMIN_TOKEN "
            "(a secret of 16+ characters) in the Space's settings to allow it with that token, or "
            "FINSPACE_OPEN_SWITCHING=1 to let anyone switch"
        )
    throttle.check(client)
    if not isinstance(token, str) or not token:
        raise Unauthorized(
            f"{action} on this Space needs the admin token "
            "(Authorization: Bearer <token>, or the token field in the UI)"
        )
    if not is_admin(token):
        throttle.failed(client)
        raise Unauthorized("the admin token is wrong; nothing was changed")
