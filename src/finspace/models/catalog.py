"""models.yaml: the catalogue, read and validated.

Every mistake in the file is one clear error naming the entry and the field:
unknown keys, missing fields, duplicate keys, wrong types, zero or negative
sizes, a missing bundled config.json. A typo never silently becomes a default.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from finspace import planner
from finspace.errors import BadInput, CatalogError, UnknownModel

REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_CATALOG = REPO_ROOT / "models.yaml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Serving(_Strict):
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    max_model_len: int | Literal["auto"] = Field(...)
    gpu_memory_utilization: float = 0.90  # the catalogue's default, below vLLM's 0.92
    quantization: Literal["fp8", "awq", "gptq", "bitsandbytes", "compressed-tensors"] | None = None
    # A checkpoint quantized before upload: vLLM reads the scheme from its config.json, so no quantization is
    # passed to it; the planner plans the weights from this scheme (PREQUANTIZED) when the bundled config.json
    # (often the base model's) has no quantization_config.
    prequantized: Literal["fp8", "compressed-tensors-fp8", "compressed-tensors-w4a16", "awq", "gptq"] | None = None
    kv_cache_dtype: Literal["auto", "fp8"] = "auto"
    tensor_parallel_size: int = Field(1, ge=1, le=64)
    max_num_batched_tokens: int | None = Field(None, gt=0)
    max_num_seqs: int | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _one_quantization(self):
        if self.prequantized is not None and self.quantization is not None:
            raise ValueError(
                f"give 'quantization' (applied by vLLM at load time) or 'prequantized' (the checkpoint "
                f"is already quantized: vLLM reads its scheme), not both; a {self.prequantized} "
                f"checkpoint takes prequantized: {self.prequantized} alone"
            )
        return self

    @field_validator("max_model_len")
    @classmethod
    def _positive_len(cls, v):
        if isinstance(v, int) and v <= 0:
            raise ValueError("must be a positive number of tokens or 'auto'")
        return v

    @field_validator("gpu_memory_utilization", mode="before")
    @classmethod
    def _int_is_float(cls, v):
        # strict mode rejects int for float
        return float(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("gpu_memory_utilization")
    @classmethod
    def _utilization(cls, v):
        # the planner's check, the one for every gpu_memory_utilization: (0, 1], as vLLM's CacheConfig
        try:
            return planner.check_gpu_memory_utilization(v)
        except BadInput as exc:
            raise ValueError(str(exc)) from None


def _ct(bits: int, kind: str, strategy: str, group_size: int | None = None) -> dict:
    weights = {"num_bits": bits, "type": kind, "strategy": strategy, "symmetric": True}
    if group_size:
        weights["group_size"] = group_size
    return {"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": weights}}}


#: the quantization_config each pre-quantized scheme writes into config.json (as the quantizers publish them)
PREQUANTIZED = {
    "fp8": {"quant_method": "fp8", "activation_scheme": "dynamic"},
    "compressed-tensors-fp8": _ct(8, "float", "channel"),  # llm-compressor FP8_DYNAMIC
    "compressed-tensors-w4a16": _ct(4, "int", "group", 128),  # llm-compressor W4A16
    "awq": {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True},
    "gptq": {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True},
}


class Sampling(_Strict):
    temperature: float = Field(0.7, ge=0, le=2)
    top_p: float = Field(0.95, gt=0, le=1)
    max_tokens: int = Field(512, gt=0, le=32768)

    @field_validator("temperature", "top_p", mode="before")
    @classmethod
    def _int_is_float(cls, v):
        return float(v) if isinstance(v, int) and not isinstance(v, bool) else v


class Convert(_Strict):
    """A checkpoint made on first use from a GGUF file shipped inside an installed Python package
    (finspace.models.gguf): ``package`` and ``version`` as pip names them, ``file`` relative to site-packages."""

    package: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    version: str = Field(pattern=r"^[0-9][A-Za-z0-9.+!-]*$")
    file: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_./-]*\.gguf$")

    @field_validator("file")
    @classmethod
    def _inside(cls, v):
        if ".." in v.split("/"):
            raise ValueError("must be a path inside the package's folder (no '..')")
        return v

    def pip_install(self, *, again: bool = False) -> str:
        """The command that installs the package (``again``: over a broken copy)."""
        return f"pip install --no-deps {'--force-reinstall ' if again else ''}{self.package}=={self.version}"


class _Entry(_Strict):
    label: str = Field(min_length=1)
    description: str = Field(min_length=1)
    repo: str | None = Field(None, pattern=r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
    revision: str | None = None
    path: str | None = None
    generate: str | None = None
    convert: Convert | None = None  # made on first use from a GGUF file in an installed package
    architecture: Literal["llama", "qwen2", "qwen3", "mistral", "gemma2", "gemma3", "gemma3_text", "gpt_neox"]
    config: str | None = None
    total_size_bytes: int | None = Field(None, gt=0)
    system_prompt: str = ""
    # the model thinks before answering, in tags vLLM's reasoning parser of this name splits off (Qwen 3)
    reasoning: Literal["qwen3"] | None = None
    # the vLLM tool parser that reads the model's tool calls (finspace.tools.calls): hermes for Qwen 3 and
    # ChatML-style models, llama3_json for Llama 3.1, pythonic for Gemma 3; without one, /v1 refuses tools
    tool_parser: Literal["hermes", "llama3_json", "pythonic"] | None = None
    serving: Serving
    sampling: Sampling = Sampling()

    @model_validator(mode="after")
    def _one_source(self):
        if sum(x is not None for x in (self.repo, self.path, self.convert)) != 1:
            raise ValueError(
                "give exactly one of 'repo' (a Hugging Face repo id), 'path' (a local folder) or "
                "'convert' (a GGUF file in an installed Python package)"
            )
        if (self.repo is not None or self.convert is not None) and self.config is None:
            raise ValueError(
                "'config' is required for a repo or convert entry: bundle a copy of its config.json under configs/"
            )
        if self.generate is not None and self.path is None:
            raise ValueError("'generate' needs 'path': where the generated model is written")
        return self


class _Defaults(_Strict):
    gpu: str
    cpu: str


class _File(_Strict):
    defaults: _Defaults
    models: dict[str, _Entry] = Field(min_length=1)


@dataclass(frozen=True)
class ModelEntry:
    key: str
    label: str
    description: str
    architecture: str
    repo: str | None
    revision: str | None
    local_path: Path | None
    generate: str | None
    config_path: Path | None
    total_size_bytes: int | None
    system_prompt: str
    serving: Serving
    sampling: Sampling
    reasoning: str | None = None
    convert: Convert | None = None
    tool_parser: str | None = None

    @property
    def is_local(self) -> bool:
        return self.local_path is not None

    @property
    def source(self) -> str:
        if self.convert is not None:
            return f"{self.convert.package}=={self.convert.version}: {self.convert.file}"
        return self.repo if self.repo else str(self.local_path)

    def config(self) -> dict:
        """The model's config.json: the bundled copy, the local folder's, or a generated preset's; for a
        pre-quantized checkpoint planned from its base model's config, with the scheme's quantization_config."""
        config = self._config()
        scheme = self.serving.prequantized
        if scheme is not None and "quantization_config" not in config:
            config = {**config, "quantization_config": PREQUANTIZED[scheme]}
        return config

    def _config(self) -> dict:
        if self.config_path is not None:
            return json.loads(self.config_path.read_text())
        assert self.local_path is not None
        cfg = self.local_path / "config.json"
        if cfg.is_file():
            return json.loads(cfg.read_text())
        if self.generate:
            from finspace.models import demo  # pure preset table, no torch

            return demo.preset_config(self.generate)
        raise CatalogError(
            f"model {self.key!r}: no config.json in {self.local_path}; "
            f"generate it with `python -m finspace demo-model {self.local_path}` or give 'config'"
        )

    def planner_settings(self, **overrides) -> planner.Settings:
        s = self.serving
        values = dict(
            dtype=s.dtype,
            quantization=s.quantization,
            kv_cache_dtype=s.kv_cache_dtype,
            max_model_len=-1 if s.max_model_len == "auto" else s.max_model_len,  # -1: largest that fits, as vLLM
            gpu_memory_utilization=s.gpu_memory_utilization,
            tensor_parallel_size=s.tensor_parallel_size,
            max_num_batched_tokens=s.max_num_batched_tokens,
            max_num_seqs=s.max_num_seqs,
        )
        values.update({k: v for k, v in overrides.items() if v is not None})
        return planner.Settings(**values)


@dataclass(frozen=True)
class Catalog:
    entries: tuple[ModelEntry, ...]
    default_gpu: str
    default_cpu: str
    path: Path

    def get(self, key: object) -> ModelEntry:
        if isinstance(key, str):
            for e in self.entries:
                if e.key == key:
                    return e
        shown = repr(key)[:80]
        raise UnknownModel(f"unknown model {shown}; choose one of the catalogue keys: {', '.join(self.keys())}")

    def keys(self) -> list[str]:
        return [e.key for e in self.entries]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self.keys()

    def default_key(self, has_gpu: bool) -> str:
        return self.default_gpu if has_gpu else self.default_cpu


class _UniqueKeyLoader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False):
    seen: dict = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise CatalogError(
                f"duplicate key {key!r} at line {key_node.start_mark.line + 1} "
                f"(first at line {seen[key] + 1}); remove or rename one"
            )
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _describe(err: ValidationError, where: str, section: str = "models", noun: str = "model") -> str:
    lines = []
    for e in err.errors():
        loc = list(e["loc"])
        if len(loc) >= 2 and loc[0] == section:
            head = f"{noun} {loc[1]!r}"
            field = ".".join(str(x) for x in loc[2:] if not str(x).startswith("function-after"))
        else:
            head = "top level"
            field = ".".join(str(x) for x in loc)
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown key (typo?); remove it or use one of the documented fields"
        elif e["type"] == "missing":
            msg = "missing required field"
        field_txt = f" field {field!r}" if field else ""
        lines.append(f"{where}: {head}{field_txt}: {msg}")
    return "\n".join(lines)


def read_validated(
    path: Path,
    schema: type[BaseModel],
    *,
    what: str,
    keys: str,
    read_fix: str = "",
    section: str = "models",
    noun: str = "model",
) -> Any:
    """A YAML file (duplicate keys refused) validated by ``schema``; CatalogError names the file, entry and field.
    The catalogue and presets.yaml are both read this way."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise CatalogError(f"cannot read {what} {path}: {exc.strerror}{read_fix}") from None
    try:
        raw = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path.name} is not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise CatalogError(f"{path.name}: expected a mapping with {keys}")
    try:
        return schema.model_validate(raw)
    except ValidationError as exc:
        raise CatalogError(_describe(exc, path.name, section, noun)) from None


