"""The wall in front of every route: the guard (a pure ASGI middleware around the whole app), the allow-list
of routes and methods, per-client events, throttles, the client's address, uploads, Gradio's replies made safe.

May import: errors, settings (tests/test_imports.py).
"""
