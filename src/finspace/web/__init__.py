"""The HTTP app: FastAPI's REST routes with the Gradio UI and /v1 mounted behind the wall (``server``), and
uvicorn with its limits (``http_server``).

May import: errors, host, models, ledger, engine, documents, scoreboard, settings, wall, remote, fit, service, openai_api, ui, mcp_server (tests/test_imports.py).
"""
