"""The OpenAI-compatible API (/v1): ``request`` checks a chat-completions body, ``routes`` serves it.

May import: errors, structured, tools, engine, documents, wall, service (tests/test_imports.py).
"""

from finspace.openai_api.request import ApiError, ChatRequest, error_body, parse_chat
from finspace.openai_api.routes import add_openai_routes

__all__ = ["ApiError", "ChatRequest", "add_openai_routes", "error_body", "parse_chat"]
