"""Settings of the HTTP server (:class:`ServerConfig`: network, access, limits) and the loopback check."""

import ipaddress
import string
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from evidential.errors import ConfigError
from training.utils.configio import check_fields

__all__ = ["API_KEY_ENV", "ServerConfig", "is_loopback"]

API_KEY_ENV = "EVIDENTIAL_RAG_API_KEY"
_KEY_CHARS = set(string.ascii_letters + string.digits + string.punctuation)


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback IP address (``127.0.0.0/8``, ``::1``)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass
class ServerConfig:
    """Settings of ``evidential-rag serve`` (network, access, limits); the models come from the RunConfig."""

    host: str = field(
        default="127.0.0.1",
        metadata={
            "help": "Interface to bind. Loopback by default; any other host (e.g. 0.0.0.0) needs an API key or --allow-remote.",
            "must": "be a host name or IP address",
        },
    )
    port: int = field(default=8000, metadata={"help": "TCP port (0 = any free port).", "range": (0, 65535)})
    api_key: str | None = field(
        default=None,
        repr=False,
        metadata={
            "help": "Require 'Authorization: Bearer KEY' or 'X-API-Key: KEY' on every endpoint (>= 16 printable "
            "characters, no spaces). Prefer the environment variable EVIDENTIAL_RAG_API_KEY to the flag, which "
            "other users can see in the process list."
        },
    )
    allow_remote: bool = field(
        default=False,
        metadata={
            "help": "Allow a non-loopback host without an API key (only behind a trusted proxy or network)."
        },
    )
    max_concurrency: int = field(
        default=1,
        metadata={
            "help": "Requests running model work at once (worker threads sharing the loaded models; llama.cpp: 1).",
            "range": (1, None),
        },
    )
    max_queue: int = field(
        default=32,
        metadata={
            "help": "Admitted requests waiting for a model slot; beyond it requests get 503 with Retry-After.",
            "range": (0, 10_000),
            "note": "each waiting request holds a thread",
        },
    )
    max_batch_size: int = field(
        default=1,
        metadata={
            "help": "Most /ask (and non-streamed chat) requests one pipeline call answers: requests that wait "
            "while the model is busy are gathered into one batched call. 1 (the default) answers each request "
            "alone, so a record never depends on what else was in flight; raise it on a GPU, where a batched "
            "pass costs little more than one (on 2 CPU cores it measured no faster: docs/results.md).",
            "range": (1, 1024),
        },
    )
    batch_wait_ms: float = field(
        default=0.0,
        metadata={
            "help": "Milliseconds an idle model slot waits for more requests before answering a batch "
            "(0: answer at once; requests that arrive while it is busy are batched anyway).",
            "range": (0.0, 10_000.0),
        },
    )
    queue_timeout_s: float | None = field(
        default=None,
        metadata={
            "help": "Seconds an /ask or non-streamed chat request may wait for a model slot; beyond it the "
            "request leaves the queue with 503 and Retry-After (null: no limit). Model work once started is "
            "never cut.",
            "range": (0.0, None),
            "ends": "(]",
            "null": "no limit",
        },
    )
    max_body_bytes: int = field(
        default=1_048_576,
        metadata={"help": "Largest request body in bytes (413 beyond).", "range": (1024, None)},
    )
    max_chunks: int = field(
        default=50, metadata={"help": "Most chunks one request may pass (422 beyond).", "range": (1, None)}
    )
    max_question_chars: int = field(
        default=2_000, metadata={"help": "Longest question in characters (422 beyond).", "range": (1, None)}
    )
    max_chunk_chars: int = field(
        default=20_000,
        metadata={"help": "Longest chunk text in characters (422 beyond).", "range": (1, None)},
    )
    max_candidates: int = field(
        default=50,
        metadata={"help": "Most candidate claims one request may pass (422 beyond).", "range": (0, None)},
    )
    lazy_evaluators: bool = field(
        default=True,
        metadata={
            "help": "A request may name another evaluator: it is loaded once on first use and kept. "
            "Off: only the configured evaluator (422 for the other)."
        },
    )

    def __post_init__(self) -> None:
        # the key first, by hand: these messages never echo it (check_fields' would)
        if self.api_key is not None:
            if not isinstance(self.api_key, str) or len(self.api_key) < 16:
                raise ConfigError(
                    "server.api_key must be at least 16 characters (e.g. python -c "
                    "'import secrets; print(secrets.token_urlsafe(32))')"
                )
            if not set(self.api_key) <= _KEY_CHARS:
                raise ConfigError(
                    "server.api_key must consist of printable ASCII characters without spaces (it travels in a header)"
                )
        check_fields(self, "server")
        self.host = self.host.strip()
        if not is_loopback(self.host) and self.api_key is None and not self.allow_remote:
            raise ConfigError(
                f"server.host {self.host!r} is not a loopback address: anyone who can reach it could use the "
                f"models. Set an API key (--api-key or ${API_KEY_ENV}), or pass --allow-remote when a trusted "
                "proxy or network guards the server"
            )

    @classmethod
    def help(cls) -> dict[str, str]:
        """Field name → help text."""
        return {f.name: f.metadata["help"] for f in fields(cls)}

    def public_dict(self) -> dict[str, Any]:
        """The settings as plain data without the API key (``api_key_set`` says whether there is one)."""
        out = asdict(self)
        out.pop("api_key")
        out["api_key_set"] = self.api_key is not None
        return out
