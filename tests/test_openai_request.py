"""finspace.openai_api.request: what a chat-completions body may hold; the rest refused by name (400)."""

from __future__ import annotations

import pytest

from finspace.openai_api.request import ApiError, error_body, parse_chat

MSGS = [{"role": "user", "content": "What is EBITDA?"}]


def body(**extra) -> dict:
    return {"model": "a", "messages": MSGS, **extra}


def test_a_full_request_is_read_into_engine_settings():
    req = parse_chat(
        body(
            max_completion_tokens=20,
            temperature=0.5,
            top_p=0.9,
            seed=3,
            stop="\n\n",
            stream=True,
            stream_options={"include_usage": True},
            chat_template_kwargs={"enable_thinking": False},
            user="analyst-7",
            n=1,
            logprobs=False,
            response_format={"type": "text"},
        )
    )
    s = req.settings
    assert (s.max_tokens, s.temperature, s.top_p, s.seed, s.stop) == (20, 0.5, 0.9, 3, ("\n\n",))
    assert s.chat_template_kwargs == {"enable_thinking": False} and req.stream and req.include_usage


@pytest.mark.parametrize(
    "fmt, schema",
    [
        ({"type": "text"}, None),
        ({"type": "json_object"}, {"type": "object"}),
        (
            {"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object"}, "strict": True}},
            {"type": "object"},
        ),
    ],
)
def test_response_format_becomes_the_answers_schema(fmt, schema):
    assert parse_chat(body(response_format=fmt)).settings.json_schema == schema


def test_text_parts_and_the_developer_role_are_accepted():
    msgs = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "name": "ana", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    ]
    assert parse_chat(body(messages=msgs)).messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "a\nb"},
    ]


@pytest.mark.parametrize(
    "extra, param, match",
    [
        ({"tools": [{"type": "function"}]}, "tools", "function tools only"),
        ({"tool_choice": "auto"}, "tool_choice", "tool_choice needs tools"),
        (
            {"tools": [{"type": "function", "function": {"name": "f"}}], "parallel_tool_calls": "yes"},
            "parallel_tool_calls",
            "true or false",
        ),
        ({"functions": [{"name": "f"}]}, "functions", "send the same functions as \"tools\""),
        ({"messages": [{"role": "user", "content": "q", "tool_calls": []}]}, "messages", "belong to an assistant"),
        ({"n": 3}, "n", "one choice per request"),
        ({"logprobs": True}, "logprobs", "log probabilities"),
        ({"top_logprobs": 2}, "top_logprobs", "log probabilities"),
        ({"response_format": {"type": "xml"}}, "response_format", "json_object"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"schema": {"if": {}}}}},
            "response_format",
            "'if' is not supported",
        ),
        ({"presence_penalty": 0.5}, "presence_penalty", "not supported"),
        ({"best_of": 2}, "best_of", "not a chat-completions field"),
        ({"model": ""}, "model", "is required"),
        ({"stream": "yes"}, "stream", "true or false"),
        ({"stream_options": {"include_usage": True}}, "stream_options", "only allowed with stream"),
        ({"stream": True, "stream_options": {"continuous_usage_stats": True}}, "stream_options", "include_usage"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop", "at most 4"),
        ({"stop": [1]}, "stop", "non-empty string"),
        ({"max_tokens": 1.5}, "max_tokens", "whole number"),
        ({"temperature": "hot"}, "temperature", "a number"),
        ({"max_tokens": 5, "max_completion_tokens": 6}, "max_completion_tokens", "send one of them"),
        ({"chat_template_kwargs": {"tokenize": False}}, "chat_template_kwargs", "set by the server"),
        (
            {"chat_template_kwargs": {"chat_template": "{% for i in range(9) %}x{% endfor %}"}},
            "chat_template_kwargs",
            "set by the server",
        ),
        ({"chat_template_kwargs": {"x": [1]}}, "chat_template_kwargs", "boolean, number"),
        ({"messages": "hi"}, "messages", "must be a list"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
            "messages",
            "'image_url' part; a message takes text parts",
        ),
        ({"messages": [{"role": "assistant", "content": None, "tool_calls": []}, *MSGS]}, "messages", "tool_calls"),
        ({"messages": [{"role": "user", "content": "x" * 64_001}]}, "messages", "the limit is 64,000"),
        ({"messages": [{"role": "assistant", "content": "hi"}]}, "messages", "last message must be from the user"),
    ],
)
def test_bad_or_unsupported_fields_are_400_naming_the_field(extra, param, match):
    with pytest.raises(ApiError, match=match) as info:
        parse_chat(body(**extra))
    assert (info.value.status, info.value.param) == (400, param)


def test_a_body_that_is_not_an_object():
    with pytest.raises(ApiError, match="must be a JSON object"):
        parse_chat(["model", "a"])


@pytest.mark.parametrize(
    "status, kind",
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (404, "invalid_request_error"),
        (429, "rate_limit_error"),
        (503, "server_error"),
    ],
)
def test_error_body_is_openais_shape(status, kind):
    assert error_body(status, "m", "model", "c") == {
        "error": {"message": "m", "type": kind, "param": "model", "code": "c"}
    }
