"""The untrusted side: what a sandboxed child runs once it is contained.

Stand-alone (standard library only): the warm worker (:mod:`mathgym.rewards.sandbox.trusted_worker`)
loads this file by path before it forks, with its two siblings :mod:`~mathgym.rewards.sandbox.containment`
and :mod:`~mathgym.rewards.sandbox.codec` set as its globals, so each forked child already has all three.
Nothing on the trusted side imports from here.

:func:`child` first seals the process (:func:`containment.contain`), says it is ready on the
result pipe, then runs the code: as a program (``"run"`` mode), as calls on given inputs
(``"calls"`` mode: it writes the returned values and never sees a test), or as a server of
calls (``"rpc"`` mode, :func:`_serve_calls`: it answers the call requests of the judge process,
which runs the tests, see :mod:`mathgym.rewards.sandbox.trusted_judge`). Values cross in the
codec's encoding; the child never reports a verdict.
"""

import builtins
import io
import json
import os
import sys
import time

if __package__:  # imported within mathgym (the doctests); the warm worker sets both before this file runs
    from . import codec, containment


def child(job, fds, scratch, uid, network, simulate_refusal):
    """The sandboxed process: never returns."""
    code = 70
    marks = [time.monotonic_ns()]  # entered, sealed, ready: where a job's time goes (bench_code.py --spans)
    try:
        sealed = containment.contain(job, fds, scratch, uid, network, simulate_refusal, marks)
        _write_line({"harness": "ready", **sealed, "marks": marks})
        code = {"calls": _execute_calls, "rpc": _serve_calls}.get(job["mode"], _execute)(job)
    except BaseException:  # noqa: BLE001 - the harness failing before the code ran
        code = 70
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001
                pass
        os._exit(code)


def _execute(job):
    import traceback

    namespace = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec(compile(job["code"], "main.py", "exec"), namespace)  # noqa: S102 - this IS the sandboxed child
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException as err:  # noqa: BLE001
        traceback.print_exception(type(err), err, err.__traceback__.tb_next)  # from the code's own frame
        return 1
    return 0


def _write_line(message):
    """One JSON line on the result pipe (fd 3), written whole."""
    data = memoryview((json.dumps(message) + "\n").encode())
    while data:
        data = data[os.write(3, data) :]


def _execute_calls(job):
    """Call the code's functions on the job's inputs; write each call's output, never a verdict.

    The job holds no test and no expected value (the caller compares the outputs), so
    nothing this process can reach tells it what a test wants.
    """

    # Inputs first, while builtins are pristine: literals and pure builtins from the test,
    # evaluated as the test would have (a bad input fails the code's load, as it would).
    try:
        calls = [
            (call["function"], [_input(a) for a in call["args"]], {k: _input(v) for k, v in call["kwargs"].items()}, _WRAPPERS.get(call.get("wrap")))
            for call in job["calls"]
        ]
    except BaseException as err:  # noqa: BLE001
        _write_line({"load_error": f"an input of the tests raised {_describe(err)}"})
        return 0
    namespace = {"__name__": "solution", "__builtins__": builtins}
    try:
        exec(compile(job["code"], "main.py", "exec"), namespace)  # noqa: S102 - this IS the sandboxed child
    except BaseException as err:  # noqa: BLE001 - SystemExit included: the code did not load
        _write_line({"load_error": _describe(err)})
        return 0
    for index, (name, args, kwargs, wrap) in enumerate(calls):
        try:
            function = namespace[name] if name in namespace else getattr(builtins, name)
        except AttributeError:
            _write_line({"i": index, "error": f"NameError: name {name!r} is not defined"})
            continue
        try:
            value = function(*args, **kwargs)
            line = {"i": index, "ok": codec.encode_value(value if wrap is None else wrap(value))}
        except BaseException as err:  # noqa: BLE001 - SystemExit in a call is a failed call too
            line = {"i": index, "error": _describe(err)}
        _write_line(line)
    return 0


