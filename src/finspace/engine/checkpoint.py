"""The checkpoint on disk: fetched from the Hugging Face Hub (or generated, or a local folder) and checked.

A broken download is caught here, before the running engine is stopped for the
next one. No vLLM.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from finspace.models.catalog import ModelEntry
from finspace.engine.prompt import short
from finspace.errors import LoadFailed

# Files vLLM needs from a repo: weights, configs, tokenizer, chat template, processor.
FETCH_PATTERNS = [
    "*.json",
    "*.safetensors",
    "tokenizer.model",
    "*.tiktoken",
    "*.jinja",
    "merges.txt",
    "vocab.txt",
]


async def fetch(
    entry: ModelEntry,
    *,
    hf_token: str | None = None,
    models_dir: Path | None = None,
    progress: Callable[[float, str], None] | None = None,
) -> str:
    """The folder vLLM loads ``entry`` from: generated, converted (into ``models_dir``, ``progress`` told how
    far) or local, else downloaded (``hf_token`` for gated repos); checked either way."""
    if entry.convert is not None:
        path = str(await asyncio.to_thread(_converted, entry, models_dir, _threadsafe(progress)))
    elif entry.local_path is not None:
        if entry.generate:
            from finspace.models import demo

            await asyncio.to_thread(demo.ensure_demo_model, entry.local_path, entry.generate)
        elif not (entry.local_path / "config.json").is_file():
            raise FileNotFoundError(f"no model at {entry.local_path}; check the entry's 'path'")
        path = str(entry.local_path)
    else:
        path = await asyncio.to_thread(fetch_repo, entry.repo, entry.revision, hf_token)
    await asyncio.to_thread(verify_checkpoint, Path(path))
    return path


def _converted(entry: ModelEntry, models_dir: Path | None, progress) -> Path:
    from finspace.models import gguf as convert

    if models_dir is None:
        raise LoadFailed(f"{entry.label} is converted on first use into the data folder, and none was given")
    return convert.ensure(entry.convert, models_dir, entry.key, progress=progress)


def _threadsafe(progress: Callable[[float, str], None] | None) -> Callable[[float, str], None] | None:
    """``progress``, called in the event loop from the worker thread that converts."""
    if progress is None:
        return None
    loop = asyncio.get_running_loop()
    return lambda fraction, message: loop.call_soon_threadsafe(progress, fraction, message)


def verify_checkpoint(path: Path) -> None:
    """Catch a broken download before the old engine is stopped: config, tokenizer, readable weights.

    ``safe_open`` checks each safetensors header against the file's size, so a
    truncated file fails here with a precise message instead of deep in vLLM.
    """
    from safetensors import safe_open

    if not (path / "config.json").is_file():
        raise LoadFailed(f"{path} has no config.json; the download is incomplete: delete it and load again")
    if not any(
        (path / name).is_file() for name in ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")
    ):
        raise LoadFailed(
            f"{path} has no tokenizer files (tokenizer.json / tokenizer.model); the checkpoint is incomplete"
        )
    shards = sorted(path.glob("*.safetensors"))
    if not shards:
        raise LoadFailed(f"{path} has no .safetensors weights; finspace serves safetensors checkpoints only")
    for shard in shards:
        try:
            with safe_open(str(shard), framework="numpy") as f:
                f.keys()
        except Exception as exc:
            raise LoadFailed(
                f"weights file {shard.name} is corrupt or truncated ({short(str(exc), 160)}); "
                f"delete it and download again"
            ) from None


def fetch_repo(repo: str, revision: str | None, token: str | None = None) -> str:
    """Download only what vLLM needs from ``repo``; ``token`` (the HF_TOKEN secret) for gated repos. Errors say
    what to do. No token: huggingface_hub looks for one itself."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import GatedRepoError, LocalEntryNotFoundError, RepositoryNotFoundError

    try:
        return snapshot_download(repo_id=repo, revision=revision, allow_patterns=FETCH_PATTERNS, token=token)
    except GatedRepoError:
        raise LoadFailed(f"{repo} is gated: accept its licence on the Hub and set the HF_TOKEN secret") from None
    except RepositoryNotFoundError:
        raise LoadFailed(
            f"{repo} was not found on the Hub (or is private): check the repo id or set HF_TOKEN"
        ) from None
    except LocalEntryNotFoundError:
        raise LoadFailed(
            f"cannot download {repo}: the Hugging Face Hub is unreachable and it is not cached; "
            f"connect to the network or pick a local model"
        ) from None
    except OSError as exc:
        if exc.errno == 28:
            raise LoadFailed(
                f"the disk is full while downloading {repo}; free space or point HF_HOME at a larger disk"
            ) from None
        raise
