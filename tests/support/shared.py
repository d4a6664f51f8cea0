"""App servers shared between test modules: one `python app.py` per set of settings (same catalogue, same
environment: same server), started by the first test that needs it and stopped right after the last one.

A shared server is a session-scoped fixture of tests/conftest.py that registers its server here
(``Lifetimes.started``). At collection, ``plan`` moves each shared server's modules next to the first of them
(otherwise in the order collected) and notes the last test that uses it; the conftest's
``pytest_runtest_teardown`` hook calls ``done`` after each test, which stops the servers whose last user that
was. So a shared server lives for the span of its modules, not the session, and two shared servers are not
held at once unless one test uses both.

Modules that change a server's settings, kill it, or need a fresh one keep their own module fixture. A module
that shares one leaves it as it found it (model "a" ready, say): each module's own ``server`` fixture checks
that state first, so the modules pass in any order and alone.
"""

from __future__ import annotations

from collections.abc import Iterable


class Lifetimes:
    """Which test uses each shared server last, and the servers started; ``done`` stops a server after its last
    test. ``names`` are the session fixtures that start shared servers."""

    def __init__(self, names: Iterable[str]):
        self.names = tuple(names)
        self.last: dict[str, object] = {}  # fixture name -> the last test (the item) that uses it
        self.live: dict[str, object] = {}  # fixture name -> its server (anything with stop())

    def plan(self, items: list) -> None:
        """Group each shared server's modules (in place, stable) and note each server's last test."""
        uses: dict[str, set[str]] = {}  # module -> the shared servers its tests use
        first: dict[str, int] = {}  # module -> the position of its first test
        for pos, item in enumerate(items):
            module = _module(item)
            first.setdefault(module, pos)
            uses.setdefault(module, set()).update(n for n in self.names if n in getattr(item, "fixturenames", ()))
        anchor: dict[str, int] = {}  # shared server -> the position of the first module that uses it
        for module in sorted(first, key=first.get):
            for n in sorted(uses[module]):
                anchor.setdefault(n, first[module])
        key = {m: (min([first[m]] + [anchor[n] for n in uses[m]]), first[m]) for m in first}
        items.sort(key=lambda item: key[_module(item)])
        self.last = {}
        for item in items:
            for n in self.names:
                if n in getattr(item, "fixturenames", ()):
                    self.last[n] = item

    def started(self, name: str, server) -> None:
        self.live[name] = server

    def done(self, item) -> None:
        """After ``item``: stop every shared server whose last user it was."""
        for name in [n for n, last in self.last.items() if last is item and n in self.live]:
            self.live.pop(name).stop()

    def stop_all(self) -> None:
        for name in list(self.live):
            self.live.pop(name).stop()


def _module(item) -> str:
    return item.nodeid.split("::", 1)[0]
