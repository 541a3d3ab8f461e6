"""The OpenAI-compatible endpoints: ``GET /v1/models`` and ``POST /v1/chat/completions``, so that OpenAI
clients and chat UIs can use an EvidentialRAG server as if it were a model.

* **Models**: ``evidential-rag`` (the server's evaluator) and ``evidential-rag/<evaluator>`` for each evaluator
  a request may name (``evidential-rag/learned``, ``evidential-rag/prompt``). Another name is a 404
  ``model_not_found``.
* **Request**: the OpenAI chat body. The *last user message* is the question (its text, or its ``text``
  parts joined); earlier messages are not read. Extra fields (the OpenAI client's ``extra_body``):
  ``chunks`` (as in ``/ask``; omitted: the server's index is searched), ``candidates``, ``lam``, ``tau1``,
  ``tau2``, ``rule``, ``policy``. ``n`` must be 1; ``stream`` streams; the other OpenAI sampling fields
  (``temperature``, ``max_tokens``, ``top_p``, ``seed``, ...) are accepted and ignored: decoding is the run
  config's (greedy by default), so every client gets the answer the evidence routes to.
* **Response**: a ``chat.completion`` whose message content is the routed response; the answer record of
  ``/ask`` (route, claims with fused masses, ``uncertainty`` with its ``ignorance`` / ``conflict`` parts,
  ``cited_chunk_ids``, per-chunk evidence) is the extra top-level field ``evidential``. No ``usage`` block:
  the pipeline does not count tokens across its passes.
* **Streaming** (``stream: true``): ``chat.completion.chunk`` events; the first carries the role and, in
  ``evidential``, the fused, routed evidence record (empty ``response``); then one chunk per piece of
  text; the last has ``finish_reason`` and the final answer record in ``evidential``; then
  ``data: [DONE]``. A failure after the first chunk is sent as ``{"error": {...}}``.
* **Errors** use the OpenAI shape ``{"error": {"message", "type", "param", "code"}}`` with the status codes of
  ``/ask`` (401, 413, 422, 502, 503 with ``Retry-After``).
"""

import time
import uuid
from typing import Annotated, Any, Literal

from fastapi import FastAPI
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from inference.answer import AnswerRecord
from inference.server.admission import Admission
from inference.server.config import ServerConfig
from inference.server.middleware import openai_error
from inference.server.pipelines import (
    FUSION_OVERRIDES,
    AskJob,
    Pipelines,
    RequestError,
    check_request,
    request_error,
)
from inference.server.schemas import to_chunks
from inference.server.streaming import EventStream, sse

__all__ = ["MODEL_PREFIX", "install_openai_routes", "model_ids"]

#: The model id of the server's own evaluator; ``MODEL_PREFIX + "/" + name`` names another.
MODEL_PREFIX = "evidential-rag"


def model_ids(pipelines: Pipelines) -> list[str]:
    """The model ids a request may name."""
    return [MODEL_PREFIX, *(f"{MODEL_PREFIX}/{n}" for n in pipelines.available)]


def _evaluator_of(pipelines: Pipelines, model: str) -> str:
    if model == MODEL_PREFIX:
        return pipelines.default
    prefix = MODEL_PREFIX + "/"
    if model.startswith(prefix) and model[len(prefix) :] in pipelines.available:
        return model[len(prefix) :]
    raise RequestError(
        404,
        f"model {model!r} does not exist on this server; use one of {', '.join(model_ids(pipelines))}",
        code="model_not_found",
    )


