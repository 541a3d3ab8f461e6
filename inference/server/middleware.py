"""ASGI middleware of the HTTP server: the API key check (401, before the body is read) and the body size
limit (413); both answer in the OpenAI error shape on the OpenAI-compatible ``/v1/`` paths
(:func:`openai_error`). The inspector page and its static files (``GET /``, ``/inspector/...``) carry no
data and call no model: they load without a key, and the page then sends the key the user types in."""

from __future__ import annotations

import hmac
import json

from fastapi.responses import JSONResponse

from training.utils.io import loads_strict

__all__ = ["OPENAI_ERROR_TYPES", "ApiKeyMiddleware", "BodyLimitMiddleware", "is_openai_path", "openai_error"]

#: HTTP status → the OpenAI error ``type`` the OpenAI-compatible endpoints answer with.
OPENAI_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    500: "server_error",
    502: "server_error",
    503: "server_error",
}


def is_openai_path(path: str) -> bool:
    """Whether ``path`` is one of the OpenAI-compatible endpoints (``/v1/...``)."""
    return path == "/v1" or path.startswith("/v1/")


def openai_error(
    status: int, message: str, code: str | None = None, param: str | None = None, headers: dict | None = None
) -> JSONResponse:
    """An error in the OpenAI shape: ``{"error": {"message", "type", "param", "code"}}``."""
    body = {
        "message": message,
        "type": OPENAI_ERROR_TYPES.get(status, "server_error"),
        "param": param,
        "code": code,
    }
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def _refusal(scope: dict, status: int, message: str, code: str, headers: dict | None = None) -> JSONResponse:
    if is_openai_path(scope.get("path", "")):
        return openai_error(status, message, code, headers=headers)
    return JSONResponse({"detail": message}, status_code=status, headers=headers)


def _public(scope: dict) -> bool:
    """The inspector page and its static files (no data, no model) load without a key."""
    path = scope.get("path", "")
    return scope.get("method") in ("GET", "HEAD") and (path == "/" or path.startswith("/inspector/"))


def _non_json_number(body: bytes) -> str | None:
    """What is wrong with a body that Python's JSON parser reads but JSON does not allow (``NaN``,
    ``Infinity``, ``1e999``); ``None`` for valid JSON and for bodies that are malformed in another way (the
    route's own 422 says where)."""
    try:
        loads_strict(body.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return None
    except ValueError as exc:
        return str(exc)
    return None


def _header(scope: dict, name: bytes) -> list[bytes]:
    return [v for k, v in scope.get("headers", ()) if k.lower() == name]


class ApiKeyMiddleware:
    """401 unless ``Authorization: Bearer KEY`` or ``X-API-Key: KEY`` matches (before the body is read)."""

    def __init__(self, app, api_key: str):
        self.app = app
        self._key = api_key.encode()

    def _authorized(self, scope: dict) -> bool:
        given = list(_header(scope, b"x-api-key"))
        for value in _header(scope, b"authorization"):
            scheme, _, token = value.partition(b" ")
            if scheme.lower() == b"bearer":
                given.append(token.strip())
        ok = False
        for g in given:
            ok |= hmac.compare_digest(g, self._key)
        return ok

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or _public(scope) or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        response = _refusal(
            scope,
            401,
            "missing or wrong API key: send 'Authorization: Bearer KEY' or 'X-API-Key: KEY'",
            "invalid_api_key",
            {"WWW-Authenticate": 'Bearer realm="evidential-rag"'},
        )
        await response(scope, receive, send)


class BodyLimitMiddleware:
    """413 when the body is over ``max_bytes``: by its ``Content-Length`` or by the bytes received.

    The body is read (at most ``max_bytes``) before the app runs and replayed to it; a refused body is
    drained (up to a cap) so that the client reads the 413 instead of a reset connection.
    """

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes
        self.drain_cap = max(4 * max_bytes, 1 << 20)

    async def _reject(self, scope, receive, send, more: bool, received: int) -> None:
        while more and received <= self.drain_cap:
            msg = await receive()
            if msg["type"] != "http.request":
                return
            received += len(msg.get("body", b""))
            more = msg.get("more_body", False)
        response = _refusal(
            scope,
            413,
            f"request body too large: the limit is {self.max_bytes} bytes (max_body_bytes)",
            "request_too_large",
            {"Connection": "close"},
        )
        await response(scope, receive, send)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for value in _header(scope, b"content-length"):
            try:
                declared = int(value)
            except ValueError:
                await _refusal(scope, 400, "invalid Content-Length header", "invalid_request")(
                    scope, receive, send
                )
                return
            if declared > self.max_bytes:
                await self._reject(scope, receive, send, declared <= self.drain_cap, 0)
                return
        body = bytearray()
        while True:
            msg = await receive()
            if msg["type"] != "http.request":  # client went away
                return
            body += msg.get("body", b"")
            more = msg.get("more_body", False)
            if len(body) > self.max_bytes:
                await self._reject(scope, receive, send, more, len(body))
                return
            if not more:
                break
        if body and (problem := _non_json_number(bytes(body))):
            # Python's parser (FastAPI's) reads NaN and Infinity, which JSON does not have: refused here,
            # they would otherwise reach a record and fail its JSON response
            await _refusal(scope, 422, f"request body is not valid JSON: {problem}", "invalid_request")(
                scope, receive, send
            )
            return
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
