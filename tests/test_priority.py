"""finspace.host.priority: the serving process's threads lowered below the engine's processes (no vLLM needed).

The lowering is irreversible for a process, so it runs in a child python, never in the test process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from finspace.errors import BadInput
from finspace.host.priority import Launcher, parse_nice
from helpers import REPO


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, 10),
        ("", 10),
        (" ", 10),  # unset: the default
        ("0", 0),
        ("7", 7),
        ("19", 19),
    ],
)
def test_parse_nice(value, expected):
    assert parse_nice(value, default=10) == expected


@pytest.mark.parametrize(
    "value, match",
    [
        ("abc", r"FINSPACE_FRONT_NICE='abc' is not a whole number; use 0 \(off\) to 19"),
        ("2.5", "is not a whole number"),
        ("20", r"FINSPACE_FRONT_NICE=20 is out of range; use 0 \(off\) to 19"),
        ("-1", "out of range"),  # raising a priority needs privileges this app does not have
    ],
)
def test_parse_nice_refuses_with_the_fix(value, match):
    with pytest.raises(BadInput, match=match):
        parse_nice(value, default=10)


def test_zero_steps_changes_nothing_and_makes_no_thread():
    launcher = Launcher(0)
    assert not launcher.active and launcher.pool() is None and launcher.lower_others() == 0


CHILD = r"""
import json, os, subprocess, sys, threading
from finspace.host.priority import Launcher, nice_of
base = nice_of(0)
launcher = Launcher(4)
pool = launcher.pool()                       # the launcher thread: made before the lowering
early = threading.Event(); stop = threading.Event()
t = threading.Thread(target=lambda: (early.set(), stop.wait())); t.start(); early.wait()
def spawn():                                 # what Engine._start does on the launcher: start a process
    return subprocess.run([sys.executable, "-c", "import os; print(os.getpriority(os.PRIO_PROCESS, 0))"],
                          capture_output=True, text=True).stdout.strip()
first = pool.submit(spawn).result()
changed = launcher.lower_others()
again = launcher.lower_others()              # idempotent
later_thread = []
t2 = threading.Thread(target=lambda: later_thread.append(nice_of(threading.get_native_id()))); t2.start(); t2.join()
second = pool.submit(spawn).result()          # an engine started after the lowering (a switch)
from_main = spawn()                            # a process started from a lowered thread
print(json.dumps({"base": base, "main": nice_of(threading.get_native_id()), "other": nice_of(t.native_id),
                  "changed": changed, "again": again, "later_thread": later_thread[0],
                  "first": int(first), "second": int(second), "from_main": int(from_main)}))
stop.set(); launcher.close()
"""


def test_lowers_every_thread_but_the_launcher_whose_processes_keep_the_base():
    res = subprocess.run(
        [sys.executable, "-c", CHILD],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    base = got["base"]
    if base >= 19:
        pytest.skip("the tests run at nice 19: there is no lower priority to check")
    low = min(19, base + 4)
    assert got["changed"] >= 2 and got["again"] == 0  # main and the other thread, once
    assert (got["main"], got["other"], got["later_thread"]) == (low, low, low)  # new threads inherit it
    assert (got["first"], got["second"]) == (base, base)  # the launcher's processes: before and after
    assert got["from_main"] == low  # what the lowered threads start is lowered too: why the launcher exists


@pytest.mark.parametrize("value, match", [("ten", "is not a whole number"), ("25", "is out of range")])
def test_the_app_refuses_a_bad_setting_before_it_starts(value, match):
    res = subprocess.run(
        [sys.executable, str(REPO / "app.py")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "FINSPACE_FRONT_NICE": value, "PORT": "1"},
    )
    assert res.returncode == 2, (res.stdout, res.stderr[-2000:])
    assert "error: FINSPACE_FRONT_NICE" in res.stderr and match in res.stderr and "use 0 (off) to 19" in res.stderr
