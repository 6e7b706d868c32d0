"""What an env served over HTTP (``mathgym serve``) and its client (``mathgym/Remote-v0``) say to
each other: the JSON encoding of values, the description of spaces, and the errors.

Values. Observations, rewards, ``info``, reset options and env options travel as JSON. Plain
JSON (``str``, ``int``, finite ``float``, ``bool``, ``None``, lists, objects with string keys)
is written as it is; every other value is an object with a ``"$type"`` key, so that the client
gets back what the local env returns:

======================================================  ===============================================
JSON                                                    Python value
======================================================  ===============================================
``{"$type": "status", "value": "correct"}``             :class:`mathgym.rewards.base.Status` member
``{"$type": "tuple", "items": [...]}``                  ``tuple``
``{"$type": "set", "items": [...]}``                    ``set`` (``frozen: true``: ``frozenset``)
``{"$type": "float", "value": "nan"}``                  ``nan``, ``inf``, ``-inf``
``{"$type": "bytes", "base64": "..."}``                 ``bytes``
``{"$type": "ndarray", "dtype": "int64",                ``numpy.ndarray`` (C order; numeric, bool and
"shape": [2, 2], "data": [...]}``                       string dtypes)
``{"$type": "numpy", "dtype": "float32", "value": x}``  numpy scalar (``numpy.float32(x)``...)
``{"$type": "mapping", "items": [[k, v], ...]}``        ``dict`` whose keys are not all ``str``, or
                                                        that has a ``"$type"`` key of its own
``{"$type": "repr", "class": "pkg.Name", "value": s}``  anything else: decoded as the ``str`` ``s``
                                                        (its ``repr``; the only lossy case)
======================================================  ===============================================

Other enums travel as their value (a ``StrEnum`` member as its ``str``, which compares equal).

Errors. A request that fails answers with an HTTP 4xx or 5xx status and
``{"error": {"type": NAME, "message": TEXT}}``; the client raises the mathgym error of that
name (:data:`ERRORS`), so code written against the local env catches the same exceptions.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from mathgym.errors import (
    ConfigError,
    DatasetError,
    EpisodeFinishedError,
    InvalidActionError,
    MathgymError,
    ResetNeededError,
    UnknownEnvError,
)
from mathgym.rewards.base import Status
from mathgym.spaces import UnicodeText

TAG = "$type"


# -- errors of a served env ---------------------------------------------------------------------


class RemoteEnvError(MathgymError, RuntimeError):
    """The env server failed: the env raised an unexpected exception (HTTP 500), the server
    answered something that is not the protocol, or it could not be reached."""


class SessionNotFoundError(RemoteEnvError):
    """The server holds no session of that id: it was closed, timed out (``--session-timeout``)
    or the server restarted. Make a new env."""


class ServerBusyError(RemoteEnvError):
    """The server already holds ``--max-sessions`` sessions; close some, or wait for idle ones
    to time out."""


class UnauthorizedError(RemoteEnvError):
    """The server wants a shared secret (``mathgym serve --token-env VAR``) and the request did not
    carry it: give the client ``token_env=`` the name of an environment variable holding the same token."""


class BadRequestError(MathgymError, ValueError):
    """The server could not read a request (not JSON, a field missing or of the wrong type)."""


#: Error name → (class the client raises, HTTP status the server answers with).
ERRORS: dict[str, tuple[type[Exception], int]] = {
    "BadRequestError": (BadRequestError, 400),
    "UnauthorizedError": (UnauthorizedError, 401),
    "UnknownEnvError": (UnknownEnvError, 404),
    "SessionNotFoundError": (SessionNotFoundError, 404),
    "ResetNeededError": (ResetNeededError, 409),
    "EpisodeFinishedError": (EpisodeFinishedError, 409),
    "InvalidActionError": (InvalidActionError, 422),
    "ConfigError": (ConfigError, 422),
    "DatasetError": (DatasetError, 422),
    "RemoteEnvError": (RemoteEnvError, 500),
    "ServerBusyError": (ServerBusyError, 503),
}


def error_body(err: Exception) -> tuple[int, dict[str, Any]]:
    """The HTTP status and JSON body that report ``err`` (an error outside :data:`ERRORS` is a
    500 ``RemoteEnvError`` naming the exception's type)."""
    name = type(err).__name__
    if name in ERRORS and isinstance(err, ERRORS[name][0]):
        return ERRORS[name][1], {"error": {"type": name, "message": str(err)}}
    return 500, {"error": {"type": "RemoteEnvError", "message": f"{name}: {err}"}}


def error_from_body(http_status: int, body: Any) -> Exception:
    """The exception a client raises for an error answer (``body``: the decoded JSON, or text)."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        return RemoteEnvError(f"the env server answered HTTP {http_status}: {str(body)[:500]}")
    name, message = error.get("type"), error["message"]
    if name not in ERRORS:  # an error this client does not know (a newer server's): named in the message
        return RemoteEnvError(f"{name}: {message}")
    cls = ERRORS[name][0]
    if cls is UnknownEnvError:  # its constructor writes its own message; keep the server's
        err = UnknownEnvError("", [])
        err.args = (message,)
        return err
    return cls(message)


# -- values -------------------------------------------------------------------------------------


def encode(value: Any) -> Any:
    """``value`` as plain JSON data (see the module's table)."""
    if value is None or type(value) in (bool, int, str):
        return value
    if isinstance(value, Status):
        return {TAG: "status", "value": value.value}
    if type(value) is float:
        return value if math.isfinite(value) else {TAG: "float", "value": str(value)}
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufcU":
            return _as_repr(value)
        return {TAG: "ndarray", "dtype": value.dtype.str, "shape": list(value.shape), "data": encode(value.ravel().tolist())}
    if isinstance(value, np.generic):
        return {TAG: "numpy", "dtype": value.dtype.str, "value": encode(value.item())}
    if isinstance(value, (int, str, float)):  # other enums and subclasses: their plain value
        return encode(_plain_value(value))
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value) and TAG not in value:
            return {k: encode(v) for k, v in value.items()}
        return {TAG: "mapping", "items": [[encode(k), encode(v)] for k, v in value.items()]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, tuple):
        return {TAG: "tuple", "items": [encode(v) for v in value]}
    if isinstance(value, (set, frozenset)):
        return {TAG: "set", "frozen": isinstance(value, frozenset), "items": [encode(v) for v in value]}
    if isinstance(value, (bytes, bytearray)):
        return {TAG: "bytes", "base64": base64.b64encode(bytes(value)).decode("ascii")}
    return _as_repr(value)


def _plain_value(value: int | str | float) -> int | str | float:
    """The ``int``, ``str`` or ``float`` inside a subclass' value (an ``IntEnum``, a ``StrEnum``...)."""
    if isinstance(value, str):
        return str.__str__(value)
    return int.__int__(value) if isinstance(value, int) else float.__float__(value)


def _as_repr(value: Any) -> dict[str, Any]:
    cls = type(value)
    return {TAG: "repr", "class": f"{cls.__module__}.{cls.__qualname__}", "value": repr(value)}


def decode(data: Any) -> Any:
    """The Python value of :func:`encode`'s JSON data."""
    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict):
        return data
    kind = data.get(TAG)
    if kind is None:
        return {k: decode(v) for k, v in data.items()}
    try:
        return _DECODERS[kind](data)
    except (KeyError, TypeError, ValueError) as err:
        raise RemoteEnvError(f"cannot decode a {kind!r} value from the env server: {err}") from None