def load_catalog(path: str | os.PathLike | None = None) -> Catalog:
    """Read and validate models.yaml (default: $FINSPACE_CATALOG or the repo's models.yaml)."""
    path = Path(path or os.environ.get("FINSPACE_CATALOG") or DEFAULT_CATALOG)
    parsed = read_validated(
        path, _File, what="catalogue", keys="'defaults' and 'models'", read_fix="; set FINSPACE_CATALOG to models.yaml"
    )

    base = path.resolve().parent
    entries = []
    for key, e in parsed.models.items():
        if not key or not all(c.isalnum() or c in "-._" for c in key):
            raise CatalogError(f"{path.name}: model key {key!r}: use letters, digits, '-', '.', '_' only")
        config_path = (base / e.config) if e.config else None
        if config_path is not None and not config_path.is_file():
            raise CatalogError(
                f"{path.name}: model {key!r} field 'config': file {e.config} not found; bundle the repo's config.json there"
            )
        local = (base / e.path) if e.path else None
        if local is not None and not e.generate and config_path is None and not (local / "config.json").is_file():
            raise CatalogError(f"{path.name}: model {key!r} field 'path': no config.json in {e.path}")
        if e.generate is not None:
            from finspace.models import demo

            if e.generate not in demo.PRESETS:
                raise CatalogError(
                    f"{path.name}: model {key!r} field 'generate': unknown preset {e.generate!r}; use one of {', '.join(demo.PRESETS)}"
                )
        entries.append(
            ModelEntry(
                key=key,
                label=e.label,
                description=e.description,
                architecture=e.architecture,
                repo=e.repo,
                revision=e.revision,
                local_path=local,
                generate=e.generate,
                config_path=config_path,
                total_size_bytes=e.total_size_bytes,
                system_prompt=e.system_prompt,
                serving=e.serving,
                sampling=e.sampling,
                reasoning=e.reasoning,
                convert=e.convert,
                tool_parser=e.tool_parser,
            )
        )
    for which in ("gpu", "cpu"):
        k = getattr(parsed.defaults, which)
        if k not in parsed.models:
            raise CatalogError(f"{path.name}: defaults field {which!r}: {k!r} is not a model key in this file")
    return Catalog(tuple(entries), parsed.defaults.gpu, parsed.defaults.cpu, path)