class _TextPart(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: str = Field(description="Content part type; only 'text' parts are read.")
    text: str | None = Field(default=None, description="The text of a 'text' part.")


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[_TextPart] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(p.text or "" for p in self.content if p.type == "text")
        return self.content or ""


def _request_model(ChunkIn: type, s: ServerConfig) -> type[BaseModel]:
    class ChatRequest(BaseModel):
        """An OpenAI chat-completion request with EvidentialRAG's extra fields."""

        model_config = ConfigDict(extra="ignore")

        model: str = Field(
            min_length=1, max_length=128, description="evidential-rag or evidential-rag/<evaluator>."
        )
        messages: list[_Message] = Field(
            min_length=1, max_length=256, description="The chat; the last user message is the question."
        )
        stream: bool = Field(default=False, description="Stream chat.completion.chunk events.")
        n: int = Field(default=1, ge=1, le=1, description="Number of choices (only 1).")
        chunks: list[ChunkIn] | None = Field(  # type: ignore[valid-type]
            default=None,
            max_length=s.max_chunks,
            description="Retrieved chunks; omitted: the server's index.",
        )
        candidates: list[Annotated[str, Field(min_length=1, max_length=500)]] = Field(
            default_factory=list, max_length=s.max_candidates, description="Candidate claims."
        )
        lam: float | None = Field(default=None, allow_inf_nan=False, description="fusion.lam override.")
        tau1: float | None = Field(default=None, allow_inf_nan=False, description="fusion.tau1 override.")
        tau2: float | None = Field(default=None, allow_inf_nan=False, description="fusion.tau2 override.")
        rule: str | None = Field(default=None, max_length=32, description="fusion.rule override.")
        policy: str | None = Field(default=None, max_length=32, description="fusion.policy override.")

    return ChatRequest


def _question(body: Any, s: ServerConfig) -> str:
    users = [m for m in body.messages if m.role == "user"]
    if not users:
        raise RequestError(422, "messages must contain a user message (the question)", code="invalid_request")
    text = users[-1].text()
    if not text.strip():
        raise RequestError(422, "the last user message is empty; it is the question", code="invalid_request")
    if len(text) > s.max_question_chars:
        raise RequestError(
            422,
            f"the last user message is {len(text)} characters; the limit is {s.max_question_chars} (max_question_chars)",
            code="invalid_request",
        )
    return text


def _finish_reason(record: AnswerRecord) -> str:
    gen = record.generation
    return "length" if gen is not None and gen.finish_reason == "length" else "stop"


def _openai_problem(err: RequestError) -> JSONResponse:
    return openai_error(err.status, err.message, err.code, headers=err.headers or None)


def install_openai_routes(app: FastAPI, ChunkIn: type, server: ServerConfig) -> None:
    """Add ``GET /v1/models`` and ``POST /v1/chat/completions`` to ``app`` (built by
    :func:`inference.server.app.create_app`, whose ``state`` holds the pipelines and the admission)."""
    pipelines: Pipelines = app.state.pipelines
    admission: Admission = app.state.admission
    ChatRequest = _request_model(ChunkIn, server)

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        """The model ids this server answers to (one per evaluator it serves)."""
        created = int(app.state.started)
        return {
            "object": "list",
            "data": [
                {"id": m, "object": "model", "created": created, "owned_by": "evidential-rag"}
                for m in model_ids(pipelines)
            ],
        }

    @app.post("/v1/chat/completions")
    async def chat(body: ChatRequest):  # type: ignore[valid-type]
        """Answer the last user message; the answer record travels in ``evidential``."""
        try:
            name = _evaluator_of(pipelines, body.model)
            question = _question(body, server)
            chunks = to_chunks(body.chunks) if body.chunks is not None else None
            overrides = {k: getattr(body, k) for k in FUSION_OVERRIDES}
            name, fusion = check_request(pipelines, name, overrides, chunks)
        except RequestError as err:
            return _openai_problem(err)
        cid, created, candidates = f"chatcmpl-{uuid.uuid4().hex}", int(time.time()), list(body.candidates)

        def head(obj: str) -> dict[str, Any]:
            return {"id": cid, "object": obj, "created": created, "model": body.model}

        if not body.stream:
            job = AskJob(name, question, chunks, candidates, fusion)
            try:
                record, _, _ = await app.state.batcher.submit(job.key, job)
            except Exception as exc:
                return _openai_problem(request_error(exc, "/v1/chat/completions"))
            message = {"role": "assistant", "content": record.response}
            choice = {
                "index": 0,
                "message": message,
                "finish_reason": _finish_reason(record),
                "logprobs": None,
            }
            return JSONResponse(
                {**head("chat.completion"), "choices": [choice], "evidential": record.to_dict()}
            )

        def produce(cancel):
            return pipelines.get(name).answer_stream(question, chunks, candidates, fusion, cancel)

        try:
            stream = await EventStream.start(admission, produce)
        except Exception as exc:
            return _openai_problem(request_error(exc, "/v1/chat/completions"))

        def chunk(delta: dict, finish: str | None = None, record: AnswerRecord | None = None) -> str:
            out = {
                **head("chat.completion.chunk"),
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
            }
            if record is not None:
                out["evidential"] = record.to_dict()
            return sse(out)

        async def events():
            yield chunk({"role": "assistant", "content": ""}, record=stream.first[1])
            async for item in stream.rest():
                if item[0] == "error":
                    err = request_error(item[1], "/v1/chat/completions")
                    body_ = openai_error(err.status, err.message, err.code).body
                    yield sse(body_.decode())
                    return
                kind, value = item
                if kind == "delta":
                    yield chunk({"content": value})
                else:
                    yield chunk({}, _finish_reason(value), value)
            yield sse("[DONE]")

        return StreamingResponse(
            events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )
