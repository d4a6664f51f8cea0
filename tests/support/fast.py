"""The fast lane (``make test-fast``, ``pytest --fast``): the tests that start no vLLM engine, app server or
browser, for a change to pure code. Every behaviour an issue names is still proven on the real engine by
``make test``; this lane only answers sooner.

A test is slow when it is marked ``engine`` or ``browser``, or uses a fixture that starts one of those (a module's
``server``, the shared servers, the tiny checkpoints, SmolLM2's conversion, an engine), or its module is one the
lanes know takes a minute or more.
"""

from __future__ import annotations

from support.lanes import LONG

SLOW_MARKS = ("engine", "browser")
SLOW_FIXTURES = frozenset(
    {
        "server",
        "surface_server",
        "shared_tiny_server",
        "shared_documents_server",
        "shared_smollm_server",
        "model_dir",
        "smollm_models",
        "page",
        "engine",
        "engine_catalog",
    }
)


def is_slow(item) -> bool:
    return (
        any(item.get_closest_marker(m) for m in SLOW_MARKS)
        or not SLOW_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))
        or item.nodeid.split("::", 1)[0] in LONG
    )  # the modules that take a minute or more (support.lanes)


def select(items: list, config) -> None:
    """Deselect the slow tests in place (reported as deselected, as ``-m`` does)."""
    slow = [i for i in items if is_slow(i)]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [i for i in items if not is_slow(i)]
