"""A text space that accepts any Python string up to a maximum length."""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import string
from multiprocessing import heap, sharedctypes
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import shared_memory

#: Every env's default ``max_length``: a 32k-token answer at 4 characters a token. Reasoning
#: models write 10k-40k tokens before their answer; the bound is there against abuse (parsers
#: are linear, so an answer this long costs milliseconds), never against a real answer.
DEFAULT_MAX_LENGTH = 131_072

#: Characters used by :meth:`UnicodeText.sample`: printable ASCII (space, punctuation and
#: newlines included) and a few non-ASCII letters and symbols, so that random actions
#: exercise what real model output contains.
SAMPLE_CHARSET = string.printable + "éüßπ∑√≤≥×÷°€→λ中文"


class UnicodeText(spaces.Text):
    """Any ``str`` of at most ``max_length`` characters.

    Gymnasium's :class:`~gymnasium.spaces.Text` only admits characters of its charset
    (alphanumerics by default), which rejects spaces, punctuation and non-ASCII. This
    subclass keeps ``Text`` as its type (so gymnasium's vector utilities batch it as
    text) but accepts every string.

    Example:
        >>> UnicodeText(100).contains("x = 3, ∴ done.")
        True
    """

    def __init__(
        self, max_length: int = DEFAULT_MAX_LENGTH, *, min_length: int = 0, seed: int | np.random.Generator | None = None
    ):
        if max_length < 1:
            raise ValueError(f"max_length must be at least 1, got {max_length}")
        super().__init__(max_length=max_length, min_length=min_length, charset=SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is not None or probability is not None:
            return super().sample(mask=mask, probability=probability)
        # Short samples: a random action must be cheap to score.
        length = int(self.np_random.integers(self.min_length, min(self.max_length, 64) + 1))
        idx = self.np_random.integers(0, len(self.character_list), size=length)
        return "".join(self.character_list[i] for i in idx)

    def __repr__(self) -> str:
        return f"UnicodeText(max_length={self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, UnicodeText) and other.min_length == self.min_length and other.max_length == self.max_length

    __hash__ = None  # type: ignore[assignment]


# -- exact strings through AsyncVectorEnv's shared memory ------------------------------
# Gymnasium stores Text observations in shared memory as indices into the space's
# charset, dropping every character outside it. UnicodeText stores code points instead:
# one int32 length followed by ``max_length`` int32 code points per env.
# The buffer is sized for the bound but costs what the observations hold: ``ctx.Array`` would
# zero every byte, committing ``n * (max_length + 1) * 4`` bytes at once (64 MiB for 128 envs
# at 131,072 characters); a fresh block of multiprocessing's heap is a sparse file, so only the
# pages an observation is written to are allocated. The heap block is what ``ctx.Array`` wraps
# (shared with forked and spawned workers alike), less its ``memset``.


@shared_memory.create_shared_memory.register(UnicodeText)
def _create_unicode_shared_memory(space: UnicodeText, n: int = 1, ctx: Any = mp) -> Any:
    width = space.max_length + 1
    block = heap.BufferWrapper(n * width * ctypes.sizeof(ctypes.c_int32))
    raw = sharedctypes.rebuild_ctype(ctypes.c_int32 * (n * width), block, None)
    np.frombuffer(raw, dtype=np.int32)[::width] = 0  # each row's length: a reused heap block may hold old data
    return sharedctypes.synchronized(raw, ctx.RLock(), ctx=ctx)


class SharedTextBatch(Sequence[str]):
    """A live view of the strings an ``AsyncVectorEnv`` keeps in shared memory.

    ``AsyncVectorEnv`` reads its shared observation buffer once, at construction, and
    relies on the result being a view that later writes show through (true of numpy
    arrays, not of a tuple of str). This sequence decodes the buffer on access;
    ``copy.deepcopy`` (which the vector env applies with its default ``copy=True``)
    turns it into a plain ``tuple`` of the current strings.
    """

    def __init__(self, memory: Any, n: int, max_length: int):
        self._rows = np.frombuffer(memory.get_obj(), dtype=np.int32).reshape((n, max_length + 1))

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        row = self._rows[index]
        return row[1 : 1 + int(row[0])].tobytes().decode("utf-32-le", errors="surrogatepass")

    def __deepcopy__(self, memo: dict[int, Any]) -> tuple[str, ...]:
        return tuple(self)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SharedTextBatch({tuple(self)!r})"


@shared_memory.read_from_shared_memory.register(UnicodeText)
def _read_unicode_from_shared_memory(space: UnicodeText, memory: Any, n: int = 1) -> SharedTextBatch:
    return SharedTextBatch(memory, n, space.max_length)


@shared_memory.write_to_shared_memory.register(UnicodeText)
def _write_unicode_to_shared_memory(space: UnicodeText, index: int, value: str, memory: Any) -> None:
    if not space.contains(value):
        raise ValueError(f"observation is not a str of at most {space.max_length} characters")
    codes = np.frombuffer(value.encode("utf-32-le", errors="surrogatepass"), dtype=np.int32)
    width = space.max_length + 1
    row = np.frombuffer(memory.get_obj(), dtype=np.int32)[index * width : (index + 1) * width]
    row[0] = len(codes)
    row[1 : 1 + len(codes)] = codes
