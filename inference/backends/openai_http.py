"""OpenAI-compatible chat-completions client: ``vllm serve``, llama.cpp's server, OpenAI itself, ...

One :meth:`OpenAIHTTPBackend.generate` call sends one ``POST {base_url}/chat/completions`` per prompt,
at most ``BackendConfig.concurrency`` at a time, and returns the generations in input order; the whole
call is ONE batched pass (the server batches the concurrent requests itself).

Requests go through one :class:`httpx.Client` (a keep-alive connection pool of ``concurrency``
connections; a connection the server closed while idle is replaced, not counted as a failure).
Environment proxies (``$HTTPS_PROXY``) are not used.

Transient failures — connection errors, timeouts, HTTP 429 and 5xx — are retried by :mod:`tenacity`
with exponential backoff plus a small jitter (``Retry-After`` is honoured), up to
``BackendConfig.max_retries`` times; any other HTTP error fails at once with the server's own error text.
"""

from __future__ import annotations

import email.utils
import json
import math
import os
import random
import ssl
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
import tenacity

from inference.backends.base import (
    BACKENDS,
    BackendConfig,
    BackendError,
    Generation,
    GenerationConfig,
    LabelScores,
    LogprobsUnsupportedError,
    Prompt,
)

__all__ = ["TOP_LOGPROBS", "OpenAIHTTPBackend", "openai_backend"]

T = TypeVar("T")

#: Most likely first tokens an OpenAI-compatible server is asked for in label scoring (OpenAI's maximum is 20).
TOP_LOGPROBS = 20

# Hints appended to errors for HTTP statuses that usually mean a misconfiguration.
_STATUS_HINTS = {
    401: "check backend.api_key or $OPENAI_API_KEY (vllm serve --api-key ...)",
    403: "check backend.api_key or $OPENAI_API_KEY and the key's permissions",
    404: "check backend.base_url (it should end in /v1) and backend.model (a model name the server serves, "
    "see GET {base}/models)",
}


