"""scripts/space_check.py's logic on canned pip reports (no pip, no network): what step 2 replaces, the conflicts
left behind (pip check's rule and wording), which of them touch finspace, and that its list of imported
distributions covers every import in src/finspace and app.py."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("space_check", ROOT / "scripts" / "space_check.py")
sc = importlib.util.module_from_spec(_spec)
sys.modules["space_check"] = sc  # dataclasses look their module up
_spec.loader.exec_module(sc)

MARKERS = {
    "python_version": "3.12",
    "python_full_version": "3.12.1",
    "sys_platform": "linux",
    "platform_machine": "x86_64",
    "platform_system": "Linux",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "platform_release": "",
    "platform_version": "",
    "implementation_version": "3.12.1",
}


def item(name, version, *requires, extras=None, provides=()):
    out = {
        "metadata": {
            "name": name,
            "version": version,
            "requires_dist": list(requires),
            "provides_extra": list(provides),
        }
    }
    if extras:
        out["requested_extras"] = extras
    return out


# Step 1 as pip reported it with `vllm` unpinned, cut down; step 2 is gradio[oauth] on top.
STEP1 = {
    "environment": MARKERS,
    "install": [
        item(
            "vllm",
            "0.33.0",
            "pillow>=13.0.0",
            "torch==2.14.0",
            "pydantic>=2.12.0",
            'zentorch==2.14.0.1; extra == "zen"',
            'uvloop; sys_platform == "win32"',
        ),
        item("torch", "2.14.0", "setuptools"),
        item("Pillow", "13.0.0"),
        item("pydantic", "2.14.4"),
        item("setuptools", "80.0.0"),
        item("mcp", "2.3.0", "pydantic>=2.11"),
    ],
}
STEP2 = {
    "environment": MARKERS,
    "install": [
        item(
            "gradio",
            "6.31.0",
            "pillow<13.0,>=8.0",
            "pydantic<=3.0,>=2.0",
            "authlib; extra == 'oauth'",
            "mcp<2.0.0,>=1.21.0; extra == 'mcp'",
            extras=["oauth"],
            provides=["oauth", "mcp"],
        ),
        item("pillow", "12.3.0"),
        item("Authlib", "1.9.10"),
    ],
}


def test_step2_replacements_are_listed():
    d1, d2 = sc.dists_from_report(STEP1), sc.dists_from_report(STEP2)
    assert sc.changes(d1, d2) == [("pillow", "13.0.0", "12.3.0")]


def test_the_downgrade_leaves_vllms_conflict_in_pips_words():
    env = sc.combine(sc.dists_from_report(STEP1), sc.dists_from_report(STEP2))
    found = sc.conflicts(env, MARKERS)
    assert [c.line for c in found] == ["vllm 0.33.0 requires pillow>=13.0.0, but you have pillow 12.3.0."]
    assert found[0].touches(sc.IMPORTED_DISTS)


def test_markers_and_unrequested_extras_are_skipped_requested_ones_checked():
    env = sc.dists_from_report(
        {
            "install": [
                item("gradio", "6.31.0", "authlib; extra == 'oauth'", "mcp<2; extra == 'mcp'", extras=["oauth"]),
                item("vllm", "0.32.0", 'uvloop; sys_platform == "win32"', 'zentorch; extra == "zen"'),
            ]
        }
    )
    assert [c.line for c in sc.conflicts(env, MARKERS)] == ["gradio 6.31.0 requires authlib, which is not installed."]


@pytest.mark.parametrize(
    "requirer, dep, touches",
    [
        ("vllm", "pillow", True),  # finspace imports vllm
        ("somepkg", "pydantic", True),  # ... and pydantic
        ("somepkg", "pillow", False),
    ],
)
def test_a_conflict_touches_finspace_through_either_side(requirer, dep, touches):
    assert sc.Conflict(requirer, "1", f"{dep}>=2", dep, "1").touches(sc.IMPORTED_DISTS) is touches


def test_nothing_to_report_when_step2_agrees():
    step2 = {"install": [item("gradio", "6.31.0", "pillow<13", extras=["oauth"]), item("spaces", "0.51.3")]}
    step1 = {"install": [item("vllm", "0.32.0", "pillow>=12.3.0"), item("pillow", "12.3.0")]}
    d1, d2 = sc.dists_from_report(step1), sc.dists_from_report(step2)
    assert sc.changes(d1, d2) == [] and sc.conflicts(sc.combine(d1, d2), MARKERS) == []


def test_pins_and_card_are_read(tmp_path):
    req = tmp_path / "r.txt"
    req.write_text("# c\nvllm==0.32.0\ngradio_client == 2.7.2  # x\nhttpx\nfoo[bar]==1.0\n")
    assert sc.pinned(req) == {"vllm": "0.32.0", "gradio-client": "2.7.2", "foo": "1.0"}
    assert sc.card_field(ROOT / "README_HF_SPACE.md", "python_version") == "3.12"
    with pytest.raises(SystemExit, match="no nothing_here"):
        sc.card_field(ROOT / "README_HF_SPACE.md", "nothing_here")


MODULE_DIST = {
    "yaml": "pyyaml",
    "pynvml": "nvidia-ml-py",
    "gradio_client": "gradio-client",
    "huggingface_hub": "huggingface-hub",
    "bs4": "beautifulsoup4",
    "docx": "python-docx",
}


def _third_party_imports() -> set[str]:
    found = set()
    for path in [ROOT / "app.py", *(ROOT / "src" / "finspace").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m not in ("finspace", "__future__")}


def test_imported_dists_cover_every_import():
    dists = {sc.canonical(MODULE_DIST.get(m, m)) for m in _third_party_imports()}
    assert "vllm" in dists and "gradio" in dists  # the scan sees imports at all
    assert dists - sc.IMPORTED_DISTS == set(), "add these to IMPORTED_DISTS in scripts/space_check.py"


def test_every_imported_dist_is_pinned_for_the_space():
    assert sc.IMPORTED_DISTS - set(sc.pinned(ROOT / "requirements.txt")) == set()


def test_verdict_lets_off_path_conflicts_pass_and_fails_on_a_replaced_pin():
    d1 = sc.dists_from_report(
        {"install": [item("vllm", "0.32.0", "mcp>=2.0.0,<3.0.0"), item("mcp", "2.3.0"), item("pydantic", "2.14.4")]}
    )
    mcp_only = sc.dists_from_report({"install": [item("mcp", "1.30.0")]})
    lines, failed = sc.verdict(d1, mcp_only, MARKERS, {"vllm": "0.32.0", "pydantic": "2.14.4"})
    assert not failed
    assert any("off finspace's path" in x and "vllm 0.32.0 requires mcp<3.0.0,>=2.0.0" in x for x in lines)
    with_pydantic = sc.dists_from_report({"install": [item("mcp", "1.30.0"), item("pydantic", "2.12.5")]})
    lines, failed = sc.verdict(d1, with_pydantic, MARKERS, {"vllm": "0.32.0", "pydantic": "2.14.4"})
    assert failed and "  replaced: pydantic 2.14.4 -> 2.12.5   (pinned in requirements.txt)" in lines


def test_off_path_dependencies_are_not_imported_by_finspace():
    dists = {sc.canonical(MODULE_DIST.get(m, m)) for m in _third_party_imports()}
    assert set(sc.OFF_FINSPACE_PATH) & dists == set()


def test_mcp_replaced_by_gradio_mcp_passes_because_finspace_runs_on_either_major():
    d1 = sc.dists_from_report({"install": [item("vllm", "0.32.0", "mcp>=2.0.0,<3.0.0"), item("mcp", "2.3.0")]})
    d2 = sc.dists_from_report({"install": [item("mcp", "1.30.0")]})
    lines, failed = sc.verdict(d1, d2, MARKERS, {"vllm": "0.32.0", "mcp": "2.3.0"})
    assert not failed, lines
    assert any(
        x.startswith("  replaced: mcp 2.3.0 -> 1.30.0   (pinned in requirements.txt); finspace takes either")
        for x in lines
    ), lines
    other = sc.dists_from_report({"install": [item("jsonschema", "4.0.0")]})
    d1 = sc.dists_from_report({"install": [item("jsonschema", "4.26.0")]})
    assert sc.verdict(d1, other, MARKERS, {"jsonschema": "4.26.0"})[1]  # any other pin replaced still fails
