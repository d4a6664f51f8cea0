"""Domain errors, in one place.

Every error carries a message that says what went wrong *and* what to change.
Each boundary translates them once: ``gr.Error`` in the UI, an HTTP status in
REST (``http_status``), exit code 2 in the CLI.
"""

from __future__ import annotations

import re
from typing import Any


class FinspaceError(Exception):
    """Base class. ``str(err)`` is shown to users as is; keep it actionable."""

    http_status: int = 400

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.message


class CatalogError(FinspaceError):
    """models.yaml is invalid: names the entry and the field."""

    http_status = 500


class UnknownModel(FinspaceError):
    """A model key that is not in the catalogue (never a repo id or a path)."""

    http_status = 422


class ConfigError(FinspaceError):
    """A config.json the planner cannot read (missing field, unknown architecture)."""

    http_status = 400


class DoesNotFit(FinspaceError):
    """The planner says vLLM would refuse to start: carries the plan."""

    http_status = 400

    def __init__(self, message: str, plan: object = None):
        super().__init__(message)
        self.plan = plan


class BadInput(FinspaceError):
    """A chat request or a setting that is out of bounds."""

    http_status = 422


class PromptTooLong(BadInput):
    """The prompt leaves the reply no room in the model's context (finspace.engine.prompt.build_prompt); the
    chat's tool loop answers from the rounds that fitted instead."""


class ToolsRefused(BadInput):
    """A model server that takes no ``tools`` (vLLM started without ``--enable-auto-tool-choice``): the chat
    goes on without the calculator, and says why."""


class DataUnavailable(FinspaceError):
    """Data that is fetched on demand (an eval set) can't be had here; the message names the fix."""

    http_status = 503


class SwitchInProgress(FinspaceError):
    http_status = 409


class ModelSwitching(FinspaceError):
    """Raised into a running chat when the model is being switched away."""

    http_status = 503


class NotReady(FinspaceError):
    """No model is loaded (or the engine is restarting)."""

    http_status = 503


class EngineFailed(FinspaceError):
    """The engine died or failed to start; the message holds vLLM's reason."""

    http_status = 503


class LoadFailed(FinspaceError):
    """A load failed; the message holds vLLM's error beside the planner's reading."""

    http_status = 500


class Unauthorized(FinspaceError):
    http_status = 401


class Forbidden(FinspaceError):
    """The action is off on this app (switching models on a public Space with no admin token)."""

    http_status = 403


class Busy(FinspaceError):
    """Too many requests in flight: retry later."""

    http_status = 429

    def __init__(self, message: str, retry_after_s: int = 5):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class EvalRunning(FinspaceError):
    """A scoreboard run is going: a switch (or a second run) waits for it or cancels it."""

    http_status = 409


class NotFound(FinspaceError):
    """What was asked for does not exist (a ticker, a CIK, an accession on EDGAR); the message says what does."""

    http_status = 404


class UnknownDocument(BadInput):
    """A document id that is not in the conversation's library: the message lists the ids it holds."""


class PageOutOfRange(BadInput):
    """A page number outside a document: the message gives the document's range."""


def http_headers(exc: BaseException) -> dict[str, str]:
    """The headers an HTTP answer to ``exc`` carries, at every HTTP door (REST, the Scoreboard's, /v1): when a
    busy caller may retry (429), how to authenticate (401). The status is the error's own ``http_status``."""
    if isinstance(exc, Unauthorized):
        return {"WWW-Authenticate": "Bearer"}
    retry = getattr(exc, "retry_after_s", None)
    return {"Retry-After": str(retry)} if isinstance(retry, int) and retry > 0 else {}


# An absolute path of two or more parts (/home/user/app/data/x.json), not a URL's (https://host/a/b) or a
# route's (/health): shown as …/x.json, so no response tells where the app's files live.
_ABS_PATH = re.compile(r"(?<![\w:/.~])/(?:[^\s/'\"`]+/)+([^\s/'\"`,;)]*)")


def hide_paths(text: str) -> str:
    return _ABS_PATH.sub(lambda m: "…/" + m.group(1), text)


def redact(text: Any, secrets: tuple[str, ...] = ()) -> Any:
    """``text`` with every secret value replaced by *** (any length; longest first, so one secret inside another
    is covered) and absolute file paths shortened to their last part. The one redaction: every boundary's
    message, the health body, the ledger's records and the engine's own load errors go through it."""
    if not isinstance(text, str):
        return text
    for value in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(value, "***")
    return hide_paths(text)
