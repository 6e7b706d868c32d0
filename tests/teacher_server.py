"""A fixture teacher served over real HTTP on 127.0.0.1, in the shape of vLLM's OpenAI-compatible server.

It serves a real transformers model (a ``save_pretrained`` directory) the way ``vllm serve PATH``
does, for the parts a teacher client reads:

- ``GET /v1/models``: ``{"object": "list", "data": [{"id": NAME, "object": "model", "max_model_len": N}]}``;
- ``POST /tokenize``: ``{"tokens": [...], "count": n, "max_model_len": N}``;
- ``POST /v1/completions`` with ``prompt`` as token ids and ``prompt_logprobs``: one choice whose
  ``prompt_logprobs`` is ``[null, {"<id>": {"logprob": x, "rank": r, "decoded_token": s}}, ...]``
  (the log-probs at temperature 1, from the model's logits), and one generated token.

Modes for the failure paths: ``fail`` (HTTP 500 on the next n completions, or every one with -1),
``slow_s`` (each completion waits), ``no_tokenize`` (404 there, as a server without the route),
``names`` (the models listed), ``tokenizer`` (another tokenizer for ``/tokenize``).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FixtureTeacherServer:
    """``with FixtureTeacherServer(path) as server: server.url`` (the ``/v1`` root)."""

    def __init__(self, path: str, name: str = "teacher", **modes: Any):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
        self.model = AutoModelForCausalLM.from_pretrained(path).eval()
        self.tokenizer = modes.pop("tokenizer", None) or AutoTokenizer.from_pretrained(path)
        self.name = name
        self.names = modes.pop("names", [name])
        self.fail = modes.pop("fail", 0)
        self.slow_s = modes.pop("slow_s", 0.0)
        self.no_tokenize = modes.pop("no_tokenize", False)
        assert not modes, modes
        self.max_model_len = int(self.model.config.max_position_embeddings)
        self.completions = 0
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FixtureTeacherServer:
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def prompt_logprobs(self, ids: list[int]) -> list[dict[str, dict[str, Any]] | None]:
        torch = self.torch
        with torch.no_grad(), self.lock:
            logits = self.model(input_ids=torch.tensor([ids])).logits[0, :-1].float()
        logp = torch.log_softmax(logits, dim=-1)
        out: list[dict[str, dict[str, Any]] | None] = [None]
        for t, token in enumerate(ids[1:]):
            value = float(logp[t, token])
            rank = int((logp[t] > value).sum()) + 1
            out.append({str(token): {"logprob": value, "rank": rank, "decoded_token": self.tokenizer.decode([token])}})
        return out

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def reply(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (slow mode): no traceback
                    pass

            def do_GET(self) -> None:
                if self.path == "/v1/models":
                    cards = [{"id": n, "object": "model", "owned_by": "vllm", "max_model_len": server.max_model_len} for n in server.names]
                    return self.reply(200, {"object": "list", "data": cards})
                self.reply(404, {"detail": "Not Found"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path == "/tokenize" and not server.no_tokenize:
                    ids = server.tokenizer(body["prompt"], add_special_tokens=body.get("add_special_tokens", True)).input_ids
                    return self.reply(200, {"tokens": ids, "count": len(ids), "max_model_len": server.max_model_len})
                if self.path != "/v1/completions":
                    return self.reply(404, {"detail": "Not Found"})
                if body.get("model") not in server.names:
                    return self.reply(404, {"object": "error", "message": f"The model `{body.get('model')}` does not exist."})
                with server.lock:
                    server.completions += 1
                    failing = server.fail == -1 or server.fail > 0
                    if server.fail > 0:
                        server.fail -= 1
                if failing:
                    return self.reply(500, {"object": "error", "message": "engine dead"})
                time.sleep(server.slow_s)
                ids = body["prompt"]
                if len(ids) + body.get("max_tokens", 16) > server.max_model_len:
                    return self.reply(400, {"object": "error", "message": "too long"})
                choice = {"index": 0, "text": "", "logprobs": None, "finish_reason": "length", "stop_reason": None,
                          "prompt_logprobs": server.prompt_logprobs(ids) if body.get("prompt_logprobs") is not None else None}
                self.reply(200, {"id": "cmpl-1", "object": "text_completion", "created": 0, "model": body["model"],
                                 "choices": [choice], "usage": {"prompt_tokens": len(ids), "total_tokens": len(ids) + 1,
                                                                "completion_tokens": 1}})

        return Handler
