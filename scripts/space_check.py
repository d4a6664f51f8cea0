"""Replay the Hugging Face Space builder's two install steps with pip's resolver, installing nothing.

The builder runs, in one container:

    step 1: pip install -r requirements.txt
    step 2: pip install "gradio[oauth]==<sdk_version>" "uvicorn>=0.14.0" spaces      (on top)

(or gradio[oauth,mcp]: both variants are replayed, see STEP2_EXTRAS).

Step 2 sees step 1's packages as installed: pip keeps an installed version that
satisfies step 2's requirements and replaces one that does not, without looking at
who else needed it. That is how a build "succeeds" and then prints
"vllm 0.33.0 requires pillow>=13.0.0, but you have pillow 12.3.0".

How it is replayed, in a throwaway venv made with the Space's Python version:

1. ``pip install --dry-run --ignore-installed --report`` of requirements.txt: what step 1 installs.
2. Each package of that report is written into the venv's site-packages as bare
   metadata (a ``.dist-info`` folder with METADATA: name, version, Requires-Dist),
   so pip sees step 1 as installed without a byte of it being downloaded.
3. ``pip install --dry-run --report`` of step 2 in that venv: the packages pip would
   add or replace on top, decided by pip's own rules for installed packages.
   (Constraining step 2 with step 1's pins instead would make pip fail to resolve
   where the builder downgrades; resolving both steps together would pick versions
   that agree, hiding exactly the conflict the builder has.)
4. The final set (step 1, replaced by step 2) is checked the way ``pip check`` does:
   each package's requirements (markers evaluated for the venv's Python) against the
   versions present.

pip runs isolated: no configuration files, no PIP_* variables, only PyPI
(``--index-url``). This machine's pip is configured with local wheel folders, extra
local indexes and a constraints file capping torch; a replay that used them would
answer for this machine, not for the Space.

Exit 1 when, in either variant, a conflict touches a distribution finspace imports
(either side of it, unless the dependency is listed in OFF_FINSPACE_PATH with the
reason), or when step 2 replaces a package that requirements.txt pins (the Space
would then not run the version the tests ran); 0 otherwise. Run: ``make space-check``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

try:
    from packaging.markers import InvalidMarker
    from packaging.requirements import InvalidRequirement, Requirement
except ImportError:  # a bare interpreter: pip's own copy
    from pip._vendor.packaging.markers import InvalidMarker
    from pip._vendor.packaging.requirements import InvalidRequirement, Requirement

ROOT = Path(__file__).resolve().parents[1]
PYPI = "https://pypi.org/simple"

# Distributions whose modules finspace (src/finspace, app.py) imports; tests/test_space_check.py
# fails when an import appears that this set does not cover.
IMPORTED_DISTS = frozenset(
    {
        "vllm",
        "torch",
        "transformers",
        "tokenizers",
        "safetensors",
        "gradio",
        "gradio-client",
        "fastapi",
        "starlette",
        "uvicorn",
        "pydantic",
        "huggingface-hub",
        "pyyaml",
        "psutil",
        "nvidia-ml-py",
        "pandas",
        "pypdf",
        "pypdfium2",
        "beautifulsoup4",
        "lxml",
        "python-docx",
        "openpyxl",
        "bm25s",  # finspace.documents
        "anyio",  # finspace.openai_api and mcp_server (request checks in worker threads)
        "gguf",
        "accelerate",
        "filelock",  # finspace.models.gguf (the CPU default's checkpoint)
        "python-multipart",  # finspace.wall.uploads (the parse Gradio's upload route makes)
        "httpx",
        "openai",
        "prometheus-client",  # finspace.remote (an OpenAI-compatible endpoint, its /metrics)
        "mcp",
        "jsonschema",
        "httpcore",  # finspace.mcp_server (MCP over streamable HTTP)
    }
)


# Step 2 as the builder may run it: field notes say gradio[oauth]; the replay the issue reports (mcp and pydantic
# moved) is what gradio[oauth,mcp] does. Both are checked.
STEP2_EXTRAS = ("oauth", "oauth,mcp")

# Dependencies whose conflicts do not reach finspace, with the reason (checked in vLLM 0.32's source).
OFF_FINSPACE_PATH: dict[str, str] = {}

# Dependencies finspace imports that it runs on at either version a variant leaves: their conflicts and their
# replacement by step 2 do not fail the replay, with the reason. gradio[mcp] puts mcp 1.x back over the pinned 2.3.0.
EITHER_VERSION = {
    "mcp": "finspace.mcp_server runs on mcp 1.x and 2.x (tests/test_mcp_sdk.py); vLLM imports it only in its "
    "OpenAI server's MCP tool server and Responses API (vllm/entrypoints/mcp, vllm/entrypoints/openai/"
    "responses), and finspace runs AsyncLLM",
}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Dist:
    name: str  # canonical
    version: str
    requires: tuple[str, ...]  # Requires-Dist lines
    extras: tuple[str, ...] = ()  # extras it was requested with


@dataclass(frozen=True)
class Conflict:
    requirer: str
    requirer_version: str
    requirement: str
    dep: str
    dep_version: str | None  # None: not installed

    @property
    def line(self) -> str:
        """The sentence pip prints for it."""
        if self.dep_version is None:
            return f"{self.requirer} {self.requirer_version} requires {self.dep}, which is not installed."
        return (
            f"{self.requirer} {self.requirer_version} requires {self.requirement}, "
            f"but you have {self.dep} {self.dep_version}."
        )

    def touches(self, dists: frozenset[str]) -> bool:
        return self.requirer in dists or self.dep in dists


def dists_from_report(report: dict) -> dict[str, Dist]:
    """The packages a pip ``--report`` would install, by canonical name."""
    out = {}
    for item in report.get("install", []):
        md = item["metadata"]
        name = canonical(md["name"])
        out[name] = Dist(
            name, md["version"], tuple(md.get("requires_dist", ())), tuple(item.get("requested_extras") or ())
        )
    return out


def combine(step1: dict[str, Dist], step2: dict[str, Dist]) -> dict[str, Dist]:
    """What is installed after step 2 ran on top of step 1."""
    return {**step1, **step2}


def changes(step1: dict[str, Dist], step2: dict[str, Dist]) -> list[tuple[str, str, str]]:
    """(name, version after step 1, version after step 2) for each package step 2 replaces."""
    return sorted(
        (n, step1[n].version, d.version) for n, d in step2.items() if n in step1 and step1[n].version != d.version
    )


def conflicts(env: dict[str, Dist], markers: dict[str, str]) -> list[Conflict]:
    """Every requirement of every package in ``env`` that the versions present do not meet (pip check's rule)."""
    out = []
    for dist in sorted(env.values(), key=lambda d: d.name):
        for line in dist.requires:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            if req.marker is not None:
                try:
                    wanted = any(req.marker.evaluate({**markers, "extra": e}) for e in ("", *dist.extras))
                except InvalidMarker:
                    wanted = True
                if not wanted:
                    continue
            dep = canonical(req.name)
            have = env.get(dep)
            if have is None:
                out.append(Conflict(dist.name, dist.version, str(req), dep, None))
            elif not req.specifier.contains(have.version, prereleases=True):
                out.append(Conflict(dist.name, dist.version, f"{dep}{req.specifier}", dep, have.version))
    return out


def pinned(requirements: Path) -> dict[str, str]:
    """name -> version for each ``name==version`` line of a requirements file."""
    out = {}
    for line in requirements.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*==\s*([^\s;]+)", line)
        if m:
            out[canonical(m.group(1))] = m.group(3)
    return out


def card_field(card: Path, field: str) -> str:
    m = re.search(rf"^{field}:\s*\"?([^\"\s]+)\"?\s*$", card.read_text(), re.M)
    if not m:
        raise SystemExit(f"{card}: no {field} in the front matter")
    return m.group(1)


# ------------------------------------------------------------------ pip, for real
def _isolated_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # pip then reads no configuration file at all
    env["PYTHONNOUSERSITE"] = "1"
    return env


def _pip(python: Path, *args: str) -> None:
    cmd = [str(python), "-m", "pip", "--isolated", "--disable-pip-version-check", *args]
    r = subprocess.run(cmd, env=_isolated_env(), capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-4000:] + r.stderr[-4000:])
        raise SystemExit(f"pip failed: {' '.join(cmd[3:])}")


