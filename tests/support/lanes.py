"""`make test` runs the suite in two lanes (pytest-xdist: ``-n 2 --dist loadgroup``): this machine has two cores,
and most of a test's time here is one of them importing vLLM, starting a server, or waiting on one.

Tests go to a lane by group, and a group never splits. The groups are worked out in the lanes (the workers) at
collection, where each test's fixtures are known, and written to a file the run's scheduler reads
(``GroupScheduling``: xdist's own ``xdist_group`` suffix on node ids does nothing under pytest 9, which keeps node
ids elsewhere):

* the tests that use one shared app server (``tests/conftest.py``'s ``shared_*_server``, and the reliability
  package's ``surface_server``) are one group, so the server starts once;
* every other module is a group of its own, so its module fixtures (a server, a converted filing) are built once.

Groups that start a real engine go first, the longest known first; the quick ones come last and fill whichever
lane ends early. A plain ``pytest`` (``make test-serial``, no ``-n``) runs everything in one process, in the
collected order.

Tests in two lanes run beside another app server, so no test may count the machine's totals (/dev/shm, socket
folders, processes): each counts what its own processes hold (support.footprint).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

# Groups that take a minute or more: seconds on one full run here (`pytest --junitxml`, a group's tests summed,
# setup included), so the longest start first and the lanes end together. The rest keep their order, those that
# start an engine before those that do not.
LONG = {
    "tests/test_engine.py": 490,
    "shared_smollm_server": 360,
    "surface_server": 350,
    "shared_tiny_server": 200,
    "tests/test_evals_app.py": 140,
    "tests/reliability/test_side_by_side.py": 130,
    "tests/test_tensor_parallel.py": 120,
    "tests/reliability/test_load.py": 115,
    "tests/reliability/test_faults.py": 105,
    "tests/reliability/test_surface_schemas.py": 95,
    "tests/test_remote_engine.py": 90,
    "tests/test_openai_api.py": 85,
    "tests/reliability/test_surface_matrix.py": 85,
    "tests/test_retrieval_filings.py": 80,
    "tests/test_browser.py": 75,
    "tests/test_ledger_engine.py": 70,
    "tests/test_convert.py": 65,
    "tests/test_openai_tools.py": 60,
    "shared_documents_server": 60,
    "tests/test_edgar_app.py": 145,
    "tests/reliability/test_surface_shares.py": 85,
}


def _module(item) -> str:
    return item.nodeid.split("::", 1)[0]


def groups_of(items: list, shared: tuple[str, ...]) -> dict[str, str]:
    """Each module's group: the first shared server any of its tests uses, else the module itself."""
    uses: dict[str, list[str]] = {}
    for item in items:
        names = getattr(item, "fixturenames", ())
        found = uses.setdefault(_module(item), [])
        found += [n for n in (*shared, "surface_server") if n in names and n not in found]
    return {m: (found[0] if found else m) for m, found in uses.items()}


def assign(items: list, shared: tuple[str, ...], config=None) -> None:
    """Order the groups (in place; stable within a group); in a lane, write each module's group for the
    scheduler. One process (no lanes) keeps the collected order, as support.shared groups it."""
    if config is None or not hasattr(config, "workerinput"):
        return
    by_module = groups_of(items, shared)
    first: dict[str, int] = {}
    engine: set[str] = set()
    for pos, item in enumerate(items):
        g = by_module[_module(item)]
        first.setdefault(g, pos)
        if item.get_closest_marker("engine") or g in ("surface_server", *shared):
            engine.add(g)

    def key(item):
        g = by_module[_module(item)]
        return -LONG.get(g, 0), g not in engine, first[g]

    items.sort(key=key)
    path = _groups_file(os.getppid())  # the run's process started the lanes
    tmp = path.with_suffix(f".{os.getpid()}")
    tmp.write_text(json.dumps(by_module))
    tmp.replace(path)


def _groups_file(run_pid: int) -> Path:
    return Path(tempfile.gettempdir()) / f"finspace-lanes-{run_pid}.json"


class GroupScheduling(LoadScopeScheduling):
    """xdist's load-by-scope scheduling with a module's group (``assign``) as its scope."""

    def __init__(self, config, log=None):
        super().__init__(config, log)
        self._path = _groups_file(os.getpid())
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        module = nodeid.split("::", 1)[0]
        if self._groups is None:  # read once, when the lanes have collected (the first scheduling)
            try:
                self._groups = json.loads(self._path.read_text())
            except (OSError, ValueError):
                self._groups = {}  # no file: a module per scope, as --dist loadfile
        return self._groups.get(module, module)

    def remove(self) -> None:
        self._path.unlink(missing_ok=True)