class _Transient(Exception):
    """A failed attempt worth retrying; ``retry_after`` is the server's requested wait in seconds."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class OpenAIHTTPBackend:
    """Chat completions from an OpenAI-compatible HTTP server.

    Args:
        config: Uses ``model`` (the name the server serves), ``base_url``, ``api_key`` (else
            ``$OPENAI_API_KEY``), ``timeout_s``, ``max_retries`` and ``concurrency``.
        backoff_s: First retry delay; attempt ``n`` waits ``backoff_s * 2**(n-1)`` plus up to 10% jitter.
        max_backoff_s: Upper bound on any single wait, including a server's ``Retry-After``.
        schema_name: ``response_format.json_schema.name`` sent with schema-constrained requests.

    Raises:
        BackendError: ``base_url`` is not an http(s) URL, or ``model`` names a packaged local model.
    """

    name = "openai"
    supports_json_schema = True

    def __init__(
        self,
        config: BackendConfig,
        *,
        backoff_s: float = 0.5,
        max_backoff_s: float = 60.0,
        schema_name: str = "chunk_evidence",
    ) -> None:
        if config.model.startswith("packaged:"):
            raise BackendError(
                f"the openai backend sends backend.model to the server as the model name, but it is "
                f"{config.model!r} (a local packaged model); set backend.model to the name the server "
                f"serves (see GET {config.base_url.rstrip('/')}/models)"
            )
        parts = urlsplit(config.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BackendError(
                f"backend.base_url must be an http(s) URL such as http://127.0.0.1:8000/v1; got {config.base_url!r}"
            )
        if backoff_s < 0 or max_backoff_s < 0:
            raise BackendError(
                f"backoff_s and max_backoff_s must be >= 0; got {backoff_s!r}, {max_backoff_s!r}"
            )
        self.config = config
        self.passes = 0
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.schema_name = schema_name
        self.url = config.base_url.rstrip("/") + "/chat/completions"
        self._host = parts.hostname
        try:
            self._port = parts.port
        except ValueError as exc:
            raise BackendError(f"backend.base_url has an invalid port: {config.base_url!r}") from exc
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        api_key = config.api_key or os.environ.get("OPENAI_API_KEY")
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(
            headers=headers,
            timeout=config.timeout_s,
            limits=httpx.Limits(
                max_connections=config.concurrency, max_keepalive_connections=config.concurrency
            ),
            verify=ssl.create_default_context(),
            trust_env=False,
        )
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._rng = random.Random()
        self._pool = ThreadPoolExecutor(max_workers=config.concurrency, thread_name_prefix="openai-http")

    # ------------------------------------------------------------------ public API

    def generate(self, prompts: list[Prompt], config: GenerationConfig) -> list[Generation]:
        """Send every prompt (concurrently, bounded by ``concurrency``); one generation per prompt, in order.

        An empty batch returns ``[]`` and counts no pass.

        Raises:
            BackendError: A request failed permanently (4xx other than 429, a malformed response) or
                kept failing after ``max_retries`` retries; the message names the URL and the cause.
        """
        if self._closed.is_set():
            raise BackendError("the openai backend is closed; build a new one with load_backend()")
        if not prompts:
            return []
        return self._each(lambda p: self._complete(p, config), prompts)

    def _each(self, request: Callable[[Prompt], T], prompts: list[Prompt]) -> list[T]:
        """``request`` for every prompt on the worker pool (bounded by ``concurrency``), results in order;
        the pending ones are cancelled when one fails. Counts one pass."""
        futures: list[Future[T]] = [self._pool.submit(request, p) for p in prompts]
        try:
            results = [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            raise
        with self._lock:
            self.passes += 1
        return results

    def score_labels(self, prompts: list[Prompt], labels: list[str]) -> list[LabelScores]:
        """One request per prompt (concurrently) with ``max_tokens=1``, greedy, ``logprobs`` and
        ``top_logprobs=TOP_LOGPROBS``: a label's log-probability is that of the listed first-position tokens
        whose text, stripped of spaces, is the label (log-sum-exp over variants such as ``"A"`` and
        ``" A"``); a label the server did not list gets ``-inf``. No tokenizer is at hand over HTTP, so a
        label must be one token of the server's model to be found. One pass.

        Raises:
            LogprobsUnsupportedError: The server returned no ``top_logprobs`` (it does not report
                log-probabilities; the JSON scoring mode works with it).
            BackendError: A request failed.
        """
        if self._closed.is_set():
            raise BackendError("the openai backend is closed; build a new one with load_backend()")
        if not prompts:
            return []
        config = GenerationConfig(max_tokens=1, temperature=0.0)

        def one(prompt: Prompt) -> LabelScores:
            body = self.request_body(prompt, config)
            body.update(logprobs=True, top_logprobs=TOP_LOGPROBS)
            data = self._post(json.dumps(body).encode("utf-8"))
            try:
                top = data["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
                pairs = [(str(t["token"]).strip(), float(t["logprob"])) for t in top]
            except (KeyError, IndexError, TypeError, ValueError):
                raise LogprobsUnsupportedError(
                    f"POST {self.url} returned no top_logprobs for a label-scoring request "
                    f"(choices[0].logprobs.content[0].top_logprobs); this server does not report "
                    f"log-probabilities: use evaluator.scoring=json with it"
                ) from None
            scores = []
            for label in labels:
                found = [lp for tok, lp in pairs if tok == label]
                top_lp = max(found, default=float("-inf"))
                scores.append(
                    top_lp + math.log(sum(math.exp(lp - top_lp) for lp in found)) if found else top_lp
                )
            return LabelScores(logprobs=scores)

        return self._each(one, prompts)

    def request_body(self, prompt: Prompt, config: GenerationConfig) -> dict[str, Any]:
        """The JSON body sent for one prompt."""
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": prompt,
            "max_tokens": config.max_tokens,
            "temperature": config.temperature,
            "seed": config.seed,
        }
        if config.json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": self.schema_name, "schema": config.json_schema, "strict": True},
            }
        if config.logprobs:
            body["logprobs"] = True
        return body

    def close(self) -> None:
        """Stop the worker threads and close every open connection. Idempotent."""
        self._closed.set()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._client.close()

    def __enter__(self) -> OpenAIHTTPBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ one request

    def _complete(self, prompt: Prompt, config: GenerationConfig) -> Generation:
        data = self._post(json.dumps(self.request_body(prompt, config)).encode("utf-8"))
        return self._parse(data, config)

    def _post(self, payload: bytes) -> dict[str, Any]:
        """POST with retries; return the decoded JSON of a 2xx response."""
        attempts = self.config.max_retries + 1
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(attempts),
            wait=self._wait,
            retry=tenacity.retry_if_exception_type(_Transient),
            sleep=self._sleep,
        )
        try:
            return retrying(self._attempt, payload)
        except tenacity.RetryError as exc:
            last = exc.last_attempt.exception()
        raise BackendError(
            f"POST {self.url} failed after {attempts} attempt{'s' if attempts > 1 else ''} "
            f"({self.config.max_retries} retries); last error: {last}. Is the server running and reachable? "
            f"Raise backend.max_retries or backend.timeout_s if it is just slow or overloaded."
        )

    def _attempt(self, payload: bytes) -> dict[str, Any]:
        """One HTTP exchange. Raises :class:`_Transient` for retryable failures, BackendError otherwise."""
        if self._closed.is_set():
            raise BackendError(f"the openai backend was closed while a request to {self.url} was pending")
        try:
            response = self._client.post(self.url, content=payload)
        except httpx.TimeoutException:
            raise _Transient(f"timed out after {self.config.timeout_s:g} s") from None
        except httpx.ConnectError as exc:
            if _refused(exc):
                raise _Transient(f"connection refused by {self._host}:{self._port or ''}") from None
            raise _Transient(f"{type(exc).__name__}: {exc}") from None
        except httpx.TransportError as exc:
            raise _Transient(f"{type(exc).__name__}: {exc}") from None
        status, headers, raw = response.status_code, response.headers, response.content
        if 200 <= status < 300:
            try:
                data = json.loads(raw)
            except ValueError:
                raise BackendError(
                    f"POST {self.url} returned HTTP {status} with a body that is not JSON: {_snippet(raw)!r}; "
                    f"is backend.base_url an OpenAI-compatible API (ending in /v1)?"
                ) from None
            if not isinstance(data, dict):
                raise BackendError(f"POST {self.url} returned JSON that is not an object: {_snippet(raw)!r}")
            return data
        message = _error_text(raw)
        if status == 429 or status >= 500:
            raise _Transient(f"HTTP {status}: {message}", _retry_after(headers.get("Retry-After")))
        hint = _STATUS_HINTS.get(status, "")
        hint = f"; {hint.format(base=self.config.base_url.rstrip('/'))}" if hint else ""
        raise BackendError(f"POST {self.url} failed with HTTP {status}: {message}{hint}")

    def _wait(self, state: tenacity.RetryCallState) -> float:
        """tenacity's wait before retry ``state.attempt_number`` (1 = the first retry)."""
        exc = state.outcome.exception() if state.outcome is not None else None
        return self._delay(state.attempt_number, getattr(exc, "retry_after", None))

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_backoff_s)
        base = min(self.backoff_s * 2 ** (attempt - 1), self.max_backoff_s)
        return base + self._rng.uniform(0, 0.1 * base)

    def _sleep(self, seconds: float) -> None:
        self._closed.wait(seconds)  # close() cuts a backoff short

    def _parse(self, data: dict[str, Any], config: GenerationConfig) -> Generation:
        try:
            choice = data["choices"][0]
            message = choice.get("message") or {}
        except (KeyError, IndexError, TypeError, AttributeError):
            raise BackendError(
                f"POST {self.url} returned no choices[0] in its completion: {_snippet(json.dumps(data))!r}"
            ) from None
        text = message.get("content") or ""
        usage = data.get("usage") or {}
        num_tokens = usage.get("completion_tokens")
        token_logprobs: list[float] | None = None
        if config.logprobs:
            content = (choice.get("logprobs") or {}).get("content")
            if isinstance(content, list):
                try:
                    token_logprobs = [float(t["logprob"]) for t in content]
                except (KeyError, TypeError, ValueError):
                    raise BackendError(
                        f"POST {self.url} returned malformed logprobs (expected choices[0].logprobs.content"
                        f"[*].logprob): {_snippet(json.dumps(content))!r}"
                    ) from None
        return Generation(
            text=text,
            finish_reason=choice.get("finish_reason") or "stop",
            num_tokens=int(num_tokens) if isinstance(num_tokens, (int, float)) else None,
            token_logprobs=token_logprobs,
            constrained=config.json_schema is not None,
        )


@BACKENDS.register("openai")
def openai_backend(config: BackendConfig) -> OpenAIHTTPBackend:
    """Factory registered as ``openai``: an OpenAI-compatible HTTP server such as ``vllm serve``."""
    return OpenAIHTTPBackend(config)


def _refused(exc: BaseException) -> bool:
    """Whether a connect error was a refused connection (nobody listening on the port)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return True
        seen = seen.__cause__ or seen.__context__
    return "refused" in str(exc).lower()


def _snippet(raw: bytes | str, limit: int = 500) -> str:
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    return text if len(text) <= limit else text[:limit] + "..."


def _error_text(raw: bytes) -> str:
    """The server's error message: OpenAI's ``{"error": {"message": ...}}``, vLLM's ``{"message": ...}``, or the body."""
    try:
        data = json.loads(raw)
    except ValueError:
        return _snippet(raw).strip() or "(empty body)"
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str) and error:
            return error
        if data.get("message"):
            return str(data["message"])
        if data.get("detail"):
            return str(data["detail"])
    return _snippet(raw)


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date); None when absent/invalid."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())