def _decode_array(data: dict[str, Any]) -> np.ndarray:
    return np.array(decode(data["data"]), dtype=np.dtype(data["dtype"])).reshape(data["shape"])


_DECODERS = {
    "status": lambda d: Status(d["value"]),
    "tuple": lambda d: tuple(decode(d["items"])),
    "set": lambda d: (frozenset if d.get("frozen") else set)(decode(d["items"])),
    "float": lambda d: float({"nan": "nan", "inf": "inf", "-inf": "-inf"}[d["value"]]),
    "bytes": lambda d: base64.b64decode(d["base64"]),
    "ndarray": _decode_array,
    "numpy": lambda d: np.dtype(d["dtype"]).type(decode(d["value"])),
    "mapping": lambda d: {decode(k): decode(v) for k, v in d["items"]},
    "repr": lambda d: str(d["value"]),
}


# -- spaces -------------------------------------------------------------------------------------


def describe_space(space: gym.Space) -> dict[str, Any]:
    """A JSON description of a text or discrete space; raises :class:`ConfigError` for others."""
    if isinstance(space, UnicodeText):
        return {"type": "UnicodeText", "max_length": space.max_length, "min_length": space.min_length}
    if isinstance(space, gym.spaces.Text):
        return {"type": "Text", "max_length": space.max_length, "min_length": space.min_length,
                "charset": "".join(space.character_list)}
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    raise ConfigError(f"a {type(space).__name__} space cannot be served over HTTP (text and discrete spaces can).")


def space_from_description(data: Any) -> gym.Space:
    """The space :func:`describe_space` described."""
    try:
        kind = data["type"]
        if kind == "UnicodeText":
            return UnicodeText(int(data["max_length"]), min_length=int(data["min_length"]))
        if kind == "Text":
            return gym.spaces.Text(int(data["max_length"]), min_length=int(data["min_length"]), charset=str(data["charset"]))
        if kind == "Discrete":
            return gym.spaces.Discrete(int(data["n"]), start=int(data["start"]))
    except (KeyError, TypeError, ValueError) as err:
        raise RemoteEnvError(f"the env server described a space the client cannot read: {data!r} ({err})") from None
    raise RemoteEnvError(f"the env server described a space of unknown type: {data!r}")
