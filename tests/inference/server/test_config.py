"""The server settings: declared constraints, checked by ``check_fields``, with exact messages; the API key
is checked by hand so that no message shows it."""

from __future__ import annotations

import pytest

from evidential.errors import ConfigError
from inference.server.config import ServerConfig

KEY = "k" * 16


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"host": " "}, "server.host must be a host name or IP address; got ' '"),
        ({"port": 70000}, "server.port must be an integer from 0 to 65535; got 70000"),
        ({"port": "80"}, "server.port must be an integer from 0 to 65535; got '80'"),
        ({"max_concurrency": 0}, "server.max_concurrency must be an integer >= 1; got 0"),
        (
            {"max_queue": 10_001},
            "server.max_queue must be an integer from 0 to 10000 (each waiting request holds a thread); got 10001",
        ),
        ({"max_body_bytes": 10}, "server.max_body_bytes must be an integer >= 1024; got 10"),
        ({"max_chunks": 0}, "server.max_chunks must be an integer >= 1; got 0"),
        ({"max_candidates": -1}, "server.max_candidates must be an integer >= 0; got -1"),
        ({"allow_remote": 1}, "server.allow_remote must be true or false; got 1"),
        ({"lazy_evaluators": "yes"}, "server.lazy_evaluators must be true or false; got 'yes'"),
    ],
)
def test_server_config_rejects_with_field_message(kwargs, message):
    with pytest.raises(ConfigError) as info:
        ServerConfig(**kwargs)
    assert str(info.value) == message


@pytest.mark.parametrize("key", ["short-secret", "a secret key with spaces", "\u00e9" * 20])
def test_bad_api_key_is_never_shown(key):
    with pytest.raises(ConfigError, match=r"^server\.api_key must ") as info:
        ServerConfig(api_key=key)
    assert key not in str(info.value)


def test_server_config_accepts_and_strips_the_host():
    assert ServerConfig(host=" localhost ").host == "localhost"
    cfg = ServerConfig(host="0.0.0.0", api_key=KEY, port=0, max_queue=10_000, max_candidates=0)
    assert (cfg.host, cfg.api_key, cfg.port, cfg.max_queue) == ("0.0.0.0", KEY, 0, 10_000)
