"""Documents in the chat: an upload converted to text with pages (convert, upload), its fit against the loaded
model and the catalogue (fit), and its place in the prompt, whole or as the passages that fit (placing, passages).

May import: errors, tools, engine, xbrl (tests/test_imports.py).
"""
