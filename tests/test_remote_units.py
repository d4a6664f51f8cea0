"""The remote engine's pure parts: ChatSettings mapped to the endpoint's request, its deltas split into thinking
and answer, its /metrics read, its failures named by host only. The live endpoint is tests/test_remote_engine.py."""

from __future__ import annotations

import httpx
import pytest

from finspace.models.catalog import Sampling, Serving, ModelEntry
from finspace.engine.prompt import ChatSettings
from finspace.errors import BadInput, EngineFailed
from finspace.engine.records import ChatInfo
from finspace.remote.chat import _event, _parts, _read, request_for
from finspace.remote.endpoint import Endpoint, host_of, reason_for
from finspace.remote.metrics import reading
from finspace.settings import RemoteSettings, Settings

ENTRY = ModelEntry(
    key="q",
    label="Q",
    description="d",
    architecture="qwen3",
    repo=None,
    revision=None,
    local_path=None,
    generate=None,
    config_path=None,
    total_size_bytes=None,
    system_prompt="Be brief.",
    serving=Serving(max_model_len=1024),
    sampling=Sampling(temperature=0.3, top_p=0.9, max_tokens=64),
    reasoning="qwen3",
)


def test_settings_map_to_the_request():
    schema = {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}
    s = ChatSettings(
        temperature=0.0,
        max_tokens=20,
        seed=3,
        stop=("END",),
        json_schema=schema,
        chat_template_kwargs={"enable_thinking": False},
        document="<document>D</document>",
    )
    req = request_for("q", ENTRY, 1024, [{"role": "user", "content": "hi"}], s)
    assert req["messages"][0] == {"role": "system", "content": "Be brief.\n\n<document>D</document>"}
    assert (req["temperature"], req["top_p"], req["max_tokens"], req["seed"], req["stop"]) == (0.0, 0.9, 20, 3, ["END"])
    assert req["response_format"]["json_schema"]["schema"] == schema and req["stream_options"] == {
        "include_usage": True
    }
    assert req["extra_body"] == {"chat_template_kwargs": {"enable_thinking": False}}


def test_continue_is_vllms_continue_final_message():
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Half a"}]
    req = request_for("q", ENTRY, 1024, msgs, ChatSettings(continue_final_message=True))
    assert req["extra_body"] == {"continue_final_message": True, "add_generation_prompt": False}
    assert req["messages"][-1] == {"role": "assistant", "content": "Half a"} and req["max_tokens"] == 64


def test_finspace_checks_before_the_endpoint_sees_anything():
    with pytest.raises(BadInput, match="max_tokens"):
        request_for("q", ENTRY, 1024, [{"role": "user", "content": "hi"}], ChatSettings(max_tokens=5000))
    for kwargs, match in (({"chat_template": "{{x}}"}, "set by the server"), ({"z": 1}, "not a variable")):
        with pytest.raises(BadInput, match=match):
            request_for(
                "q", ENTRY, 1024, [{"role": "user", "content": "hi"}], ChatSettings(chat_template_kwargs=kwargs)
            )


def test_reasoning_deltas_are_thinking_and_usage_fills_the_info():
    assert _parts({"content": None, "reasoning_content": "hmm"}) == ("hmm", "")
    assert _parts({"content": "Yes", "reasoning": None}) == ("", "Yes")
    assert _parts({"content": "", "reasoning": "newer vLLM"}) == ("newer vLLM", "")
    info = ChatInfo()
    assert _read(_event('data: {"id": "c1", "choices": [{"delta": {"reasoning_content": "t"}}]}'), info) == [("t", "")]
    assert _read(_event('data: {"choices": [{"delta": {"content": "A"}, "finish_reason": "length"}]}'), info) == [
        ("", "A")
    ]
    _read(_event('data: {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}}'), info)
    assert (info.request_id, info.finish_reason, info.prompt_tokens, info.output_tokens) == ("c1", "length", 9, 2)
    assert _event("data: [DONE]") is not None and _event(": keep-alive") is None
    with pytest.raises(EngineFailed, match="stopped this reply: boom"):
        _read(_event('data: {"error": {"message": "boom"}}'), info)


def test_metrics_of_one_engine_and_of_a_router():
    one = (
        '# HELP x\nvllm:kv_cache_usage_perc{engine="0",model_name="a"} 0.25\n'
        'vllm:num_requests_running{engine="0",model_name="a"} 3.0\n'
        'vllm:num_requests_waiting{engine="0",model_name="a"} 1.0\n'
    )
    r = reading(one, "h:1", 0.0)
    assert (r.kv_cache_usage, r.running, r.waiting, r.engines) == (0.25, 3, 1, 1)
    two = one + one.replace('engine="0"', 'engine="1"').replace("0.25", "0.75")
    r = reading(two, "h:1", 0.0)
    assert (r.kv_cache_usage, r.running, r.waiting, r.engines) == (0.5, 6, 2, 2)
    old = 'vllm:gpu_cache_usage_perc{model_name="a"} 0.1\n'
    assert reading(old, "h", 0.0).kv_cache_usage == 0.1 and reading(old, "h", 0.0).running is None


def test_reasons_name_the_host_only_and_the_key_is_a_secret():
    assert host_of("http://user:pw@vllm.internal:8000/v1?x=1") == "vllm.internal:8000"
    s = Settings.from_env(
        {"FINSPACE_ENGINE_URL": "http://vllm.internal:8000/v1/", "FINSPACE_ENGINE_API_KEY": "sk-remote-secret-123"}
    )
    assert "sk-remote-secret-123" in s.secrets and "sk-remote-secret-123" not in repr(s)
    ep = Endpoint(s.remote)
    assert ep.host == "vllm.internal:8000" and ep.root == "http://vllm.internal:8000"
    assert ep.headers == {"Authorization": "Bearer sk-remote-secret-123"}
    assert (
        reason_for(httpx.ConnectError("x"), ep.host)
        == "vllm.internal:8000 cannot be reached (connection refused or no route)"
    )
    assert "refused the API key (401)" in reason_for(None, ep.host, 401)
    assert "429" in reason_for(None, ep.host, 429) and "503" in reason_for(None, ep.host, 503)
    with pytest.raises(BadInput, match="FINSPACE_ENGINE_URL"):
        Settings.from_env({"FINSPACE_ENGINE_URL": "vllm:8000"})
    assert Settings.from_env({}).remote == RemoteSettings()
