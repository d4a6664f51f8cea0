"""finspace: finance LLMs on vLLM, with a memory planner that knows before it loads."""

__version__ = "0.1.0"
