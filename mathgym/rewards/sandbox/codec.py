"""The value codec: how values cross the sandbox's boundary, and the bounds on what comes back.

Shared and pure (standard library only; numpy and pandas only when one of their values
arrives): the untrusted child encodes what the program's calls return
(:func:`encode_value`), the trusted side decodes it (:func:`decode_value`) under bounds on
size, digits, depth and hashing, since whatever the child sends is untrusted. The same
functions encode a test's arguments on the trusted side and decode them in the child. The
warm worker loads this file by path (its children and the judge use it there); the trusted
caller imports it as :mod:`mathgym.rewards.sandbox.codec`.
"""

import itertools
import re
import sys

#: Builtins a test may wrap a call's result in (``sorted(f(x)) == ...``): the call plan names
#: one and the child applies its own copy, taken before the program runs.
WRAPPER_NAMES = "list tuple set frozenset sorted dict len sum min max any all str int float bool abs round".split()


_SCALARS = (type(None), bool, str, float)
_TAGGED = {tuple: "t", set: "s", frozenset: "fs"}
_UNTAGGED = {tag: kind for kind, tag in _TAGGED.items()}
_MAX_DEPTH = 100
_RAW_INT = 1 << 256  # larger ints travel as hex (JSON's decimal digits are capped by Python)


def _is_raw(value):
    kind = type(value)
    return kind in _SCALARS or (kind is int and -_RAW_INT < value < _RAW_INT)


def encode_value(value, depth=0):
    """A plain value as JSON-ready data that keeps its exact type; anything else raises TypeError.

    Plain: None, bool, int, float, complex, str, bytes, and list, tuple, set, frozenset,
    dict of plain values. Subclasses are refused (an ``int`` subclass could redefine
    ``==``). JSON's own types travel as themselves (Python writes a float with a point or
    exponent, so ``1`` and ``1.0`` stay apart); a list is a JSON array; everything else
    is a one-key object: ``{"t": [...]}`` tuple, ``{"s": ...}`` set, ``{"fs": ...}``,
    ``{"d": [[k, v], ...]}`` dict, ``{"i": hex}`` big int, ``{"c": [re, im]}``, ``{"b": hex}``.
    """
    if _is_raw(value):
        return value
    kind = type(value)
    if depth > _MAX_DEPTH:
        raise ValueError("the value is nested too deeply")
    if kind is int:
        return {"i": hex(value)}
    if kind is list:
        return list(value) if all(map(_is_raw, value)) else [encode_value(item, depth + 1) for item in value]
    if kind in _TAGGED:
        return {_TAGGED[kind]: encode_value(list(value), depth + 1)}
    if kind is dict:
        return {"d": [[encode_value(k, depth + 1), encode_value(v, depth + 1)] for k, v in value.items()]}
    if kind is complex:
        return {"c": [value.real, value.imag]}
    if kind is bytes:
        return {"b": value.hex()}
    arrays = _encode_array(value, depth)
    if arrays is not None:
        return arrays
    raise TypeError(f"returned a {kind.__name__}, which is not a plain value (None, bool, int, float, complex, str, bytes, list, tuple, set, dict, "
                    "a numpy array or scalar, a pandas Series or DataFrame)")


#: The numpy dtypes that cross by value: bool, ints, floats, complex, text, bytes and objects
#: (whose items must be plain), written as ``numpy.dtype.str`` writes them.
_ARRAY_DTYPE = re.compile(r"\A[<>|=]?(b1|i[1248]|u[1248]|f[248]|c(8|16)|U\d{1,6}|S\d{1,6}|O|[Mm]8\[(Y|M|W|D|h|m|s|ms|us|ns)\])\Z")
_MAX_DIMENSIONS = 32
#: Most bytes a decoded array may take.
MAX_ARRAY_BYTES = 1 << 28


