"""The OpenAI-compatible API end to end, with the official `openai` client against the real app (vLLM on CPU).

One server for the module: model "a" is the tiny llama with a 4,096-token context (greedy decoding never
picks its end token, so a stream runs until max_tokens), "b" the tiny Qwen 3. FINSPACE_API_KEYS is set and
FINSPACE_MAX_IN_FLIGHT is 2. Tests run in file order; each leaves "a" serving.
"""

from __future__ import annotations

import json
import shutil
import threading
import time

import httpx
import openai
import pytest
from transformers import AutoTokenizer

from helpers import demo_entry, write_catalog
from server_utils import ADMIN_TOKEN, Server

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]

KEY = "sk-test-finspace-key-0123456789"
SYSTEM = "You are a test model."
QUESTION = [{"role": "user", "content": "What is free cash flow?"}]
LONG = 3500


@pytest.fixture(scope="module")
def server(tmp_path_factory, model_dir):
    root = tmp_path_factory.mktemp("openai")
    long_ctx = root / "tiny-llama-4k"
    shutil.copytree(model_dir / "tiny-llama", long_ctx)
    cfg = json.loads((long_ctx / "config.json").read_text())
    cfg["max_position_embeddings"] = 4096
    (long_ctx / "config.json").write_text(json.dumps(cfg))
    models = {
        "a": demo_entry(long_ctx, None, label="Tiny Llama 4k", max_model_len=4096, max_tokens=16),
        "b": {**demo_entry(model_dir / "tiny-qwen3", "tiny-qwen3", label="Tiny Qwen3"), "reasoning": "qwen3"},
    }  # the catalogue says which models think (vLLM's qwen3 parser)
    srv = Server(
        root,
        write_catalog(root / "catalog", models, default="a"),
        env={
            "FINSPACE_API_KEYS": f"another-key-abcdefghijkl,{KEY}",
            "FINSPACE_MAX_IN_FLIGHT": "2",
            "FINSPACE_CPU_KV_CACHE_MIB": "24",
        },
    )
    try:
        srv.wait(ready=True)
        srv.tok = AutoTokenizer.from_pretrained(long_ctx)
        yield srv
    finally:
        srv.stop()
        assert KEY not in srv.log_path.read_text(errors="replace"), "an API key reached the log"


def client(server, key: str | None = KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key or "none", max_retries=0, timeout=120)


def running(server) -> int:
    return server.health()["engine"]["running_requests"]


def wait_until(pred, timeout: float, what: str) -> None:
    t0 = time.monotonic()
    while not pred():
        assert time.monotonic() - t0 < timeout, f"timed out waiting for {what}"
        time.sleep(0.05)


def prompt_tokens(server, messages, **template) -> int:
    msgs = [{"role": "system", "content": SYSTEM}, *messages]
    text = server.tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, **template)
    return len(server.tok(text, add_special_tokens=False)["input_ids"])


class Stream:
    """A raw streamed request on its own thread: counts the content chunks, can be dropped."""

    def __init__(self, server, max_tokens: int = LONG):
        self.http = httpx.Client(timeout=120)
        self.chunks, self.done, self.error = 0, threading.Event(), None
        self.req = self.http.build_request(
            "POST",
            server.url + "/v1/chat/completions",
            headers={"Authorization": f"Bearer {KEY}"},
            json={"model": "a", "messages": QUESTION, "max_tokens": max_tokens, "stream": True},
        )
        self.resp = self.http.send(self.req, stream=True)
        assert self.resp.status_code == 200, self.resp.read()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        try:
            for line in self.resp.iter_lines():
                if line.startswith("data: {") and '"content"' in line:
                    self.chunks += 1
        except Exception as exc:  # noqa: BLE001 - closed by drop()
            self.error = exc
        finally:
            self.done.set()

    def drop(self):
        self.resp.close()
        self.http.close()


# ------------------------------------------------------------------ the happy paths
def test_models_lists_the_loaded_model(server):
    models = client(server).models.list()
    assert [m.id for m in models.data] == ["a"] and models.data[0].owned_by == "finspace"


def test_non_streaming_reply_and_usage_match_the_engine(server):
    r = client(server).chat.completions.create(model="a", messages=QUESTION, max_tokens=12, temperature=0)
    assert r.object == "chat.completion" and r.model == "a" and r.id.startswith("chatcmpl-")
    choice = r.choices[0]
    assert choice.message.role == "assistant" and choice.message.content
    assert choice.finish_reason == "length"  # greedy never ends early on the tiny models
    assert r.usage.prompt_tokens == prompt_tokens(server, QUESTION)
    assert r.usage.completion_tokens == 12
    assert r.usage.total_tokens == r.usage.prompt_tokens + 12
    assert len(server.tok.encode(choice.message.content, add_special_tokens=False)) <= 12


