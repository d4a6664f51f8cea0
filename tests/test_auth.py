"""One reading of the bearer token (wall.clients.bearer) for every door, and /v1's API keys compared by the service
in constant time beside the admin token (issue 43: the token was parsed in three places and compared in two)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from finspace.errors import BadInput, Busy, Unauthorized, http_headers
from finspace.service import Service
from finspace.settings import Settings
from finspace.wall.clients import bearer

KEYS = ("key-one-0123456789", "key-two-0123456789")


@pytest.mark.parametrize(
    "headers,token",
    [
        ({"authorization": "Bearer  abc "}, "abc"),  # spaces around the token
        ({"authorization": "bearer abc"}, "abc"),  # the scheme in any case
        ({"authorization": "Basic abc"}, None),
        ({"authorization": "Bearer "}, None),
        ({}, None),
    ],
)
def test_the_bearer_token_is_read_once_the_same_way(headers, token):
    assert bearer(SimpleNamespace(headers=headers)) == token


@pytest.mark.parametrize(
    "token,ok",
    [
        (KEYS[0], True),
        (KEYS[1], True),
        (KEYS[0][:-1], False),
        (KEYS[0] + "x", False),
        ("", False),
        (None, False),
        (5, False),
        ("\udcff" * 4, False),
    ],
)
def test_an_api_key_is_one_of_the_servers(token, ok):
    svc = Service(None, None, None, settings=dataclasses.replace(Settings(), api_keys=KEYS))
    assert svc.is_api_key(token) is ok


@pytest.mark.parametrize(
    "exc,headers",
    [
        (Unauthorized("needs the admin token"), {"WWW-Authenticate": "Bearer"}),
        (Busy("three running", 7), {"Retry-After": "7"}),
        (BadInput("no"), {}),
        (ValueError("a surprise"), {}),
    ],
)
def test_every_http_door_sends_the_same_headers_for_an_error(exc, headers):
    assert http_headers(exc) == headers