def _encode_array(value, depth):
    """A numpy array or scalar, or a pandas Series or DataFrame, as data that rebuilds it
    (``{"nd": [dtype, shape, items]}``, ``{"np": [dtype, item]}``, ``{"pd": ...}``); ``None`` for
    anything else. Only the modules the program imported are looked at (none is imported here),
    and only their exact types: a subclass could redefine ``==``."""
    numpy, pandas = sys.modules.get("numpy"), sys.modules.get("pandas")
    kind = type(value)
    if numpy is not None and kind is getattr(numpy, "ndarray", None):
        if not _ARRAY_DTYPE.match(value.dtype.str):
            raise TypeError(f"returned an array of {value.dtype}, which does not cross the sandbox boundary")
        flat = value.ravel()
        items = flat.view("<i8").tolist() if value.dtype.kind in "Mm" else flat.tolist()  # dates as their integer ticks
        return {"nd": [value.dtype.str, list(value.shape), encode_value(items, depth + 1)]}
    if numpy is not None and isinstance(value, getattr(numpy, "generic", ())) and _ARRAY_DTYPE.match(value.dtype.str) and value.dtype.kind != "O":
        item = int(value.view("<i8")) if value.dtype.kind in "Mm" else value.item()
        return {"np": [value.dtype.str, encode_value(item, depth + 1)]}
    if pandas is not None and kind in (getattr(pandas, "Series", None), getattr(pandas, "DataFrame", None)):
        columns = [value] if kind is pandas.Series else [value.iloc[:, k] for k in range(value.shape[1])]
        labels = [value.name] if kind is pandas.Series else list(value.columns)
        plain = (pandas.RangeIndex, pandas.Index, pandas.DatetimeIndex, pandas.MultiIndex)
        rows = (*plain, pandas.CategoricalIndex, pandas.IntervalIndex)
        if type(value.index) not in rows or (kind is pandas.DataFrame and type(value.columns) not in plain):
            raise TypeError("returned a pandas object whose index is not a plain one (a period or timedelta index...)")
        body = {
            "kind": "series" if kind is pandas.Series else "frame",
            "index": _encode_pandas_values(value.index, depth + 1, pandas),
            "labels": encode_value(labels, depth + 1),
            "label_names": encode_value(list(value.columns.names) if kind is pandas.DataFrame else [], depth + 1),
            "columns": [_encode_pandas_values(column, depth + 1, pandas) for column in columns],
            "index_name": encode_value(value.index.name, depth + 1),
            "freq": encode_value(getattr(value.index, "freqstr", None), depth + 1),
        }
        return {"pd": body}
    return None


#: Time zones that cross by name (``America/New_York``, ``UTC``, ``Etc/GMT+5``): a name, never a path
#: (pandas would read ``dateutil/...`` names as files) or a fixed offset's description.
_TZ_NAME = re.compile(r"(?!dateutil/)[A-Za-z][A-Za-z0-9_+\-]{0,40}(/[A-Za-z0-9_+\-]{1,40}){0,2}")
#: Most levels of a decoded MultiIndex.
_MAX_LEVELS = 32


def _encode_pandas_values(values, depth, pandas):
    """A pandas index or column as data that rebuilds it: its numpy array, or, for what numpy does
    not hold, ``{"tz": [zone, naive UTC datetimes]}``, ``{"cat": [categories, codes, ordered]}``,
    ``{"iv": [left ends, right ends, closed side]}`` (intervals, as ``pd.cut`` makes them),
    ``{"mi": [levels, names]}`` (a MultiIndex, each level by itself)."""
    if depth > _MAX_DEPTH:
        raise ValueError("the value is nested too deeply")
    dtype = values.dtype
    if type(values) is pandas.MultiIndex:
        levels = [_encode_pandas_values(values.get_level_values(k), depth + 1, pandas) for k in range(values.nlevels)]
        return {"mi": [levels, encode_value(list(values.names), depth + 1)]}
    if type(dtype) is pandas.DatetimeTZDtype:
        zone = str(dtype.tz)
        if not _TZ_NAME.fullmatch(zone):
            raise TypeError(f"returned dates in the time zone {zone[:40]!r}, which does not cross the sandbox boundary by name")
        naive = values.tz_convert(None) if isinstance(values, pandas.Index) else values.dt.tz_convert(None)
        return {"tz": [zone, encode_value(naive.to_numpy(), depth + 1)]}
    if type(dtype) is pandas.IntervalDtype:
        spans = values if isinstance(values, pandas.Index) else values.array
        ends = [_encode_pandas_values(pandas.Index(side), depth + 1, pandas) for side in (spans.left, spans.right)]
        return {"iv": [*ends, str(spans.closed)]}
    if type(dtype) is pandas.CategoricalDtype:
        codes = values.codes if isinstance(values, pandas.Index) else values.cat.codes.to_numpy()
        return {"cat": [_encode_pandas_values(dtype.categories, depth + 1, pandas), encode_value(codes, depth + 1), bool(dtype.ordered)]}
    return encode_value(values.to_numpy(), depth + 1)


