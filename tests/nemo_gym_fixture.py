"""A small NeMo-Gym resources server written for the tests, on nemo-gym's own base classes.

Run by the interpreter that has nemo-gym (Python >= 3.12), never imported by pytest: NeMoGym-v0
starts it with ``resources_server="nemo_gym_fixture:EchoResourcesServer", server_paths=["tests"]``.

Rows hold ``expected`` (the reply that earns 1.0). Its verify says what it was sent (the types of
the response's output items, the last message's text); it fails (HTTP 500) on a reply holding
``CRASH`` and, for a row with ``"broken": true``, on every reply. Its tools: ``sleep`` (for the
timeouts) and ``greet`` (says the config's ``greeting``, set by ``server_config=``).
"""

from __future__ import annotations

import asyncio

from fastapi import FastAPI
from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from pydantic import BaseModel


class EchoConfig(BaseResourcesServerConfig):
    greeting: str = "hi"


class SleepRequest(BaseModel):
    seconds: float


class GreetRequest(BaseModel):
    name: str


class EchoVerifyRequest(BaseVerifyRequest):
    expected: str
    broken: bool = False


class EchoVerifyResponse(BaseVerifyResponse):
    output_types: list[str]
    last_text: str


class EchoResourcesServer(SimpleResourcesServer):
    config: EchoConfig

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.post("/sleep")(self.sleep)
        app.post("/greet")(self.greet)
        return app

    async def sleep(self, body: SleepRequest) -> dict:
        await asyncio.sleep(body.seconds)
        return {"slept": body.seconds}

    async def greet(self, body: GreetRequest) -> dict:
        return {"text": f"{self.config.greeting}, {body.name}"}

    async def verify(self, body: EchoVerifyRequest) -> EchoVerifyResponse:
        texts = [part.text for item in body.response.output if item.type == "message" for part in item.content]
        last = texts[-1] if texts else ""
        if body.broken or "CRASH" in last:
            raise RuntimeError("the verifier cannot read this reply")
        return EchoVerifyResponse(**body.model_dump(), reward=float(last.strip() == body.expected),
                                  output_types=[item.type for item in body.response.output], last_text=last)