def _resolve(python: Path, report: Path, *args: str) -> dict:
    _pip(python, "install", "--dry-run", "--quiet", "--index-url", PYPI, "--report", str(report), *args)
    return json.loads(report.read_text())


def _write_metadata(site: Path, md: dict) -> None:
    """Make pip see a package of a report as installed: a .dist-info folder holding only its metadata."""
    info = site / f"{md['name'].replace('-', '_')}-{md['version']}.dist-info"
    info.mkdir()
    lines = ["Metadata-Version: 2.1", f"Name: {md['name']}", f"Version: {md['version']}"]
    if md.get("requires_python"):
        lines.append(f"Requires-Python: {md['requires_python']}")
    lines += [f"Provides-Extra: {e}" for e in md.get("provides_extra", ())]  # or pip drops gradio[oauth]'s extra
    lines += [f"Requires-Dist: {r}" for r in md.get("requires_dist", ())]
    (info / "METADATA").write_text("\n".join(lines) + "\n")
    (info / "INSTALLER").write_text("space-check\n")
    (info / "RECORD").write_text("")


def replay(requirements: Path, variants: list[list[str]], python: str, workdir: Path) -> tuple[dict, list[dict], dict]:
    """pip's reports for step 1 and for each variant of step 2 (each on top of step 1 alone), and the markers."""
    venv = workdir / "venv"
    try:
        subprocess.run([python, "-m", "venv", str(venv)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        raise SystemExit(
            f"cannot make a venv with {python!r}: give --python PATH, a Python of the card's "
            "python_version (the Space's), so markers and wheels resolve as they will there"
        ) from None
    vpy = venv / "bin" / "python"
    _pip(vpy, "install", "--quiet", "--index-url", PYPI, "--upgrade", "pip")  # a current pip, like the builder's
    r1 = _resolve(vpy, workdir / "step1.json", "--ignore-installed", "-r", str(requirements))
    site = Path(
        subprocess.run(
            [str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    for item in r1["install"]:
        if canonical(item["metadata"]["name"]) not in ("pip", "setuptools", "wheel"):
            _write_metadata(site, item["metadata"])
    r2s = [_resolve(vpy, workdir / f"step2-{i}.json", *step2) for i, step2 in enumerate(variants)]
    return r1, r2s, r1.get("environment", {})


def verdict(
    d1: dict[str, Dist],
    d2: dict[str, Dist],
    markers: dict[str, str],
    pins: dict[str, str],
) -> tuple[list[str], bool]:
    """The report lines for one step-2 variant, and whether it fails."""
    found = conflicts(combine(d1, d2), markers)
    moved = changes(d1, d2)
    lines = []
    added = sorted(f"{n} {d.version}" for n, d in d2.items() if n not in d1)
    if added:
        lines.append(f"  added: {', '.join(added)}")
    lines += [
        f"  replaced: {n} {old} -> {new}"
        + ("   (pinned in requirements.txt)" if n in pins else "")
        + (f"; finspace takes either ({EITHER_VERSION[n]})" if n in EITHER_VERSION else "")
        for n, old, new in moved
    ]
    exempt = {**OFF_FINSPACE_PATH, **EITHER_VERSION}
    bad = [c for c in found if c.touches(IMPORTED_DISTS) and c.dep not in exempt]
    for c in found:
        why = (
            "CONFLICT "
            if c in bad
            else f"conflict, off finspace's path ({exempt[c.dep]}): "
            if c.dep in exempt
            else "conflict, not imported by finspace: "
        )
        lines.append("  " + why + c.line)
    repinned = [m for m in moved if m[0] in pins and m[0] not in EITHER_VERSION]
    if bad or repinned:
        lines.append(
            f"  FAIL: {len(bad)} conflict(s) touching what finspace imports, "
            f"{len(repinned)} pinned package(s) replaced by step 2"
        )
    return lines, bool(bad or repinned)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requirements", type=Path, default=ROOT / "requirements.txt")
    ap.add_argument("--card", type=Path, default=ROOT / "README_HF_SPACE.md")
    ap.add_argument("--python", help="interpreter for the throwaway venv (default: python<card's python_version>)")
    ap.add_argument("--keep", type=Path, help="keep the venv and pip's reports in this folder")
    args = ap.parse_args(argv)

    sdk = card_field(args.card, "sdk_version")
    python = args.python or f"python{card_field(args.card, 'python_version')}"
    variants = [[f"gradio[{extras}]=={sdk}", "uvicorn>=0.14.0", "spaces"] for extras in STEP2_EXTRAS]
    t0 = time.monotonic()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        r1, r2s, markers = replay(args.requirements, variants, python, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="space-check-") as tmp:
            r1, r2s, markers = replay(args.requirements, variants, python, Path(tmp))
    d1 = dists_from_report(r1)
    pins = pinned(args.requirements)

    def v(name: str) -> str:
        return d1[name].version if name in d1 else "-"

    print(
        f"replayed with Python {markers.get('python_full_version', '?')}, pip {r1.get('pip_version', '?')}, "
        f"index {PYPI} only, in {time.monotonic() - t0:.0f} s"
    )
    print(
        f"step 1 (-r {args.requirements.name}): {len(d1)} packages; vllm {v('vllm')}, torch {v('torch')}, "
        f"gradio {v('gradio')}, pydantic {v('pydantic')}, pillow {v('pillow')}"
    )
    failed = False
    for step2, r2 in zip(variants, r2s):
        d2 = dists_from_report(r2)
        lines, bad = verdict(d1, d2, markers, pins)
        failed |= bad
        print(f"step 2 ({' '.join(step2)}): {len(d2)} packages added or replaced")
        print("\n".join(lines))
    if failed:
        print("FAIL")
        return 1
    print("OK: no conflict touches what finspace imports; step 2 keeps every pin")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
