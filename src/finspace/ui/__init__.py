"""The Space's web UI and Gradio API (``build_ui``), and the Service it shares with the REST routes.

Modules: service (engine access, loads, auth, JSON views), chat (conversation
state, coalesced streaming), views (text and plot data), api (the named Gradio
endpoints), blocks (the page). Nothing runs on import.
"""

from finspace.ui.blocks import build_ui
from finspace.ui.service import Service

__all__ = ["build_ui", "Service"]
