"""The one auth dependency of the HTTP routes: the admin token (REST's /load-model, the Scoreboard's runs), read
once (``wall.clients.bearer``) and compared by the service in constant time, wrong tokens throttled per client.
/v1's API keys are read the same way and compared by ``Service.is_api_key`` (finspace.openai_api answers in
OpenAI's shape)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from fastapi import Request

from finspace.wall.clients import bearer, request_client

if TYPE_CHECKING:
    from finspace.service import Service


def admin(svc: Service) -> Callable[[Request], None]:
    def require_admin(request: Request) -> None:
        """401 unless 'Authorization: Bearer <FINSPACE_ADMIN_TOKEN>' (when one is set); checked before the body,
        and wrong tokens are throttled per client (429)."""
        client = request_client(request, svc.settings.limits.trusted_proxies)
        action = "a Scoreboard run" if request.url.path.startswith("/scores") else "switching models"
        svc.authorize(bearer(request), client=client, action=action)

    return require_admin