#: Bounds of a decoded value (the child's answer is untrusted): elements in all, elements
#: that are containers or tagged values (each decoded by a Python call), bits of one int.
MAX_ELEMENTS = 1 << 21
MAX_NESTED = 1 << 19
MAX_INT_BITS = 1 << 22
#: Most distinct keys of one set or dict that may share a hash. Python compares each new
#: key with every stored key of its hash, so n distinct keys of one hash cost n**2 / 2
#: comparisons (ints ``k * (2**61 - 1)`` all hash alike; so do tuples built from them).
MAX_EQUAL_HASHES = 16


def check_hash_spread(keys):
    """Raise ValueError when more than :data:`MAX_EQUAL_HASHES` distinct ``keys`` share one hash.

    Run before untrusted keys go into a set or dict, so that building it stays linear.
    The hashes are sorted, not put in a table; only a hash held by more keys than the cap
    has its keys compared (copies of one value are fine), each with at most twice the
    cap of others. TypeError for an unhashable key, as ``set()`` would raise.
    """
    keys = keys if type(keys) is list else list(keys)
    hashes = list(map(hash, keys))
    ordered = sorted(hashes)
    cap = MAX_EQUAL_HASHES
    crowded = set(itertools.compress(ordered, map(int.__eq__, ordered, ordered[cap:])))
    if not crowded:
        return
    groups = {}
    for key, value in zip(keys, hashes):
        if value in crowded:
            groups.setdefault(value, []).append(key)
    for group in groups.values():
        seen = set()
        for start in range(0, len(group), cap):
            seen.update(group[start : start + cap])  # at most 2 * cap keys of this hash in ``seen``
            if len(seen) > cap:
                raise ValueError(f"more than {cap} of its {len(keys)} keys are distinct and share one hash")


class _Budget:
    """Elements, and nested or tagged values, left to decode in one value."""

    def __init__(self):
        self.elements, self.nested = MAX_ELEMENTS, MAX_NESTED

    def take(self, count):
        self.elements -= count
        if self.elements < 0:
            raise ValueError(f"more than {MAX_ELEMENTS} elements")

    def nest(self):
        self.nested -= 1
        if self.nested < 0:
            raise ValueError(f"more than {MAX_NESTED} containers or tagged values")


_JSON_SCALARS = frozenset((type(None), bool, str, float, int))


def decode_value(data):
    """The value :func:`encode_value` encoded; ValueError on anything it could not have written.

    Bounded, since the data comes from the child: at most :data:`MAX_ELEMENTS` elements,
    :data:`MAX_NESTED` of them containers or tagged values, nesting depth 100, ints of :data:`MAX_INT_BITS` bits (a JSON
    parser already refuses decimal ints over 4300 digits), sets and dicts whose keys
    spread over hashes (:func:`check_hash_spread`); linear in the data's size (n log n
    for sets and dicts).
    """
    return _decode(data, 0, _Budget())


def _decode(data, depth, budget):
    kind = type(data)
    if kind is list:
        budget.nest()
        budget.take(len(data))
        if _JSON_SCALARS.issuperset(map(type, data)):
            return data
        if depth >= _MAX_DEPTH:
            raise ValueError("nested too deeply")
        return [_decode(item, depth + 1, budget) for item in data]
    if kind is not dict:
        if kind in _JSON_SCALARS:
            return data
        raise ValueError("not an encoded value")
    if len(data) != 1 or depth >= _MAX_DEPTH:
        raise ValueError("not an encoded value" if len(data) != 1 else "nested too deeply")
    budget.nest()
    ((tag, body),) = data.items()
    if tag in _UNTAGGED and type(body) is list:
        items = _decode(body, depth + 1, budget)
        if tag != "t":
            check_hash_spread(items)
        return _UNTAGGED[tag](items)
    if tag == "d" and type(body) is list and all(type(pair) is list and len(pair) == 2 for pair in body):
        budget.take(len(body))
        pairs = [(_decode(k, depth + 1, budget), _decode(v, depth + 1, budget)) for k, v in body]
        check_hash_spread([k for k, _ in pairs])
        return dict(pairs)
    if tag == "i" and type(body) is str:
        if len(body) > MAX_INT_BITS // 4 + 3:
            raise ValueError(f"an int of more than {MAX_INT_BITS} bits")
        return int(body, 16)
    if tag == "c" and type(body) is list and len(body) == 2 and all(type(part) in (int, float) and _is_raw(part) for part in body):
        return complex(*body)
    if tag == "b" and type(body) is str:
        return bytes.fromhex(body)
    if tag in ("nd", "np") and type(body) is list:
        return _decode_array(tag, body, depth, budget)
    if tag == "pd" and type(body) is dict:
        return _decode_pandas(body, depth, budget)
    raise ValueError(f"unknown encoding {str(tag)[:20]!r}")


