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
Decoding is bounded (:func:`decode`, :func:`decode_request`): nesting, dtypes (the plain ones
``encode`` writes, never a subarray or record dtype), and the bytes arrays may take, checked
before anything is allocated.

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
#: The header naming the client that sends a request (a random id per client process): the server
#: holds the sessions it makes while it is heard from, and closes them when it goes silent or leaves.
CLIENT_HEADER = "X-Mathgym-Client"


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


#: Deepest nesting :func:`decode` reads (JSON objects and lists, tagged values included): far beyond
#: any env's info, and far below Python's recursion limit.
MAX_DEPTH = 64
#: Most bytes the arrays, numpy scalars and bytes of one decoded value may take, where the caller
#: gives no bound of its own (a server's answer; a request is bounded by its size, :func:`decode_request`).
MAX_DECODED_BYTES = 256 * 1024 * 1024
#: The array dtypes :func:`encode` writes (numeric, bool, unicode); anything else is refused.
_ARRAY_KINDS = "biufcU"


class _Undecodable(ValueError):
    """A tagged value :func:`decode` refuses (reported as the sender's fault by its caller)."""


def decode(data: Any, *, max_bytes: int = MAX_DECODED_BYTES) -> Any:
    """The Python value of :func:`encode`'s JSON data (an env server's answer).

    Raises:
        RemoteEnvError: The data is not what :func:`encode` writes, or would take more than
            ``max_bytes`` bytes of arrays.
    """
    try:
        return _Decoder(max_bytes).value(data, 0)
    except _Undecodable as err:
        raise RemoteEnvError(f"cannot decode a value from the env server: {err}") from None


def decode_request(data: Any, body_bytes: int) -> Any:
    """The Python value of a client's encoded options or action, bounded before anything is allocated:
    its arrays and bytes may take at most 8 bytes per byte of the request (a number is at least two
    characters of JSON, and at most 16 bytes wide) plus 1 MiB, so a 100-byte request never makes the
    server allocate more than about a megabyte, whatever dtype or shape it names.

    Raises:
        BadRequestError: The data is not what :func:`encode` writes, or names more than that bound.
    """
    try:
        return _Decoder(8 * body_bytes + 2**20).value(data, 0)
    except _Undecodable as err:
        raise BadRequestError(f"cannot decode a value of the request: {err}") from None


class _Decoder:
    """:func:`encode`'s inverse, charging every array, numpy scalar and bytes value to one budget
    before it is made (a dtype or shape is a few characters of JSON and could name gigabytes)."""

    def __init__(self, max_bytes: int):
        self.bytes_left = int(max_bytes)

    def charge(self, nbytes: int) -> None:
        if nbytes > self.bytes_left:
            raise _Undecodable(f"it names {nbytes:,} bytes of values, more than the {self.bytes_left:,} this message may")
        self.bytes_left -= nbytes

    def value(self, data: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise _Undecodable(f"it nests deeper than {MAX_DEPTH} levels")
        if isinstance(data, list):
            return [self.value(v, depth + 1) for v in data]
        if not isinstance(data, dict):
            return data
        kind = data.get(TAG)
        if kind is None:
            return {k: self.value(v, depth + 1) for k, v in data.items()}
        if not isinstance(kind, str) or kind not in _TAGGED:
            raise _Undecodable(f"unknown {TAG} {kind!r}")
        try:
            return _TAGGED[kind](self, data, depth + 1)
        except _Undecodable:
            raise
        except (KeyError, TypeError, ValueError, OverflowError) as err:
            raise _Undecodable(f"a {kind!r} value: {type(err).__name__}: {err}") from None

    def array(self, data: dict[str, Any], depth: int) -> np.ndarray:
        dtype, shape, items = _array_dtype(data["dtype"]), data["shape"], data["data"]
        if not isinstance(items, list) or not isinstance(shape, list) or len(shape) > 32:
            raise _Undecodable("an 'ndarray' needs 'data' as a flat list and 'shape' as a list of at most 32 sizes")
        if not all(type(n) is int and n >= 0 for n in shape) or math.prod(shape) != len(items):
            raise _Undecodable(f"an 'ndarray' of shape {str(shape)[:80]} cannot hold {len(items)} items")
        self.charge(len(items) * dtype.itemsize)
        values = [self.value(v, depth) for v in items]
        if not all(type(v) in (bool, int, float, str) for v in values):
            raise _Undecodable("an 'ndarray' holds only numbers, booleans and strings")
        return np.array(values, dtype=dtype).reshape(shape)

    def scalar(self, data: dict[str, Any], depth: int) -> np.generic:
        dtype, value = _array_dtype(data["dtype"]), self.value(data["value"], depth)
        if type(value) not in (bool, int, float, str):
            raise _Undecodable("a 'numpy' scalar holds a number, a boolean or a string")
        self.charge(dtype.itemsize)
        return dtype.type(value)

    def raw_bytes(self, data: dict[str, Any], depth: int) -> bytes:
        text = data["base64"]
        if not isinstance(text, str):
            raise _Undecodable("'bytes' need 'base64' as a string")
        self.charge(len(text) * 3 // 4)
        return base64.b64decode(text, validate=True)

    def items(self, data: dict[str, Any], depth: int) -> list[Any]:
        items = data["items"]
        if not isinstance(items, list):
            raise _Undecodable("'items' must be a list")
        return [self.value(v, depth) for v in items]

    def mapping(self, data: dict[str, Any], depth: int) -> dict[Any, Any]:
        pairs = self.items(data, depth)
        if not all(isinstance(p, list) and len(p) == 2 for p in pairs):
            raise _Undecodable("a 'mapping' holds [key, value] pairs")
        return {k: v for k, v in pairs}


def _array_dtype(name: Any) -> np.dtype:
    """The numpy dtype ``name`` (what :func:`encode` writes: a plain numeric, bool or unicode dtype,
    never a subarray, a record or an object dtype)."""
    if not isinstance(name, str) or len(name) > 16:
        raise _Undecodable(f"a dtype is a short string, got {str(name)[:40]!r}")
    dtype = np.dtype(name)
    if dtype.kind not in _ARRAY_KINDS or dtype.shape or dtype.names is not None:
        raise _Undecodable(f"dtype {name!r} is not a plain numeric, boolean or unicode dtype")
    return dtype


_TAGGED = {
    "status": lambda d, data, depth: Status(data["value"]),
    "tuple": lambda d, data, depth: tuple(d.items(data, depth)),
    "set": lambda d, data, depth: (frozenset if data.get("frozen") else set)(d.items(data, depth)),
    "float": lambda d, data, depth: float({"nan": "nan", "inf": "inf", "-inf": "-inf"}[data["value"]]),
    "bytes": _Decoder.raw_bytes,
    "ndarray": _Decoder.array,
    "numpy": _Decoder.scalar,
    "mapping": _Decoder.mapping,
    "repr": lambda d, data, depth: str(data["value"]),
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
