"""The policy behind an OpenAI-compatible Chat Completions endpoint (aiohttp), every call recorded.

Agent programs written against OpenAI's API (the ``openai`` client, agent frameworks) point their
``base_url`` at :class:`PolicyEndpoint` and run unchanged; each call is sampled from the policy being
trained and recorded token for token (:mod:`mathgym.agents.endpoint.recorder`), grouped by the run
id the client sends: the header ``X-Mathgym-Run: RUN``, or the API key (``api_key=RUN``).

Routes: ``POST /v1/chat/completions`` (``messages``, ``tools``, ``tool_choice``, ``n``, ``max_tokens``
/ ``max_completion_tokens``, ``stop``, ``logprobs``, ``stream`` with ``stream_options.include_usage``),
``GET /v1/models``. Errors answer OpenAI's ``{"error": {"message", "type", "param", "code"}}``:
400 a request that cannot be served (``context_length_exceeded`` when the prompt leaves no room),
409 a call for a run its driver has closed, 500 a failure of the sampler.

Batching: concurrent calls are the sampler's batch. A call waits ``gather_s`` for others, then all
waiting calls (up to ``max_batch`` samples) go to one :meth:`LLMPolicy.generate
<mathgym.agents.policy.LLMPolicy.generate>` (one per distinct ``stop`` list), in one thread: the
model is never run by two calls at once.

What a request does not choose: the temperature and top-p are the endpoint's (``sampling``: a
trainer's, the ones its learner scores with); a request's ``temperature``, ``top_p``, ``seed`` and
``model`` are ignored, and its ``max_tokens`` is capped by ``sampling.max_new_tokens``.
``top_logprobs`` come back empty (the sampler keeps the log-prob of the sampled token only), and
``tool_choice="required"`` or a named function is not enforced (no constrained decoding).
A streamed answer is sent once sampled, in the chunks OpenAI's stream has.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from mathgym.agents.chat_format import ChatFormat
from mathgym.agents.endpoint.openai_messages import (
    RequestError,
    assistant_message,
    parse_stop,
    template_messages,
    tools_option,
)
from mathgym.agents.endpoint.recorder import CallRecord, HistoryMode, Recorder, RunClosedError, Sample
from mathgym.agents.sampling import SamplingParams
from mathgym.errors import ConfigError

log = logging.getLogger("mathgym.agents.endpoint")
#: The header naming a call's run (else its API key does).
RUN_HEADER = "X-Mathgym-Run"
#: Most samples one request may ask for (``n``).
MAX_N = 64
#: Largest request body accepted.
MAX_REQUEST_BYTES = 16 * 1024 * 1024


def run_id_of(request: web.Request) -> str:
    """The run a call belongs to: its ``X-Mathgym-Run`` header, else its API key (``""``: none)."""
    header = request.headers.get(RUN_HEADER, "").strip()
    if header:
        return header
    scheme, _, key = request.headers.get("Authorization", "").partition(" ")
    return key.strip() if scheme.lower() == "bearer" else ""


def stream_seed(sampling_seed: int, run_id: str, call: int, sample: int) -> int:
    """The seed of one sample's stream: a hash of ``(sampling_seed, run id, call, sample)``.

    Example:
        >>> stream_seed(0, "r", 1, 0) == stream_seed(0, "r", 1, 0) != stream_seed(0, "r", 1, 1)
        True
    """
    digest = hashlib.sha256(f"{sampling_seed}\x00{run_id}\x00{call}\x00{sample}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


@dataclass
class _Waiting:
    """A call waiting for its samples."""

    call: CallRecord
    seeds: list[int]
    max_new: int
    stop: tuple[str, ...]
    tools_on: bool
    future: asyncio.Future = field(repr=False)


class PolicyEndpoint:
    """An OpenAI Chat Completions server sampling from ``policy`` (see the module docstring).

    Args:
        policy: The policy that answers (an :class:`~mathgym.agents.policy.LLMPolicy`).
        sampling: Temperature, top-p and the longest completion.
        chat: The chat format prompts are written in (default: ``policy.chat``).
        history: How a continued conversation is prompted (:mod:`mathgym.agents.endpoint.recorder`).
        max_context_tokens: Longest prompt + completion (``None``: no bound).
        gather_s: How long a call waits for others to share its batch.
        max_batch: Most samples in one batch.
        sampling_seed: Seeds each sample's stream by ``(sampling_seed, run id, call, sample)``
            (:func:`stream_seed`): a run's samples do not depend on the other runs. ``None``: random seeds.
        model_name: The model id ``/v1/models`` lists and responses carry.

    Example::

        endpoint = PolicyEndpoint(policy)
        with ServerThread(endpoint) as url:          # mathgym.aio_server's, on 127.0.0.1
            client = openai.OpenAI(base_url=url + "/v1", api_key="run-1")
            client.chat.completions.create(model="policy", messages=[{"role": "user", "content": "2+3?"}])
        endpoint.recorder.run("run-1").calls[0].prompt_ids
    """

    def __init__(
        self, policy: Any, sampling: SamplingParams = SamplingParams(), *, chat: ChatFormat | None = None,
        history: HistoryMode = "template", max_context_tokens: int | None = None, gather_s: float = 0.005,
        max_batch: int = 256, sampling_seed: int | None = None, model_name: str = "mathgym-policy",
    ):
        self.policy, self.sampling = policy, sampling
        self.chat = policy.chat if chat is None else chat
        self.recorder = Recorder(self.chat, history)
        self.max_context_tokens, self.gather_s, self.max_batch = max_context_tokens, gather_s, max(1, int(max_batch))
        self.sampling_seed, self.model_name = sampling_seed, model_name
        #: The number of samples in each batch the sampler ran (what concurrency bought).
        self.batch_sizes: list[int] = []
        self._waiting: list[_Waiting] = []
        self._wake: asyncio.Event | None = None
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="mathgym-endpoint-sampler")
        self._draw = random.Random(sampling_seed)

    # -- the application ------------------------------------------------------------------------

    def app(self) -> web.Application:
        """The aiohttp application: the routes and the batcher."""
        app = web.Application(middlewares=[_errors_as_openai], client_max_size=MAX_REQUEST_BYTES)
        app.add_routes([
            web.post("/v1/chat/completions", self.chat_completions),
            web.get("/v1/models", self.models),
        ])
        app.cleanup_ctx.append(self._lifetime)
        return app

    async def _lifetime(self, app: web.Application) -> Any:
        self._wake = asyncio.Event()
        batcher = asyncio.create_task(self._batch_forever())
        yield
        batcher.cancel()
        for waiting in self._waiting:
            waiting.future.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def models(self, request: web.Request) -> web.Response:
        return _json({"object": "list", "data": [{"id": self.model_name, "object": "model", "created": 0, "owned_by": "mathgym"}]})

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            raise RequestError("the body is not JSON") from None
        if not isinstance(body, dict):
            raise RequestError("the body must be a JSON object")
        messages = template_messages(body.get("messages"))
        tools, tools_on = tools_option(body.get("tools"), body.get("tool_choice"))
        n = body.get("n", 1) if body.get("n") is not None else 1
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_N:
            raise RequestError(f"n must be an integer from 1 to {MAX_N}", "n")
        run_id = run_id_of(request)
        call = self.recorder.start_call(run_id, messages, tools)
        max_new = self._room(call, body)
        call.max_new_tokens = max_new
        if self.sampling_seed is None:
            seeds = [self._draw.getrandbits(63) for _ in range(n)]
        else:
            seeds = [stream_seed(self.sampling_seed, run_id, call.index, j) for j in range(n)]
        future = asyncio.get_running_loop().create_future()
        self._waiting.append(_Waiting(call, seeds, max_new, parse_stop(body.get("stop")), tools_on, future))
        self._wake.set()
        samples: list[Sample] = await future
        response = self._response(call, samples, bool(body.get("logprobs")))
        if not body.get("stream"):
            return _json(response)
        usage = bool((body.get("stream_options") or {}).get("include_usage")) if isinstance(body.get("stream_options"), dict) else False
        return await _stream(request, response, usage)

    def _room(self, call: CallRecord, body: dict[str, Any]) -> int:
        """The completion length a call may have: its ``max_tokens``, the endpoint's, the context's room."""
        asked = body.get("max_completion_tokens", body.get("max_tokens"))
        if asked is not None and (not isinstance(asked, int) or isinstance(asked, bool) or asked < 1):
            raise RequestError("max_tokens must be a positive integer", "max_tokens")
        room = self.sampling.max_new_tokens if asked is None else min(asked, self.sampling.max_new_tokens)
        if self.max_context_tokens is not None:
            left = self.max_context_tokens - len(call.prompt_ids)
            if left < 1:
                raise RequestError(
                    f"the prompt has {len(call.prompt_ids)} tokens; this endpoint's context holds {self.max_context_tokens}",
                    "messages", "context_length_exceeded",
                )
            room = min(room, left)
        return room

    # -- sampling ---------------------------------------------------------------------------------

    async def _batch_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            await asyncio.sleep(self.gather_s)  # the calls arriving meanwhile share the batch
            batch, size = [], 0
            while self._waiting and (not batch or size + len(self._waiting[0].seeds) <= self.max_batch):
                batch.append(self._waiting.pop(0))
                size += len(batch[-1].seeds)
            if not self._waiting:
                self._wake.clear()
            batch = [w for w in batch if not w.future.done()]  # a client that went away
            if not batch:
                continue
            try:
                results = await loop.run_in_executor(self._pool, self._sample, batch)
            except Exception as err:  # noqa: BLE001 - every call of the batch answers the sampler's failure
                log.exception("sampling a batch of %d calls failed", len(batch))
                for waiting in batch:
                    if not waiting.future.done():
                        waiting.future.set_exception(err)
                continue
            for waiting, samples in zip(batch, results):
                self.recorder.finish_call(waiting.call, samples)
                if not waiting.future.done():
                    waiting.future.set_result(samples)

    def _sample(self, batch: Sequence[_Waiting]) -> list[list[Sample]]:
        """The samples of each waiting call: one ``generate`` per distinct ``stop`` list (in the sampler's thread)."""
        out: dict[int, list[Sample]] = {}
        by_stop: dict[tuple[str, ...], list[int]] = {}
        for i, waiting in enumerate(batch):
            by_stop.setdefault(waiting.stop, []).append(i)
        for stop, members in by_stop.items():
            rows = [(i, j) for i in members for j in range(len(batch[i].seeds))]
            params = SamplingParams(
                self.sampling.temperature, self.sampling.top_p, max(batch[i].max_new for i in members), stop or self.sampling.stop,
            )
            prompts = [batch[i].call.prompt_ids for i, _ in rows]
            gens = self.policy.generate(prompts, params, seeds=[batch[i].seeds[j] for i, j in rows])
            self.batch_sizes.append(len(prompts))
            for (i, j), gen in zip(rows, gens):
                waiting = batch[i]
                tokens, logprobs, finish = gen.token_ids, gen.logprobs, gen.finish_reason
                if len(tokens) > waiting.max_new:  # a prefix of a sample is a sample of the shorter bound
                    tokens, logprobs, finish = tokens[: waiting.max_new], logprobs[: waiting.max_new], "length"
                message = assistant_message(self.chat.action_text(tokens), waiting.tools_on)
                reason = "length" if finish == "length" else ("tool_calls" if message.get("tool_calls") else "stop")
                out.setdefault(i, []).append(Sample(list(tokens), [float(x) for x in logprobs], reason, message, waiting.seeds[j]))
        return [out[i] for i in range(len(batch))]

    # -- answers --------------------------------------------------------------------------------

    def _response(self, call: CallRecord, samples: Sequence[Sample], logprobs: bool) -> dict[str, Any]:
        choices = []
        for j, sample in enumerate(samples):
            choice: dict[str, Any] = {"index": j, "message": sample.message, "finish_reason": sample.finish_reason, "logprobs": None}
            if logprobs:
                choice["logprobs"] = {"content": [self._token_logprob(t, lp) for t, lp in zip(sample.completion_ids, sample.logprobs)]}
            choices.append(choice)
        completion = sum(len(s.completion_ids) for s in samples)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": self.model_name, "choices": choices,
            "usage": {"prompt_tokens": len(call.prompt_ids), "completion_tokens": completion,
                      "total_tokens": len(call.prompt_ids) + completion},
        }

    def _token_logprob(self, token: int, logprob: float) -> dict[str, Any]:
        text = self.chat.decode([token], skip_special_tokens=False)
        return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8")), "top_logprobs": []}