def _module(name):
    """numpy or pandas, imported when a value of theirs arrives; ValueError where it is missing."""
    try:
        return __import__(name)
    except ImportError:
        raise ValueError(f"a {name} value arrived and {name} is not installed here") from None


def _decode_array(tag, body, depth, budget):
    """A numpy array (``nd``: dtype, shape, items) or scalar (``np``: dtype, item)."""
    if not body or type(body[0]) is not str or not _ARRAY_DTYPE.match(body[0]):
        raise ValueError("not an encoded array")
    numpy = _module("numpy")
    dtype = numpy.dtype(body[0])
    if tag == "np":
        if len(body) != 2 or dtype.kind == "O":
            raise ValueError("not an encoded numpy scalar")
        item = _decode(body[1], depth + 1, budget)
        try:
            if dtype.kind in "Mm":
                return numpy.array([item], dtype="<i8").view(dtype)[0]
            return dtype.type(item)
        except (TypeError, OverflowError) as err:
            raise ValueError(f"not a {dtype} value: {err}") from None
    if len(body) != 3 or type(body[1]) is not list or len(body[1]) > _MAX_DIMENSIONS:
        raise ValueError("not an encoded array")
    shape = body[1]
    if not all(type(n) is int and 0 <= n <= MAX_ELEMENTS for n in shape):
        raise ValueError("an array's shape is not a list of sizes")
    items = _decode(body[2], depth + 1, budget)
    size = 1
    for n in shape:
        size *= n
        if size > MAX_ELEMENTS:
            raise ValueError(f"an array of more than {MAX_ELEMENTS} elements")
    if type(items) is not list or len(items) != size:
        raise ValueError("an array's items do not fill its shape")
    if size * dtype.itemsize > MAX_ARRAY_BYTES:  # a wide text dtype takes its width for every item, however short
        raise ValueError(f"an array of more than {MAX_ARRAY_BYTES} bytes")
    try:
        if dtype.kind == "O":
            array = numpy.empty(size, dtype=object)
            for index, item in enumerate(items):
                array[index] = item
        elif dtype.kind in "Mm":  # dates and durations travel as their integer ticks
            array = numpy.array(items, dtype="<i8").view(dtype)
        else:
            array = numpy.array(items, dtype=dtype)
        return array.reshape(shape)
    except (TypeError, OverflowError, ValueError) as err:
        raise ValueError(f"not an array of {dtype}: {str(err)[:100]}") from None


