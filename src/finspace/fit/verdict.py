"""Whether a model can serve here: the planner's verdict for an in-process engine, or "served by" a remote one.

``verdict_of(engine, entry)`` asks the engine (``finspace.engine.api.EngineAPI.check_fits``): a Plan, DoesNotFit,
or None when nothing is planned here (a remote endpoint's model: its context is the endpoint's). Never raises:
a config the planner cannot read becomes a verdict that says so, so the page never breaks on one model.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from finspace import planner
from finspace.errors import DoesNotFit, FinspaceError

if TYPE_CHECKING:
    from finspace.engine.api import EngineAPI
    from finspace.models.catalog import ModelEntry

log = logging.getLogger("finspace.service")


@dataclass(frozen=True)
class Verdict:
    """Whether a catalogue model can be loaded here, by the planner (and the engine's CPU rule)."""

    key: str
    fits: bool
    reason: str
    plan: planner.Plan | None
    error: str | None = None  # the plan could not be made (bad config)
    served_len: int | None = None  # a remote endpoint's context for the model (no plan)

    @property
    def max_model_len(self) -> int | None:
        return self.plan.max_model_len if self.plan is not None else self.served_len


def verdict_of(engine: EngineAPI, entry: ModelEntry) -> Verdict:
    try:
        p = engine.check_fits(entry)
    except DoesNotFit as exc:
        return Verdict(entry.key, False, str(exc), exc.plan if isinstance(exc.plan, planner.Plan) else None)
    except FinspaceError as exc:
        return Verdict(entry.key, False, str(exc), None, error=str(exc))
    except Exception as exc:  # a config the planner cannot read must not break the page
        log.exception("planning %s failed", entry.key)
        return Verdict(
            entry.key, False, f"cannot plan {entry.label}: {type(exc).__name__}", None, error=type(exc).__name__
        )
    if p is None:  # served by a remote endpoint: its context, nothing planned here
        n = entry.serving.max_model_len
        return Verdict(
            entry.key, True, f"served by {engine.where()}", None, served_len=n if isinstance(n, int) else None
        )
    return Verdict(entry.key, True, p.reason, p)