async def _stream(request: web.Request, response: dict[str, Any], usage: bool) -> web.StreamResponse:
    """``response`` sent as OpenAI's server-sent chunks: the role and content, the tool calls, the finish."""
    stream = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await stream.prepare(request)
    head = {"id": response["id"], "object": "chat.completion.chunk", "created": response["created"], "model": response["model"]}

    async def send(choices: list[dict[str, Any]], **extra: Any) -> None:
        await stream.write(f"data: {json.dumps({**head, 'choices': choices, **extra})}\n\n".encode())

    for choice in response["choices"]:
        message, j = choice["message"], choice["index"]
        await send([{"index": j, "delta": {"role": "assistant", "content": message.get("content") or ""},
                     "logprobs": choice["logprobs"], "finish_reason": None}])
        if message.get("tool_calls"):
            calls = [{"index": k, **call} for k, call in enumerate(message["tool_calls"])]
            await send([{"index": j, "delta": {"tool_calls": calls}, "logprobs": None, "finish_reason": None}])
        await send([{"index": j, "delta": {}, "logprobs": None, "finish_reason": choice["finish_reason"]}])
    if usage:
        await send([], usage=response["usage"])
    await stream.write(b"data: [DONE]\n\n")
    await stream.write_eof()
    return stream


_ERROR_STATUS: list[tuple[type[BaseException], int, str]] = [
    (RequestError, 400, "invalid_request_error"),
    (ConfigError, 400, "invalid_request_error"),
    (RunClosedError, 409, "conflict_error"),
]


@web.middleware
async def _errors_as_openai(request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
    """Every failure in OpenAI's error form; the sampler's own is a 500, logged."""
    try:
        return await handler(request)
    except web.HTTPException as err:
        if err.status < 400:
            raise
        return _error(err.status, f"{request.method} {request.path}: {err.reason}", "invalid_request_error")
    except Exception as err:  # noqa: BLE001 - each error answers its status
        for kind, status, name in _ERROR_STATUS:
            if isinstance(err, kind):
                return _error(status, str(err), name, getattr(err, "param", None), getattr(err, "code", None))
        log.exception("%s %s failed", request.method, request.path)
        return _error(500, f"{type(err).__name__}: {err}", "server_error")


def _error(status: int, message: str, kind: str, param: str | None = None, code: str | None = None) -> web.Response:
    return _json({"error": {"message": message, "type": kind, "param": param, "code": code}}, status)


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(data), status=status, content_type="application/json")