def _decode_pandas_values(data, depth, budget, levels=True):
    """What :func:`_encode_pandas_values` wrote: a 1-d numpy array, or a tz-aware DatetimeIndex, a
    Categorical or (``levels``) a MultiIndex, built by pandas from checked parts."""
    numpy = _module("numpy")
    tag, body = next(iter(data.items())) if type(data) is dict and len(data) == 1 else (None, None)
    if depth >= _MAX_DEPTH:
        raise ValueError("nested too deeply")
    if tag not in ("tz", "cat", "iv", "mi") or type(body) is not list:
        array = _decode(data, depth + 1, budget)
        if type(array) is not numpy.ndarray or array.ndim != 1:
            raise ValueError("not an encoded pandas value")
        return array
    pandas = _module("pandas")
    budget.nest()
    try:
        if tag == "tz" and len(body) == 2 and type(body[0]) is str and _TZ_NAME.fullmatch(body[0]):
            naive = _decode(body[1], depth + 1, budget)
            if type(naive) is numpy.ndarray and naive.ndim == 1 and naive.dtype.kind == "M":
                return pandas.DatetimeIndex(naive).tz_localize("UTC").tz_convert(body[0])
        if tag == "cat" and len(body) == 3 and type(body[2]) is bool:
            categories = _decode_pandas_values(body[0], depth + 1, budget, levels=False)
            codes = _decode(body[1], depth + 1, budget)
            if type(codes) is numpy.ndarray and codes.ndim == 1 and codes.dtype.kind == "i" and type(categories) is not pandas.Categorical:
                return pandas.Categorical.from_codes(codes, categories=categories, ordered=body[2])
        if tag == "iv" and len(body) == 3 and body[2] in ("left", "right", "both", "neither"):
            left, right = (_decode_pandas_values(side, depth + 1, budget, levels=False) for side in body[:2])
            if all(type(side) is numpy.ndarray and side.dtype.kind in "iufM" for side in (left, right)):
                return pandas.IntervalIndex.from_arrays(left, right, closed=body[2])
        if tag == "mi" and levels and len(body) == 2 and type(body[0]) is list and 0 < len(body[0]) <= _MAX_LEVELS:
            arrays = [_decode_pandas_values(level, depth + 1, budget, levels=False) for level in body[0]]
            names = _decode(body[1], depth + 1, budget)
            if type(names) is list and len(names) == len(arrays) and len({len(a) for a in arrays}) == 1:
                return pandas.MultiIndex.from_arrays(arrays, names=names)
    except (TypeError, ValueError, KeyError, OverflowError) as err:  # an unknown zone, codes out of range, unhashable names
        raise ValueError(f"not a pandas value: {str(err)[:100]}") from None
    raise ValueError("not an encoded pandas value")


def _decode_pandas(body, depth, budget):
    """A pandas Series or DataFrame: its columns as arrays, its labels, index and index name."""
    if set(body) != {"kind", "index", "labels", "label_names", "columns", "index_name", "freq"} or body["kind"] not in ("series", "frame"):
        raise ValueError("not an encoded pandas value")
    index = _decode_pandas_values(body["index"], depth + 1, budget)
    labels, label_names = _decode(body["labels"], depth + 1, budget), _decode(body["label_names"], depth + 1, budget)
    if type(body["columns"]) is not list:
        raise ValueError("not an encoded pandas value")
    columns = [_decode_pandas_values(column, depth + 1, budget, levels=False) for column in body["columns"]]
    name, freq = _decode(body["index_name"], depth + 1, budget), _decode(body["freq"], depth + 1, budget)
    if type(labels) is not list or len(labels) != len(columns):
        raise ValueError("not an encoded pandas value")
    if any(len(column) != len(index) for column in columns) or (body["kind"] == "series" and len(columns) != 1):
        raise ValueError("a pandas value's columns do not match its index")
    pandas = _module("pandas")
    try:
        if type(index) is pandas.MultiIndex:
            axis = index
        elif type(index) is pandas.Categorical:
            axis = pandas.CategoricalIndex(index, name=name)
        elif type(freq) is str and index.dtype.kind == "M":  # a date index keeps its frequency (pandas compares it)
            axis = pandas.DatetimeIndex(index, name=name, freq=freq)
        elif type(index) in (pandas.DatetimeIndex, pandas.IntervalIndex):  # dates in a time zone, intervals
            axis = index.rename(name)
        else:
            axis = pandas.Index(index, name=name) if len(index) else pandas.RangeIndex(0)
        columns = [column.array if type(column) in (pandas.DatetimeIndex, pandas.IntervalIndex) else column for column in columns]
        if type(label_names) is not list:
            raise ValueError("not an encoded pandas value")
        if body["kind"] == "series":
            return pandas.Series(columns[0], index=axis, name=labels[0])
        header = pandas.Index(labels, tupleize_cols=True)  # tuples: a MultiIndex
        if len(label_names) != header.nlevels:
            raise ValueError("a pandas value's column names do not match its columns")
        header = header.set_names(label_names)
        return pandas.DataFrame(dict(zip(range(len(columns)), columns)), index=axis).set_axis(header, axis=1)
    except (TypeError, ValueError, KeyError) as err:
        raise ValueError(f"not a pandas value: {str(err)[:100]}") from None