def test_streaming_matches_non_streaming_and_ends_with_usage(server):
    c = client(server)
    whole = c.chat.completions.create(model="a", messages=QUESTION, max_tokens=12, temperature=0)
    chunks = list(
        c.chat.completions.create(
            model="a",
            messages=QUESTION,
            max_tokens=12,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == whole.choices[0].message.content
    finish = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert finish == ["length"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 12
    assert chunks[-1].usage.prompt_tokens == whole.usage.prompt_tokens
    assert all(ch.usage is None for ch in chunks[:-1])


def test_stop_sequence_ends_the_reply_with_stop(server):
    c = client(server)
    text = c.chat.completions.create(model="a", messages=QUESTION, max_tokens=16).choices[0].message.content
    cut = text.strip().split()[len(text.split()) // 2]
    r = c.chat.completions.create(model="a", messages=QUESTION, max_tokens=16, stop=[cut])
    assert r.choices[0].finish_reason == "stop" and cut not in r.choices[0].message.content
    assert text.startswith(r.choices[0].message.content)


SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "verdict",
        "schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["fits", "size"],
            "properties": {"fits": {"type": "boolean"}, "size": {"enum": ["small", "large"]}},
        },
    },
}


def follows_schema(text: str) -> bool:
    try:
        data = json.loads(text)
    except ValueError:
        return False
    return (
        isinstance(data, dict)
        and set(data) == {"fits", "size"}
        and isinstance(data["fits"], bool)
        and data["size"] in ("small", "large")
    )


def test_response_format_json_schema_constrains_the_reply(server):
    """Even random weights answer in the schema (vLLM structured outputs), streamed or not."""
    c = client(server)
    r = c.chat.completions.create(model="a", messages=QUESTION, max_tokens=32, response_format=SCHEMA)
    assert r.choices[0].finish_reason == "stop" and follows_schema(r.choices[0].message.content), r
    chunks = c.chat.completions.create(model="a", messages=QUESTION, max_tokens=32, response_format=SCHEMA, stream=True)
    assert follows_schema("".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices))
    # json_object: an object, whatever its keys (a random model may not close it within max_tokens)
    obj = c.chat.completions.create(model="a", messages=QUESTION, max_tokens=8, response_format={"type": "json_object"})
    assert obj.choices[0].message.content.startswith("{")


def test_raw_sse_format_ends_with_done(server):
    with httpx.stream(
        "POST",
        server.url + "/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEY}"},
        json={"model": "a", "messages": QUESTION, "max_tokens": 3, "stream": True},
        timeout=60,
    ) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = [line for line in r.iter_lines() if line]
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]"
    assert json.loads(events[0][6:])["object"] == "chat.completion.chunk"


# ------------------------------------------------------------------ errors in OpenAI's shape
DEEP: dict = {"type": "string"}
for _ in range(40):
    DEEP = {"type": "array", "items": DEEP}


@pytest.mark.parametrize(
    "extra, param",
    [
        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
        ({"n": 2}, "n"),
        ({"logprobs": True}, "logprobs"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"not": {}}}}},
            "response_format",
        ),
        # hostile schemas: deep nesting, a huge enum, a pathological pattern, an unknown type
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": DEEP}}}, "response_format"),
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": {"enum": list(range(5000))}},
                }
            },
            "response_format",
        ),
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "((a{60}){60}){60}"}},
                }
            },
            "response_format",
        ),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "money"}}}},
            "response_format",
        ),
        ({"frobnicate": 1}, "frobnicate"),
        ({"temperature": 9}, "temperature"),
        ({"max_tokens": 0}, "max_tokens"),
    ],
)
def test_unsupported_or_bad_fields_are_400_naming_the_field(server, extra, param):
    with pytest.raises(openai.BadRequestError) as e:
        client(server).chat.completions.create(model="a", messages=QUESTION, extra_body=extra)
    err = e.value.body
    assert e.value.status_code == 400 and err["param"] == param and param in err["message"], err
    assert set(err) == {"message", "type", "param", "code"} and err["type"] == "invalid_request_error"


def test_image_part_is_refused(server):
    parts = [{"type": "text", "text": "what is this"}, {"type": "image_url", "image_url": {"url": "http://x/a.png"}}]
    with pytest.raises(openai.BadRequestError, match="image_url"):
        client(server).chat.completions.create(model="a", messages=[{"role": "user", "content": parts}])


def test_wrong_model_is_404_naming_the_loaded_one(server):
    with pytest.raises(openai.NotFoundError) as e:
        client(server).chat.completions.create(model="gpt-4o", messages=QUESTION)
    err = e.value.body
    assert err["code"] == "model_not_found" and err["param"] == "model"
    assert "'a'" in err["message"] and "/load-model" in err["message"]


@pytest.mark.parametrize("key", [None, "sk-wrong-key-0000000000000"])
def test_missing_or_wrong_key_is_401(server, key):
    with pytest.raises(openai.AuthenticationError) as e:
        client(server, key).chat.completions.create(model="a", messages=QUESTION)
    assert e.value.body["type"] == "authentication_error" and "FINSPACE_API_KEYS" in e.value.body["message"]
    assert KEY not in json.dumps(e.value.body)
    r = httpx.get(server.url + "/v1/models", timeout=10)
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"


def test_body_over_the_event_limit_is_413_in_openai_shape(server):
    big = "x" * (7 << 20)
    r = httpx.post(
        server.url + "/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEY}"},
        content=json.dumps({"model": "a", "messages": [{"role": "user", "content": big}]}),
        timeout=60,
    )
    assert r.status_code == 413 and set(r.json()["error"]) == {"message", "type", "param", "code"}
    # a conversation larger than REST's 16 KiB reaches the engine's own bound (64,000 characters a message)
    r = httpx.post(
        server.url + "/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEY}"},
        json={"model": "a", "messages": [{"role": "user", "content": "y" * 70_000}]},
        timeout=60,
    )
    assert r.status_code == 400 and "64,000" in r.json()["error"]["message"]


# ------------------------------------------------------------------ load: disconnect, bound, switch
def test_disconnect_frees_the_request_and_the_bound_answers_429(server):
    assert running(server) == 0
    control = Stream(server)
    victim = Stream(server)
    wait_until(lambda: control.chunks > 2 and victim.chunks > 2, 60, "both streams generating")
    assert running(server) == 2
    with pytest.raises(openai.RateLimitError) as e:  # FINSPACE_MAX_IN_FLIGHT=2
        client(server).chat.completions.create(model="a", messages=QUESTION, max_tokens=4)
    assert int(e.value.response.headers["retry-after"]) > 0 and e.value.body["type"] == "rate_limit_error"
    victim.drop()
    t0 = time.monotonic()
    wait_until(lambda: running(server) <= 1, 10, "the dropped stream's request to be freed")
    freed_s = time.monotonic() - t0
    assert not control.done.is_set(), "the control stream ended: the victim may have finished, not been aborted"
    assert running(server) == 1
    control.drop()
    wait_until(lambda: running(server) == 0, 10, "the control stream's request to be freed")
    print(f"a dropped /v1 stream left the engine {freed_s:.2f} s after the client closed it")


def test_a_non_streaming_client_that_gives_up_frees_its_request(server):
    assert running(server) == 0
    done = threading.Event()

    def ask():
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(
                server.url + "/v1/chat/completions",
                headers={"Authorization": f"Bearer {KEY}"},
                json={"model": "a", "messages": QUESTION, "max_tokens": LONG},
                timeout=3,
            )
        done.set()

    threading.Thread(target=ask, daemon=True).start()
    wait_until(lambda: running(server) == 1, 30, "the request in the engine")
    wait_until(done.is_set, 30, "the client to give up")
    wait_until(lambda: running(server) == 0, 10, "the abandoned request to be freed")


def test_model_switch_ends_a_stream_with_an_error_chunk_then_thinking(server):
    c = client(server)
    stream = c.chat.completions.create(model="a", messages=QUESTION, max_tokens=LONG, stream=True)
    first = next(iter(stream))
    assert first.choices[0].delta.role == "assistant"
    r = httpx.post(server.url + "/load-model", json={"model": "b"}, headers=server.auth(ADMIN_TOKEN), timeout=30)
    assert r.status_code == 202, r.text
    with pytest.raises(openai.APIError, match="switching to Tiny Qwen3"):
        for _ in stream:
            pass
    server.wait_model("b")
    assert [m.id for m in c.models.list().data] == ["b"]
    # Qwen 3: enable_thinking reaches the chat template (the prompt grows by the empty think block) ...
    on = c.chat.completions.create(model="b", messages=QUESTION, max_tokens=6)
    off = c.chat.completions.create(
        model="b", messages=QUESTION, max_tokens=6, extra_body={"chat_template_kwargs": {"enable_thinking": False}}
    )
    assert off.usage.prompt_tokens > on.usage.prompt_tokens
    # ... and vLLM's qwen3 parser splits the reply: no think tags from the random model, so with thinking on
    # it is all reasoning (as vLLM's own server answers), with thinking off all answer.
    assert on.choices[0].message.model_extra.get("reasoning_content") and not on.choices[0].message.content
    assert off.choices[0].message.content and not off.choices[0].message.model_extra.get("reasoning_content")
    # response_format constrains the answer only (vLLM's reasoning parser is set for the structured outputs):
    # the thinking stays free text (the random model never closes it), the answer without thinking is the JSON
    thinking = c.chat.completions.create(model="b", messages=QUESTION, max_tokens=24, response_format=SCHEMA)
    assert thinking.choices[0].finish_reason == "length" and not thinking.choices[0].message.content
    assert not follows_schema(thinking.choices[0].message.model_extra.get("reasoning_content") or "")
    answer = c.chat.completions.create(
        model="b",
        messages=QUESTION,
        max_tokens=64,
        response_format=SCHEMA,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )
    assert follows_schema(answer.choices[0].message.content), answer.choices[0].message.content
    assert not answer.choices[0].message.model_extra.get("reasoning_content")
    r = httpx.post(server.url + "/load-model", json={"model": "a"}, headers=server.auth(ADMIN_TOKEN), timeout=30)
    assert r.status_code == 202, r.text
    server.wait_model("a")
