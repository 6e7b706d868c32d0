"""A teacher behind an OpenAI-compatible completions server (vLLM): its log-probs of given token ids.

On-policy distillation needs the teacher's log-prob of every token the student sampled. A large
teacher is best served apart from the trainer, by vLLM on its own GPUs. vLLM's completions endpoint
returns these log-probs as *prompt log-probs*: :class:`RemoteTeacher` sends each sequence as the
prompt, as token ids (nothing is tokenised again, so the student's tokens are the ones scored),
with ``prompt_logprobs: 0`` (the log-prob of each prompt token itself) and one token to generate,
and reads ``choices[0].prompt_logprobs``: a list with one entry per prompt token, ``null`` for the
first, then ``{"<token id>": {"logprob": ...}, ...}``.

On :meth:`RemoteTeacher.connect` the client asks ``{base_url}/models`` for the served model (the
only one, when no name is given) and its ``max_model_len``, and checks that the server tokenises as
the student does: a probe text rendered by the student's chat template goes to vLLM's
``/tokenize`` (beside ``/v1``) and its ids must equal the student's. A server without
``/tokenize`` is used with a warning that the vocabulary could not be checked.

The server's log-probs are at temperature 1 (vLLM computes prompt log-probs from the raw logits),
so the student must score at temperature 1 too; the trainer checks that.

Requests run concurrently (``max_concurrency`` in flight), each with a timeout and retries
(timeouts, connection errors, HTTP 429 and 5xx, malformed bodies). A sequence the server could
not score after the retries, or one longer than the server's ``max_model_len``, gets ``None``: the
trainer treats it as an infrastructure failure (left out of the loss, counted), never as a score.

Standard library only (``urllib`` in a thread pool); the API key is read from the environment
variable ``api_key_env`` when a request is sent, never stored.

Serving a teacher::

    vllm serve Qwen/Qwen2.5-1.5B-Instruct --port 8000
    mathgym train --algo onpolicy-distill --teacher-url http://127.0.0.1:8000/v1 --model Qwen/Qwen2.5-0.5B-Instruct
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mathgym.agents.chat import apply_template
from mathgym.endpoint import EndpointError, send, with_retries
from mathgym.errors import ConfigError

log = logging.getLogger(__name__)

#: A reply body larger than this is refused (a sequence of 32k tokens with its log-probs is ~3 MB).
MAX_BODY_BYTES = 64 * 1024 * 1024

#: Rendered by the student's chat template and tokenised by both sides to check the vocabulary.
PROBE_CHAT = [
    {"role": "system", "content": "You are a careful assistant."},
    {"role": "user", "content": "Compute 12 * (3 + 4.5) - 7/2, then say it in words: naïve café, 北京, ∑ x² ≤ 10^3."},
    {"role": "assistant", "content": "12 * 7.5 = 90; 90 - 3.5 = 86.5. The answer is \\boxed{86.5}.\n\tdone"},
]


#: One failed request to the teacher server (:class:`mathgym.endpoint.EndpointError`).
TeacherRequestError = EndpointError


class RemoteTeacher:
    """The log-probs of a teacher served by vLLM (or any server of vLLM's completions API).

    Args:
        base_url: The API root, e.g. ``http://127.0.0.1:8000/v1``.
        model: The served model's name; empty: the server's only model.
        api_key_env: Environment variable holding the API key (sent as a bearer token when set).
        timeout_s: Seconds a request may take in all (connecting, and the whole reply however slowly it comes).
        max_retries: Further attempts after a failed request.
        backoff_s: Wait before retry ``i`` is ``backoff_s * 2 ** i``.
        max_concurrency: Requests in flight at once.
    """

    def __init__(
        self,
        base_url: str,
        model: str = "",
        *,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 300.0,
        max_retries: int = 2,
        backoff_s: float = 1.0,
        max_concurrency: int = 8,
    ):
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"teacher_url={base_url!r} is not an http(s) URL; give the server's API root, e.g. http://127.0.0.1:8000/v1.")
        if max_concurrency < 1 or max_retries < 0 or timeout_s <= 0:
            raise ConfigError("the teacher server's max_concurrency must be >= 1, max_retries >= 0 and timeout_s > 0.")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.timeout_s, self.max_retries, self.backoff_s = timeout_s, max_retries, backoff_s
        self.max_concurrency = max_concurrency
        self.max_model_len: int | None = None
        self.stats = {"requests": 0, "retries": 0, "failed_sequences": 0}
        self._lock = threading.Lock()

    @property
    def server_root(self) -> str:
        """The server's root, where vLLM serves ``/tokenize`` (the API root without its ``/v1``)."""
        return self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url

    # -- start: the served model and its vocabulary ----------------------------------------------

    def connect(self, tokenizer: Any) -> None:
        """Find the served model and its ``max_model_len``, and check that the server tokenises as
        ``tokenizer`` (the student's) does; :class:`ConfigError` when it cannot be reached or differs."""
        try:
            listing = self._request("GET", f"{self.base_url}/models", None)
            served = [m for m in listing.get("data", []) if isinstance(m, dict) and isinstance(m.get("id"), str)]
        except (TeacherRequestError, AttributeError) as err:
            raise ConfigError(f"teacher_url {self.base_url}: the server's model list could not be read ({err}).") from None
        names = [m["id"] for m in served]
        if not self.model:
            if len(names) != 1:
                raise ConfigError(f"teacher_url {self.base_url} serves {names or 'no model'}; name the teacher's with --teacher NAME.")
            self.model = names[0]
        elif self.model not in names:
            raise ConfigError(f"teacher_url {self.base_url} does not serve {self.model!r}; it serves {names}.")
        card = served[names.index(self.model)]
        if isinstance(card.get("max_model_len"), int):
            self.max_model_len = card["max_model_len"]
        self.check_vocabulary(tokenizer)

    def check_vocabulary(self, tokenizer: Any) -> None:
        """The probe chat's ids from the server's ``/tokenize`` must equal ``tokenizer``'s."""
        text = apply_template(tokenizer, PROBE_CHAT, tokenize=False) if getattr(tokenizer, "chat_template", None) else (
            "\n".join(m["content"] for m in PROBE_CHAT)
        )
        mine = list(tokenizer(text, add_special_tokens=False).input_ids)
        body = {"model": self.model, "prompt": text, "add_special_tokens": False}
        try:
            theirs = self._request("POST", f"{self.server_root}/tokenize", body).get("tokens")
        except TeacherRequestError as err:
            if err.reason == "HTTP 404":
                log.warning("teacher_url %s has no /tokenize: the teacher's vocabulary could not be checked against the "
                            "student's (it must be the same).", self.base_url)
                return
            raise ConfigError(f"teacher_url {self.base_url}: /tokenize failed ({err.reason}).") from None
        if theirs != mine:
            at = next((i for i, (a, b) in enumerate(zip(mine, theirs or [])) if a != b), min(len(mine), len(theirs or [])))
            raise ConfigError(
                f"the teacher served at {self.base_url} ({self.model}) does not tokenise as the student does: on a probe "
                f"text of {len(mine)} student tokens they differ from token {at} on. Teacher and student must share "
                "one vocabulary (the same tokenizer)."
            )

    # -- scoring ----------------------------------------------------------------------------------

    def logprobs(self, sequences: Sequence[Sequence[int]]) -> list[list[float] | None]:
        """Per sequence of token ids, the teacher's log-prob of each token after the first
        (``len - 1`` values), or ``None`` where it could not be scored (see the module docstring)."""
        if not sequences:
            return []
        with ThreadPoolExecutor(min(self.max_concurrency, len(sequences))) as pool:
            results = list(pool.map(self._score_one, sequences))
        with self._lock:
            self.stats["failed_sequences"] += sum(r is None for r in results)
        return results

    def _score_one(self, ids: Sequence[int]) -> list[float] | None:
        ids = [int(i) for i in ids]
        if len(ids) < 2:
            return []
        if self.max_model_len is not None and len(ids) >= self.max_model_len:
            log.warning("a sequence of %d tokens is longer than the teacher server's max_model_len (%d) allows: not scored",
                        len(ids), self.max_model_len)
            return None
        body = {"model": self.model, "prompt": ids, "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": 0}
        got = with_retries(lambda: parse_prompt_logprobs(self._request("POST", f"{self.base_url}/completions", body), ids),
                           max_retries=self.max_retries, backoff_s=self.backoff_s, on_retry=self._count_retry)
        if got.ok:
            return got.value
        log.warning("the teacher server could not score a sequence of %d tokens: %s", len(ids), "; ".join(got.failures))
        return None

    def _count_retry(self) -> None:
        with self._lock:
            self.stats["retries"] += 1

    def _request(self, method: str, url: str, body: dict[str, Any] | None) -> Any:
        """One request; its JSON reply, or :class:`TeacherRequestError`."""
        with self._lock:
            self.stats["requests"] += 1
        data = None if body is None else json.dumps(body).encode()
        raw = send(url, data, timeout_s=self.timeout_s, api_key_env=self.api_key_env, max_bytes=MAX_BODY_BYTES, method=method)
        try:
            return json.loads(raw)
        except ValueError:
            raise TeacherRequestError("reply is not JSON", retry=True) from None


#: The lowest log-prob believed. A log-softmax of real logits stays far above it (fp32 logits that far apart do
#: not occur), and a value below would swamp the distillation loss: such a reply is malformed, not a score.
LOGPROB_FLOOR = -1e4


def parse_prompt_logprobs(reply: Any, ids: Sequence[int]) -> list[float]:
    """The log-probs of ``ids[1:]`` from a completions reply with ``prompt_logprobs``; a reply that does
    not hold exactly those (wrong length, a token missing, a value that is not a log-prob) is
    :class:`TeacherRequestError`."""
    try:
        entries = reply["choices"][0]["prompt_logprobs"]
    except (KeyError, IndexError, TypeError):
        raise TeacherRequestError("reply has no choices[0].prompt_logprobs (does the server support prompt_logprobs?)", retry=False) from None
    if not isinstance(entries, list) or len(entries) != len(ids):
        raise TeacherRequestError(f"prompt_logprobs has {len(entries) if isinstance(entries, list) else 'no'} entries for {len(ids)} tokens", retry=False)
    out = []
    for token, entry in zip(ids[1:], entries[1:]):
        found = entry.get(str(token), entry.get(token)) if isinstance(entry, dict) else None
        value = found.get("logprob") if isinstance(found, dict) else found
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not LOGPROB_FLOOR <= value <= 1e-4:
            raise TeacherRequestError(f"prompt_logprobs has no valid log-prob for token {token}", retry=False)
        out.append(min(float(value), 0.0))
    return out
