"""The Space's web UI and Gradio API (``build_ui``), over finspace.service.

Modules: chat (conversation state, coalesced streaming), views (text and plot
data), api (the named Gradio endpoints), blocks (the page). The UI imports
finspace.service and finspace.fit.render, never the engine's internals. Nothing runs
on import.

May import: errors, host, models, tools, engine, documents, matrix, scoreboard, service (tests/test_imports.py).
"""

from finspace.ui.blocks import build_ui

__all__ = ["build_ui"]