def _serve_calls(job):
    """Load the code, then answer the judge's calls (fd 0 in, fd 4 out) until it closes fd 0.

    One reply line per request: the encoded return value or the exception, never a verdict
    (the judge holds the tests). The helpers are bound before the code runs, so a program
    that patches ``json`` or ``os`` changes only its own answers.
    """
    read, loads, dumps, encode, decode, chdir = os.read, json.loads, json.dumps, codec.encode_value, codec.decode_value, os.chdir
    shared = job.get("workspace")  # the working dir shared with the judge (None: the job has its own)

    def reply(message):
        data = memoryview((dumps(message) + "\n").encode())
        while data:
            data = data[os.write(4, data) :]

    namespace = {"__name__": "solution", "__builtins__": builtins}
    try:
        exec(compile(job["code"], "main.py", "exec"), namespace)  # noqa: S102 - this IS the sandboxed child
    except BaseException as err:  # noqa: BLE001 - SystemExit included: the code did not load
        reply({"load_error": _describe(err)})
        return 0
    reply({"ready": True})
    pending = bytearray()
    objects = []  # what calls returned that is not plain data, by handle (the judge holds only the numbers)
    while True:
        end = pending.find(b"\n")
        if end < 0:
            chunk = read(0, 1 << 16)
            if not chunk:
                return 0
            pending += chunk
            continue
        request = loads(bytes(pending[:end]))
        del pending[: end + 1]
        cwd = request.get("cwd")
        if shared and type(cwd) is str and (cwd == shared or cwd.startswith(shared + "/")):
            try:  # the test changed its working dir (into a dir it made): the call runs there too
                chdir(cwd)
            except OSError:
                pass
        if request.get("capture") is True:  # the test reads what the call prints (pytest's capsys)
            reply(_captured(lambda: _answer(namespace, request, encode, decode, objects)))
        else:
            reply(_answer(namespace, request, encode, decode, objects))


#: Most characters of a call's printed output sent back (each of stdout and stderr).
MAX_CAPTURED = 1 << 20


def _captured(answer):
    """``answer()`` with what it prints to ``sys.stdout`` and ``sys.stderr`` caught and added to
    its reply (``"stdout"``, ``"stderr"``), as pytest's ``capsys`` catches it."""
    streams = sys.stdout, sys.stderr
    out, err = io.StringIO(), io.StringIO()
    sys.stdout, sys.stderr = out, err
    try:
        message = answer()
    finally:
        sys.stdout, sys.stderr = streams
    message["stdout"], message["stderr"] = out.getvalue()[:MAX_CAPTURED], err.getvalue()[:MAX_CAPTURED]
    return message


#: Most objects one job's calls may hand out by handle (each stays alive in the child).
MAX_HANDLES = 100_000


def _set_item(owner, key, value):
    owner[key] = value


def _del_item(owner, key):
    del owner[key]


#: What a test may ask of the program's object besides its methods: each answered by the object
#: itself, as a method's result is (comparisons are not among them: an object's own ``__eq__``
#: would let it equal whatever the test expects).
_OPERATIONS = {
    "len": len, "bool": bool, "str": str, "iter": iter,
    "getitem": lambda owner, key: owner[key], "setitem": _set_item, "delitem": _del_item,
    "setattr": lambda owner, name, value: setattr(owner, str(name), value), "delattr": lambda owner, name: delattr(owner, str(name)),
}


