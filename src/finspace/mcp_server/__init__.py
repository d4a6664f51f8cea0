"""finspace as an MCP server (streamable HTTP at /gradio_api/mcp/, the official ``mcp`` SDK): see ``endpoint``.

Not named ``mcp``: that would shadow the SDK.

May import: errors, host, engine, documents, matrix, wall, service (tests/test_imports.py).
"""
