"""The vLLM engine's life: plan, fetch, start, stream, switch, watch, restart.

One room per concept: ``core`` (the Engine: states, switch, watchdog, chat),
``prompt`` (messages to token ids, bounds, trimming). Importing this package
imports no vLLM. The names other modules import from ``finspace.engine`` stay here.
"""

from finspace.engine.core import STAGE_PROGRESS, STAGES, ChatInfo, Engine, Health, LoadRecord, ProgressFn
from finspace.engine.prompt import (
    MAX_MESSAGE_CHARS,
    MAX_MESSAGES,
    MAX_TOKENS_CAP,
    MAX_TOTAL_CHARS,
    ROLES,
    ChatSettings,
    normalize_messages,
)

__all__ = [
    "MAX_MESSAGES", "MAX_MESSAGE_CHARS", "MAX_TOKENS_CAP", "MAX_TOTAL_CHARS", "ROLES", "STAGES", "STAGE_PROGRESS",
    "ChatInfo", "ChatSettings", "Engine", "Health", "LoadRecord", "ProgressFn", "normalize_messages",
]
