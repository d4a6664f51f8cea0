"""The remote engine: finspace in front of an OpenAI-compatible vLLM endpoint (FINSPACE_ENGINE_URL).

One module per concept:

- ``engine``: ``RemoteEngine``, the second implementation of ``finspace.engine.api.EngineAPI``: its states,
  the served models as a live catalogue (choosing one is a selection, never a load), the health probe;
- ``chat``: one chat as a streamed /v1/chat/completions request (ChatSettings -> request parameters; the
  server's ``reasoning_content`` deltas as the thinking, its usage chunk as ChatInfo, Continue as vLLM's
  ``continue_final_message``); the openai client's failures as finspace.errors;
- ``endpoint``: the endpoint's other routes over httpx: ``/v1/models``, ``/tokenize``, ``/metrics``; the
  reasons an endpoint is unreachable, naming its host only (never the key, never the path);
- ``metrics``: vLLM's Prometheus text -> the memory panel's "remote" reading.

Nothing here runs on import or reads the environment (settings.RemoteSettings is passed in).

May import: errors, models, tools, engine, settings (tests/test_imports.py).
"""

from finspace.remote.engine import RemoteEngine

__all__ = ["RemoteEngine"]
