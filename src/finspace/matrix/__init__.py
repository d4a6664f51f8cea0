"""The Filing Matrix: the same fields pulled from several filings, each value with its page and quote.

Rooms, each pure and small:
- ``fields``: a column's definition (name, type, instruction), the strict presets file ``matrix.yaml``
  and the bounds on what a caller may ask for;
- ``cells``: the JSON schema vLLM's structured outputs fill for one cell, and the typed cell read back;
- ``numbers``: numbers as filings write them (1,234.5; (1,234); 1.2 billion; 12.5%);
- ``verify``: each cell's quote checked against the text of the page it cites.
Nothing here runs on import, reads settings or touches the engine.

May import: errors, models, engine, xbrl, documents (tests/test_imports.py).
"""
