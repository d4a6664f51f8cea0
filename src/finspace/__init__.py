"""finspace: finance LLMs on vLLM, with a memory planner that knows before it loads."""

from __future__ import annotations

from pathlib import Path

_PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"  # beside src/ in a checkout (and on a Space)


def version(pyproject: Path | None = _PYPROJECT, dist_version=None) -> str:
    """finspace's version, with or without `pip install`.

    A Space runs app.py from the copied source tree, never installed, so the source's own
    pyproject.toml comes first; an installed distribution's metadata next (which may
    belong to another checkout than the one imported, so it is only the fallback);
    "unknown" when neither exists.
    """
    if pyproject is not None and pyproject.is_file():
        import tomllib

        try:
            project = tomllib.loads(pyproject.read_text()).get("project", {})
        except (OSError, tomllib.TOMLDecodeError):
            project = {}
        if project.get("name") == "finspace" and project.get("version"):
            return str(project["version"])
    from importlib import metadata

    try:
        return (dist_version or metadata.version)("finspace")
    except metadata.PackageNotFoundError:
        return "unknown"


def __getattr__(name: str):
    if name == "__version__":  # computed when asked: nothing runs on import
        return version()
    raise AttributeError(f"module 'finspace' has no attribute {name!r}")