def _answer(namespace, request, encode, decode, objects):
    """Run one request; its reply (value, handle or exception, and arguments changed in place).

    A request names a function of the program (``fn``), a name it reads as a value
    (``global``), or a method (``fn``), attribute (``attr``) or operation (``op``) of an object an
    earlier call returned (``obj``, its handle); ``handles`` and
    ``kw_handles`` put such objects in the arguments. A returned value that is not plain data
    stays here and is answered by a new handle (``{"handle": n, "type": name}``), so a test can
    build an instance and call its methods; only plain values ever cross.
    """
    if "global" in request:  # a name of the program the test reads as a value (a constant, an object)
        name = str(request["global"])
        if name not in namespace:
            return {"error": f"NameError: name {name!r} is not defined", "type": "NameError"}
        return _named_value(lambda: namespace[name], encode, objects)
    owner = request.get("obj")
    if owner is not None:
        if not _holds(objects, owner):
            return {"error": "an unknown object", "type": None}
        owner = objects[owner]
        if request.get("op") in _OPERATIONS:  # len(obj), obj[key]... as the object itself answers them
            try:
                value = _OPERATIONS[request["op"]](owner, *[decode(a) for a in request.get("args", ())])
            except BaseException as err:  # noqa: BLE001
                return {"error": _describe(err), "type": type(err).__name__}
            return _reply_value(value, encode, objects)
        if "attr" in request:
            return _named_value(lambda: getattr(owner, request["attr"]), encode, objects)
    name = request["fn"]
    args = [decode(a) for a in request["args"]]
    kwargs = {k: decode(v) for k, v in request["kwargs"].items()}
    handled = {int(k): v for k, v in request.get("handles", {}).items()}  # argument position -> handle
    kw_handled = request.get("kw_handles", {})  # keyword -> handle
    if not all(_holds(objects, handle) for handle in [*handled.values(), *kw_handled.values()]):
        return {"error": "an unknown object", "type": None}
    for position, handle in handled.items():
        args[position] = objects[handle]
    for keyword, handle in kw_handled.items():
        kwargs[keyword] = objects[handle]
    if owner is not None:
        try:
            function = getattr(owner, name)
        except BaseException as err:  # noqa: BLE001
            return {"error": _describe(err), "type": type(err).__name__}
    else:
        function = namespace.get(name)
        if function is None:
            return {"error": f"NameError: name {name!r} is not defined", "type": "NameError"}
    try:
        value = function(*args, **kwargs)
    except BaseException as err:  # noqa: BLE001 - SystemExit in a call is a failed call too
        answer = {"error": _describe(err), "type": type(err).__name__}
    else:
        answer = _reply_value(value, encode, objects)
    try:
        after = [None if i in handled else encode(a) for i, a in enumerate(args)]
        if after != request["args"]:
            answer["args"] = after
        after_kw = {k: encode(v) for k, v in kwargs.items() if k not in kw_handled}
        if after_kw != {k: v for k, v in request["kwargs"].items() if k not in kw_handled}:
            answer["kwargs"] = after_kw
    except BaseException:  # noqa: BLE001 - an argument turned into something unsendable: left as it was
        pass
    return answer


def _holds(objects, handle):
    """Whether ``handle`` names an object this child handed out."""
    return type(handle) is int and 0 <= handle < len(objects)


def _named_value(get, encode, objects):
    """What a name or attribute holds, as a reply: ``{"method": true}`` for something to call, else its value."""
    try:
        value = get()
        if callable(value):
            return {"method": True}
    except BaseException as err:  # noqa: BLE001
        return {"error": _describe(err), "type": type(err).__name__}
    return _reply_value(value, encode, objects)


def _reply_value(value, encode, objects):
    """A returned value as a reply: plain data, an iterator drained, else a handle to the object kept here."""
    try:
        # An iterator (a generator, map, zip...) is drained here and is an iterator again on
        # the judge's side: list(f(x)) works, f(x) == [...] stays False, as in Python.
        if type(value) not in (str, bytes, list, tuple, dict, set, frozenset) and hasattr(type(value), "__next__"):
            return {"iter": encode(list(value))}
    except BaseException as err:  # noqa: BLE001
        return {"error": f"the returned value cannot leave the sandbox: {_describe(err)}"[:500], "type": None}
    try:
        return {"ok": encode(value)}
    except TypeError as err:
        if len(objects) >= MAX_HANDLES:
            return {"error": f"the returned value cannot leave the sandbox: {_describe(err)}"[:500], "type": None}
        objects.append(value)
        try:
            kind = type(value).__name__
        except BaseException:  # noqa: BLE001
            kind = "object"
        return {"handle": len(objects) - 1, "type": str(kind)[:100]}
    except BaseException as err:  # noqa: BLE001
        return {"error": f"the returned value cannot leave the sandbox: {_describe(err)}"[:500], "type": None}


# Taken when this module loads (before any code runs), so a program that patches builtins
# changes only its own results.
_WRAPPERS = {name: getattr(builtins, name) for name in codec.WRAPPER_NAMES}


def _input(spec):

    if "src" in spec:
        return eval(compile(spec["src"], "<test input>", "eval"), {"__builtins__": builtins})  # noqa: S307 - test text, in the child
    return codec.decode_value(spec["value"])


def _describe(err):
    try:
        return f"{type(err).__name__}: {err}"[:500]
    except BaseException:  # noqa: BLE001 - a hostile __str__
        return type(err).__name__

