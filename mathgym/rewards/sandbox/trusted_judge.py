"""Tests of any shape run on the trusted side; every call of the program crosses into the sandbox.

Trusted side: the judge only reads what the sandboxed child answers (decoded with the
codec's bounds, :mod:`mathgym.rewards.sandbox.codec`), and never runs the program's code.

Where :mod:`mathgym.rewards.sandbox.trusted_plan` cannot turn a test into plain calls (loops,
comprehensions, helpers, seeded random inputs), the warm worker runs the job as ``"rpc"``:
it forks the sandboxed child, which loads the program and then answers one call per
request line (arguments in, the encoded return value out), and a second process, the
*judge*, which never runs the program's code. The judge executes the test source in a
fresh namespace where each name the test leaves unbound (``candidate``, the entry point,
a helper the program defines) is a :class:`_Program` proxy: calling it sends the call to
the child and returns the decoded value, a plain value the program cannot make compare
equal to anything. The judge writes one verdict line per test on a pipe the child does
not hold, so nothing the program prints, exits with or patches decides its grade.

The judge is forked by the judge host (:func:`host`, stand-alone, stdlib only), which
receives the tests from the caller directly: the worker that forks the sandboxed child
never reads them, so no child can find them in its memory. The judge is
made non-dumpable (a program running under the same uid cannot read or write its memory
or file descriptors), kept within the job's memory limit and the job's wall clock (the
worker kills it), and reseeds ``random`` from the OS: a test's ``random.seed(42)`` or
``random.randint`` touches only the judge's own copy, never the trainer's state.

Lines the child writes to the judge (fd 4 in the child): first ``{"ready": true}`` or
``{"load_error": message}``; then per request ``{"ok": value}``, ``{"iter": [items]}`` (an
iterator it returned, drained), ``{"handle": n, "type": name}`` (an object that is not plain
data, kept in the child: :class:`_Remote`), ``{"method": true}`` (an attribute to call) or
``{"error": message, "type": name}``, with ``"args"``/``"kwargs"`` (encoded after the call)
when the call changed a list, dict or set it was given, which the judge writes back into its
own object. Requests name a function (``fn``), a name the test reads as a value
(``global``), or a method, attribute or operation of an object by its handle (``obj`` with
``fn``, ``attr`` or ``op``).

A test that cannot run this way (it reads an attribute of the program's function, passes
a value that is not plain data, needs a generator function's items, or compares two of the
program's objects) is ``unverifiable``; :func:`unverifiable_reason` finds the static cases
when a task loads.
"""

import ast
import builtins
import fcntl
import json
import os
import resource
import sys
import traceback

#: Verdict messages and call descriptions are cut to this many characters.
MESSAGE_CAP = 500
#: Longest reply line the judge reads from the program (a longer one is a failed call).
MAX_REPLY_BYTES = 1 << 26
_PR_SET_DUMPABLE = 4


class Unverifiable(BaseException):
    """The test uses the program in a way that cannot cross the sandbox boundary (the test's doing)."""


class ProgramFault(BaseException):
    """The program answered a call with something unreadable, or its process ended.

    A ``BaseException``: a test's ``except Exception`` must not turn it into a pass.
    """


class _Channel:
    """The judge's end of the call pipe to the sandboxed program."""

    def __init__(self, request_fd, reply_fd, codec, workspace=None):
        self.request_fd, self.reply_fd, self.codec = request_fd, reply_fd, codec
        self.workspace = workspace  # the job's shared working dir, if any: each call then tells the program the test's
        self.buffer = bytearray()
        self.scanned = 0  # bytes of the buffer known to hold no newline (each byte is searched once)
        self.ended = False
        self.faults = 0  # ProgramFault / Unverifiable raised, counted even when a test swallows them
        self.unverifiable = None
        self.last_call = ""
        self.capture = None  # a test's capsys stand-in: the program's calls then send what they print

    def read(self):
        """The next line from the program as a dict; ``None`` at EOF; ``{}`` when unreadable."""
        while True:
            end = self.buffer.find(b"\n", self.scanned)
            if end >= 0:
                line = bytes(self.buffer[:end])
                del self.buffer[: end + 1]
                self.scanned = 0
                try:
                    message = json.loads(line)
                except Exception:  # noqa: BLE001 - the program wrote it: anything is possible
                    return {}
                return message if type(message) is dict else {}
            self.scanned = len(self.buffer)
            if len(self.buffer) > MAX_REPLY_BYTES:
                self.buffer.clear()
                self.ended = True  # the rest of this line cannot be read: treat the program as gone
                return None
            try:
                chunk = os.read(self.reply_fd, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                self.ended = True
                return None
            self.buffer += chunk

    def call(self, name, args, kwargs, target=None):
        """``name(*args, **kwargs)`` run by the program (a method of the object whose handle is
        ``target``, where given); its decoded return value, or a :class:`_Remote` for an object."""
        if self.ended:
            self.faults += 1
            raise ProgramFault("the program's process has ended")
        if any(type(value) is _Method for value in (*args, *kwargs.values())):
            # the test read an attribute of the program's object as data and got a method: the program's doing
            self.faults += 1
            raise ProgramFault(f"the test passes {name}() an attribute of the program's object, which is a method, not a value")
        try:
            request = {"fn": name, "args": [], "kwargs": {}}
            if self.workspace:  # the program works where the test does now (a test may chdir into a dir it made)
                request["cwd"] = os.getcwd()
            if target is not None:
                request["obj"] = target
            if self.capture is not None:
                request["capture"] = True
            for position, value in enumerate(args):
                if type(value) is _Remote:  # the program's own object goes back by its handle
                    request.setdefault("handles", {})[str(position)] = object.__getattribute__(value, "_handle")
                    value = None
                request["args"].append(self.codec.encode_value(value))
            for key, value in kwargs.items():
                if type(value) is _Remote:
                    request.setdefault("kw_handles", {})[str(key)] = object.__getattribute__(value, "_handle")
                else:
                    request["kwargs"][str(key)] = self.codec.encode_value(value)
            line = (json.dumps(request) + "\n").encode()
        except Exception as err:  # noqa: BLE001 - the test's own value: it cannot be sent
            self.unverifiable = f"the test passes {name}() a value that is not plain data ({_describe(err)})"
            raise Unverifiable(self.unverifiable) from None
        shown = f"{name}({', '.join([*map(_short_repr, args), *(f'{k}={_short_repr(v)}' for k, v in kwargs.items())])})"
        self.last_call = f"{shown[:MESSAGE_CAP // 2]} did not answer"
        reply = self._ask(line)
        if self.capture is not None:
            self.capture.add(reply.get("stdout"), reply.get("stderr"))
        self._write_back(reply, args, kwargs)
        return self._value_of(reply, shown, "returned")

    def _ask(self, line):
        """Send one request line; the program's reply (a ProgramFault when its process has gone,
        before or during the request)."""
        if not self.ended:
            try:
                _write_all(self.request_fd, line)
            except OSError:
                self.ended = True
        reply = None if self.ended else self.read()
        if reply is None:
            self.faults += 1
            raise ProgramFault("the program's process ended during the call")
        return reply

    def _remote(self, reply, shown):
        """The object a call or attribute gave, left in the sandbox: a stand-in holding its handle."""
        handle, kind = reply.get("handle"), reply.get("type")
        if type(handle) is not int or handle < 0:
            self.faults += 1
            raise ProgramFault(f"{shown[:MESSAGE_CAP // 2]} answered an unreadable object")
        kind = kind if type(kind) is str and kind.isidentifier() else "object"
        self.last_call = f"{shown[:MESSAGE_CAP // 2]} returned a {kind} object"
        return _Remote(handle, kind, self)

    def operate(self, handle, operation, kind, *args):
        """``len(obj)``, ``obj[key]``... answered by the program's object in the sandbox."""
        shown = f"{operation}(<{kind}>{''.join(', ' + _short_repr(a) for a in args)})"
        if any(type(a) is _Method for a in args):  # as in :meth:`call`: the program made an attribute a method
            self.faults += 1
            raise ProgramFault(f"the test gives a {kind} object an attribute of the program's object, which is a method, not a value")
        try:
            line = (json.dumps({"obj": handle, "op": operation, "args": [self.codec.encode_value(a) for a in args]}) + "\n").encode()
        except Exception as err:  # noqa: BLE001
            self.unverifiable = f"the test passes a {kind} object a value that is not plain data ({_describe(err)})"
            raise Unverifiable(self.unverifiable) from None
        self.last_call = f"{shown[:MESSAGE_CAP // 2]} did not answer"
        return self._value_of(self._ask(line), shown)

    def _value_of(self, reply, shown, verb="is"):
        """A reply to a call, attribute or operation: a plain value, an iterator, an object, or the exception raised."""
        if "handle" in reply:
            return self._remote(reply, shown)
        if "ok" in reply or "iter" in reply:
            try:
                value = self.codec.decode_value(reply["ok"]) if "ok" in reply else iter(_as_list(self.codec.decode_value(reply["iter"])))
            except Exception:  # noqa: BLE001
                self.faults += 1
                self.last_call = f"{shown[:MESSAGE_CAP // 2]} {verb} a value that could not be read"
                raise ProgramFault(self.last_call) from None
            self.last_call = f"{shown[:MESSAGE_CAP // 2]} {verb} {_short_repr(value)}"
            return value
        message = str(reply.get("error", "an unreadable reply"))[:MESSAGE_CAP]
        self.last_call = f"{shown[:MESSAGE_CAP // 2]} raised {message}"
        raise _as_exception(reply.get("type"), message, self)

    def global_value(self, name):
        """What the test finds under a name of the program it reads as a value: the plain value
        (a constant), a handle (an object), a stand-in to call (a function or class), or
        :data:`_UNDEFINED` when the program has no such name."""
        if self.ended:
            return _Program(name, self)
        reply = self._ask((json.dumps({"global": name}) + "\n").encode())
        if reply.get("type") == "NameError":
            return _UNDEFINED
        if reply.get("method") is True or "error" in reply:
            return _Program(name, self)
        return self._value_of(reply, name)

    def attribute(self, handle, name, kind):
        """``obj.name`` of the program's object: a plain value, another object, or a method to call."""
        shown = f"<{kind}>.{name}"
        self.last_call = f"{shown[:MESSAGE_CAP // 2]} did not answer"
        reply = self._ask((json.dumps({"obj": handle, "attr": str(name)}) + "\n").encode())
        if reply.get("method") is True:
            return _Method(handle, str(name), kind, self)
        return self._value_of(reply, shown)

    def _write_back(self, reply, args, kwargs):
        """Apply the program's in-place changes of list, dict and set arguments to the test's objects."""
        changed = [*zip(args, reply.get("args") or ()), *((kwargs[k], v) for k, v in _items(reply.get("kwargs")) if k in kwargs)]
        for original, encoded in changed:
            kind = type(original)
            if kind not in (list, dict, set):
                continue
            try:
                value = self.codec.decode_value(encoded)
            except Exception:  # noqa: BLE001
                continue
            if type(value) is not kind:
                continue
            if kind is list:
                original[:] = value
            else:
                original.clear()
                original.update(value)


class _Captured(tuple):
    """``(out, err)`` as pytest's ``readouterr()`` gives it, by name too."""

    out = property(lambda self: self[0])
    err = property(lambda self: self[1])


class Capture:
    """The stand-in for pytest's ``capsys`` / ``capfd`` a test asks for: what the program's calls
    printed since the last :meth:`readouterr` (caught in the child around each call)."""

    def __init__(self, channel):
        self.out, self.err = [], []
        channel.capture = self

    def add(self, out, err):
        self.out.append(out if type(out) is str else "")
        self.err.append(err if type(err) is str else "")

    def readouterr(self):
        result = _Captured(("".join(self.out), "".join(self.err)))
        self.out.clear()
        self.err.clear()
        return result


#: The name under which a generated test builds its ``capsys`` (bound by the judge; never the program's).
CAPTURE_FACTORY = "__mathgym_capture__"
#: The names generated test sources call for pytest's ``tmp_path`` / ``tmpdir``: a fresh dir of the
#: judge's working dir, which is the program's too (the job's shared dir), as a Path / LocalPath.
TMP_PATH_FACTORY, TMPDIR_FACTORY = "__mathgym_tmp_path__", "__mathgym_tmpdir__"


def _fresh_dir():
    import tempfile  # noqa: PLC0415 - the judge imports what a test needs, when it needs it

    return tempfile.mkdtemp(prefix="pytest-")


def _tmp_path():
    import pathlib  # noqa: PLC0415

    return pathlib.Path(_fresh_dir())


def _tmpdir():
    from _pytest._py.path import LocalPath  # noqa: PLC0415 - pytest's own ``tmpdir`` type (the caller checks it imports)

    return LocalPath(_fresh_dir())
#: The name under which a generated test runs a pytest or unittest test with its set-up
#: (:func:`run_as_pytest`, bound by the judge; never the program's).
RUNNER = "_mathgym_test"


def run_as_pytest(owner, test, arguments, fixtures, class_fixtures=(), named=None, class_named=None):
    """Run one test as pytest would, in pytest's order: a class's ``setUpClass`` / ``setup_class``,
    the file's autouse ``fixtures``, ``setup_method``, the class's autouse fixtures
    (``class_fixtures``, by name), ``setUp``, the test with ``arguments``; then the tear-downs
    and cleanups in reverse (a generator fixture resumed after its ``yield``). ``owner`` is the
    test's class, or ``None`` for a test function (``test`` is then the function, else its
    name). A parameter of the test or of a fixture that ``arguments`` does not give is the
    fixture of that name in ``named`` (the file's fixture functions, and the judge's stand-ins for
    pytest's own) or ``class_named`` (the test class's fixture methods, by method name), made once
    per test, after the fixtures it asks for itself.
    Generated test sources call it (:data:`RUNNER`); it runs in the judge, with the test.
    """
    import inspect  # noqa: PLC0415 - the judge imports what a test needs, when it needs it
    import unittest  # noqa: PLC0415

    named, made = named or {}, {}

    def optional(function, value):
        return function(value) if inspect.signature(function).parameters else function()

    def asked(function, chain=()):
        """The fixtures ``function``'s parameters name, made (those ``arguments`` give, and defaulted ones, left out)."""
        wanted = [p.name for p in inspect.signature(function).parameters.values()
                  if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in arguments]
        return {name: fixture(name, chain) for name in wanted}

    def fixture(name, chain):
        if name not in made:
            if name in chain or name not in named:
                raise LookupError(f"the fixture {name!r} is {'asked for in a loop' if name in chain else 'not defined'}")
            made[name] = start(named[name], (*chain, name))
        return made[name]

    def start(function, chain=()):
        result = function(**asked(function, chain))
        if inspect.isgenerator(result):
            value = next(result)
            finishers.append(lambda: next(result, None))
            return value
        return result

    unit = owner is not None and issubclass(owner, unittest.TestCase)
    finishers = []
    if unit:
        owner.setUpClass()
    elif owner is not None and hasattr(owner, "setup_class"):
        optional(owner.setup_class, owner)
    try:
        for fixture in fixtures:
            start(fixture)
        if owner is None:
            test(**arguments, **asked(test))
            return
        case = owner(test) if unit else owner()
        named = {**named, **{name: getattr(case, method) for name, method in (class_named or {}).items()}}
        method = getattr(case, test)
        if not unit and hasattr(case, "setup_method"):
            optional(case.setup_method, method)
        for name in class_fixtures:
            start(getattr(case, name))
        if unit:
            case.setUp()
        try:
            method(**arguments, **asked(method))
        finally:
            if unit:
                case.tearDown()
                case.doCleanups()
            elif hasattr(case, "teardown_method"):
                optional(case.teardown_method, method)
    finally:
        for finish in reversed(finishers):
            finish()
        if unit:
            owner.tearDownClass()
            owner.doClassCleanups()
        elif owner is not None and hasattr(owner, "teardown_class"):
            optional(owner.teardown_class, owner)


def _as_list(value):
    if type(value) is not list:
        raise ValueError("an iterator's items must come as a list")
    return value


def _items(data):
    return data.items() if type(data) is dict else ()


def _as_exception(type_name, message, channel):
    """The program's exception as the test sees it: the same built-in type, or a ProgramFault."""
    kind = getattr(builtins, type_name, None) if type(type_name) is str else None
    if isinstance(kind, type) and issubclass(kind, Exception):
        try:
            return kind(message)
        except Exception:  # noqa: BLE001 - a type that needs other arguments
            return RuntimeError(message)
    channel.faults += 1
    return ProgramFault(message)


class _Program:
    """Stands for a function of the sandboxed program: calling it runs the call there."""

    __slots__ = ("_name", "_channel")

    def __init__(self, name, channel):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_channel", channel)

    def __call__(self, *args, **kwargs):
        return self._channel.call(self._name, args, kwargs)

    def __getattr__(self, attr):
        self._channel.unverifiable = f"the test reads {self._name}.{attr}, which stays in the sandbox"
        raise Unverifiable(self._channel.unverifiable)

    def __repr__(self):
        return f"<function {self._name} of the program>"

    def _as_value(self, *_):
        """A function or class of the program tested for truth or compared with another of the program's
        names: a stand-in would be always true and equal only to itself, a verdict the program never
        earned. (A constant the test reads is its value, fetched when the test starts:
        :meth:`_Channel.global_value`.)"""
        self._channel.unverifiable = f"the test uses {self._name} as a value, not a call: it stays in the sandbox"
        raise Unverifiable(self._channel.unverifiable)

    def __eq__(self, other):
        """Compared with a plain value (``LIMIT == 3``), a function or class is unequal, as in Python: the
        program that made a name the test reads as a value a function fails that test (never unverifiable,
        which would let it take a wrong answer out of training)."""
        if type(other) in _STAND_INS:
            return self._as_value()
        return False

    def __ne__(self, other):
        return not self.__eq__(other)

    __bool__ = _as_value
    __hash__ = object.__hash__


class _Remote:
    """Stands for an object of the sandboxed program (an instance a call returned): its methods
    and attributes are read, set and called there, and ``len``, ``bool``, ``str``, iteration and
    indexing are answered there, by the object, as a method's result is (``in`` searches its
    items). It is never compared or computed with here: its own ``__eq__`` would make it equal
    whatever the test expects."""

    __slots__ = ("_handle", "_kind", "_channel")

    def __init__(self, handle, kind, channel):
        object.__setattr__(self, "_handle", handle)
        object.__setattr__(self, "_kind", kind)
        object.__setattr__(self, "_channel", channel)

    def __getattr__(self, attr):
        if attr in _Remote.__slots__:  # not set yet (a copy made without __init__)
            raise AttributeError(attr)
        return self._channel.attribute(self._handle, attr, self._kind)

    def __call__(self, *args, **kwargs):
        return self._channel.call("__call__", args, kwargs, target=self._handle)

    def __repr__(self):
        return f"<{self._kind} object of the program>"

    def _operation(name):  # noqa: N805 - builds the methods below
        def operate(self, *args):
            return self._channel.operate(self._handle, name, self._kind, *args)
        return operate

    __len__, __bool__, __str__, __iter__ = map(_operation, ("len", "bool", "str", "iter"))

    def __contains__(self, item):
        """``item in obj``: the object's items, drained in the child, searched here. Its own
        ``__contains__`` is not asked: it sees the test's value (like ``__eq__``), and an
        always-true one would pass every membership test."""
        try:
            items = list(self._channel.operate(self._handle, "iter", self._kind))
        except TypeError:
            # The program returned an object that cannot be searched: the data set's own harness fails
            # the test too (``in`` raises TypeError). Never unverifiable: that would let the program take
            # a wrong answer out of training by returning such an object.
            self._channel.faults += 1
            raise ProgramFault(f"the program gave a {self._kind} object that cannot be iterated where the test searches it with 'in' "
                               "(its own __contains__ is never asked)") from None
        return item in items

    __getitem__, __setitem__, __delitem__ = map(_operation, ("getitem", "setitem", "delitem"))

    def _compared(self, other=None, *_):
        """Compared or computed with: the test's doing when it compares two of the program's objects
        (unverifiable); else the program returned an object where the test wanted a value, and
        fails, as a value that cannot leave the sandbox always has (never unverifiable: that
        would let a program take a wrong answer out of training)."""
        if type(other) is _Remote:
            self._channel.unverifiable = f"the test compares two objects of the program ({self._kind}): they stay in the sandbox"
            raise Unverifiable(self._channel.unverifiable)
        self._channel.faults += 1
        raise ProgramFault(f"the program gave a {self._kind} object where the test compares or computes with a value; only plain data leaves the sandbox")

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __format__ = _compared
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __int__ = __float__ = __index__ = _compared
    __setattr__, __delattr__ = map(_operation, ("setattr", "delattr"))
    __hash__ = object.__hash__
    del _operation


class _Method:
    """A method of the program's object (:class:`_Remote`), called there."""

    __slots__ = ("_handle", "_name", "_kind", "_channel")

    def __init__(self, handle, name, kind, channel):
        for slot, value in zip(self.__slots__, (handle, name, kind, channel)):
            object.__setattr__(self, slot, value)

    def __call__(self, *args, **kwargs):
        return self._channel.call(self._name, args, kwargs, target=self._handle)

    def __repr__(self):
        return f"<method {self._name} of a {self._kind} object of the program>"

    def _as_value(self, *_):
        """The test read an attribute of the program's object and uses it as a value (compares it, tests its
        truth), where the program's object gave a method: the program's failure, as a value that cannot
        leave the sandbox always is (never unverifiable: the program chose what its attribute is)."""
        self._channel.faults += 1
        raise ProgramFault(f"the test uses {self._kind}.{self._name} as a value, and the program's object gave a method")

    __eq__ = __ne__ = __bool__ = _as_value
    __hash__ = object.__hash__


#: The judge's stand-ins for the program's functions, objects and methods (set below their classes).
_STAND_INS = (_Program, _Remote, _Method)


def _short_repr(value):
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 200 else text[:197] + "..."


def _describe(err):
    try:
        return f"{type(err).__name__}: {err}"[:MESSAGE_CAP]
    except BaseException:  # noqa: BLE001
        return type(err).__name__


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def free_names(tree):
    """Names a test reads that it never binds and that are not built-ins (the program's, or the support's)."""
    read, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return {name for name in read - bound if not hasattr(builtins, name)}


#: A name the program does not define (:meth:`_Channel.global_value`).
_UNDEFINED = object()


def value_names(tree):
    """Names a test reads other than as the function of a call (``LIMIT == 3``, ``check(add)``)."""
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and id(node) not in called}


def _skipped(error):
    """Whether a test skipped itself (``self.skipTest``, ``pytest.skip``): under pytest it does not
    fail, so here it passes. The program cannot raise these here: its exceptions arrive as built-in
    types or :class:`ProgramFault`. (``unittest`` is not imported here: the worker forks from this
    module's importer, and a skip of unittest's or pytest's exists only once a test imported it.)"""
    unit, pytest = sys.modules.get("unittest"), sys.modules.get("pytest")
    return (unit is not None and isinstance(error, unit.SkipTest)) or (pytest is not None and isinstance(error, pytest.skip.Exception))


def run_test(source, test_name, base, channel):
    """Run one test's ``source``; its verdict as a dict (``status``: correct, wrong, unverifiable)."""
    faults, channel.unverifiable, channel.last_call = channel.faults, None, ""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:  # the test's fault, never the program's
        return {"name": test_name, "status": "unverifiable", "passed": False, "message": f"the test does not parse: {_describe(err)}"}
    channel.capture = None
    try:
        namespace = {**base, CAPTURE_FACTORY: lambda: Capture(channel), RUNNER: run_as_pytest, TMP_PATH_FACTORY: _tmp_path,
                     TMPDIR_FACTORY: _tmpdir}
        read_as_values = value_names(tree)
        for name in free_names(tree) - namespace.keys():
            value = channel.global_value(name) if name in read_as_values else _Program(name, channel)
            if value is not _UNDEFINED:  # a name the program lacks stays unbound: reading it is a NameError
                namespace[name] = value
        exec(compile(tree, f"test_{test_name}", "exec"), namespace)  # noqa: S102 - the task's test, not the program
        passed, message = True, ""
    except BaseException as err:  # noqa: BLE001 - SystemExit in a test is a failure too
        passed = _skipped(err)
        message = "" if passed else "".join(traceback.format_exception_only(type(err), err)).strip()[-MESSAGE_CAP:] or type(err).__name__
    if channel.unverifiable is not None:
        return {"name": test_name, "status": "unverifiable", "passed": False, "message": channel.unverifiable[:MESSAGE_CAP]}
    if channel.faults != faults:  # the program failed a call: a test that swallowed that does not pass
        passed = False
        message = message or "the program failed a call (its exception was caught by the test)"
    verdict = {"name": test_name, "status": "correct" if passed else "wrong", "passed": passed, "message": message, "call": "" if passed else channel.last_call}
    if channel.ended and not passed:
        verdict["ended"] = True
    return verdict


def host(side_fd, sock, codec, containment):
    """The judge host: receives every job's tests and forks one judge per job. Never returns.

    Forked by the warm worker once, before the worker reads any job, and detached from it
    (not its child: the worker's sweep after each job leaves it alone). The tests come
    straight from the caller on ``side_fd`` (one JSON line per job: ``id``, ``tests``,
    ``support``, ``limits``), so neither the worker nor any sandboxed child it forks
    ever holds them. Per job, the worker sends on ``sock`` (a Unix socket) the job's id
    with the judge's three pipe ends (calls out, replies in, verdicts out); this process
    forks the judge on them and answers its pid (``0`` when the fork failed). It never
    forks untrusted code, is non-dumpable, and exits when the caller or the worker is gone.
    """
    import random  # noqa: PLC0415, F401 - here, not in the worker (whose every fork would reseed it): the judges inherit it
    import select  # noqa: PLC0415 - only the host needs them
    import socket  # noqa: PLC0415

    code = 0
    try:
        import ctypes  # noqa: PLC0415

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        pending, buffer, judges = {}, bytearray(), []

        def take_side():
            """Read what the caller sent; False at its end."""
            chunk = os.read(side_fd, 1 << 20)
            if not chunk:
                return False
            buffer.extend(chunk)
            while (end := buffer.find(b"\n")) >= 0:
                job = json.loads(bytes(buffer[:end]))
                del buffer[: end + 1]
                pending[job["id"]] = job
            return True

        while True:
            readable, _, _ = select.select([side_fd, sock], [], [])
            if side_fd in readable and not take_side():
                return
            if sock not in readable:
                continue
            message, fds, _, _ = socket.recv_fds(sock, 1024, 3)
            if not message:
                return
            for pid in judges:  # the worker is done with the previous job: its judge may go
                _end(pid)
            judges.clear()
            asked = json.loads(message)
            ident = asked["id"]
            while ident not in pending:
                if not take_side():
                    return
            for stale in list(pending)[: list(pending).index(ident)]:  # jobs the worker never ran
                del pending[stale]
            job = {**pending.pop(ident), "workspace": asked.get("workspace"), "uid": asked.get("uid")}
            pid = -1
            if len(fds) == 3:
                try:
                    pid = os.fork()
                except OSError:
                    pid = -1
            if pid == 0:
                try:
                    os.close(side_fd)
                    sock.close()
                finally:
                    judge(job, *fds, codec, containment)
            for fd in fds:
                os.close(fd)
            if pid > 0:
                judges.append(pid)
            sock.send(str(max(pid, 0)).encode())
    except BaseException:  # noqa: BLE001 - the worker sees the socket close and reports it
        code = 70
    finally:
        os._exit(code)


def _end(pid):
    import signal  # noqa: PLC0415

    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        os.waitpid(pid, 0)
    except OSError:
        pass


def judge(job, request_fd, reply_fd, verdict_fd, codec, containment):
    """The judge process (forked by :func:`host`): never returns.

    ``codec`` and ``containment`` are the worker's copies of those stand-alone modules (loaded by path).
    """
    code = 70
    try:
        os.setsid()
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 16) for fd in (request_fd, reply_fd, verdict_fd)]  # out of the way first
        for target, fd in enumerate(high, start=3):
            os.dup2(fd, target)
        os.closerange(6, 1 << 16)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        import ctypes  # noqa: PLC0415 - only the judge needs it

        _enter_workspace(job.get("workspace"), job.get("uid"), containment)
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)  # again after a change of uid
        memory = max(job["limits"]["memory_mb"], 1024) << 20
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        sys.modules["random"].seed()  # from os.urandom: a fresh stream per job, not the host's state (imported in host())
        sys.setrecursionlimit(1000)
        code = _judge_tests(job, _Channel(3, 4, codec, job.get("workspace")))
    except BaseException:  # noqa: BLE001 - missing verdicts are reported by the caller
        code = 70
    finally:
        os._exit(code)


def _enter_workspace(workspace, uid, containment):
    """Work in the job's shared dir (the program's working dir too): the test's files, relative or
    made through ``tempfile``, are where the program looks for them. As the job's ``uid`` (the
    worker runs as root): the files a test makes are then the program's to change or remove."""
    if not workspace:
        return
    import tempfile  # noqa: PLC0415 - random, which it imports, is the host's already

    os.chdir(workspace)
    os.environ["TMPDIR"] = os.environ["HOME"] = workspace
    tempfile.tempdir = workspace
    if uid is not None:
        containment.drop_privileges(uid)  # the sandboxed child's own drop


def _judge_tests(job, channel):
    def report(verdict):
        _write_all(5, (json.dumps(verdict) + "\n").encode())

    first = channel.read()
    if first is None or "ready" not in first:
        reason = f"the program raised {str(first.get('load_error'))[:MESSAGE_CAP]}" if first and "load_error" in first else "the program's process ended before its functions could be called"
        for test in job["tests"]:
            report({"name": test["name"], "status": "wrong", "passed": False, "message": reason, "ended": first is None})
        return 0
    base = {"__name__": "__test__", "__builtins__": builtins}
    try:
        exec(compile(job.get("support") or "", "task_support", "exec"), base)  # noqa: S102 - the task's own helpers
    except BaseException as err:  # noqa: BLE001 - the task's fault, never the program's
        for test in job["tests"]:
            report({"name": test["name"], "status": "unverifiable", "passed": False, "message": f"the task's own code raised {_describe(err)}"})
        return 0
    for test in job["tests"]:
        report(run_test(test["source"], test["name"], base, channel))
    return 0


def unverifiable_reason(tests, reference="", support=""):
    """Why tests cannot be judged with the program behind the sandbox boundary; ``None`` when they can.

    Static (:mod:`ast` only, nothing runs): a test reads an attribute of a name the program
    provides (``candidate.__name__``), or calls a generator function of the reference
    solution (a class's instances are used through handles, :class:`_Remote`).
    Run time finds the rest (a test passing a non-plain value reports ``unverifiable``).

    Args:
        tests: The tests' sources.
        reference: The task's reference solution (to find which names are classes or generators).
        support: Trusted code run before the tests (its names are the test's own).
    """
    try:
        reference_tree = ast.parse(reference or "")
        support_names = module_names(ast.parse(support or ""))
    except (SyntaxError, ValueError):
        reference_tree, support_names = ast.parse(""), set()
    # A class's instances stay in the sandbox and are used through handles (:class:`_Remote`).
    not_plain = {node.name: "a generator" for node in reference_tree.body if isinstance(node, ast.FunctionDef) and _yields(node)}
    defined = {node.name for node in reference_tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    for source in tests:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError) as err:
            return f"a test does not parse ({type(err).__name__})"
        program = free_names(tree) - support_names
        program |= _aliases(tree, program)
        # names the test calls, or the reference defines with def or class, are functions (or
        # classes): their attributes stay in the sandbox; a constant's or an object's are read
        # through its value or handle
        called = {node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
        called |= defined
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in program & called:
                return f"a test reads {node.value.id}.{node.attr}, an attribute of the program's function"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in program and node.func.id in not_plain:
                return f"a test calls {node.func.id}, {not_plain[node.func.id]} in the reference solution: what it returns cannot leave the sandbox"
    return None


def module_names(tree):
    """Top-level names a module binds (the trusted support code's definitions and imports)."""
    bound = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return bound


def _aliases(tree, program):
    """Names bound to the program's functions: ``candidate = f`` and ``check(f)``'s parameter."""
    functions = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in program:
            aliases.update(t.id for t in node.targets if isinstance(t, ast.Name))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions:
            params = functions[node.func.id].args.args
            for param, arg in zip(params, node.args):
                if isinstance(arg, ast.Name) and arg.id in program:
                    aliases.add(param.arg)
    return aliases


def _yields(function):
    """Whether ``function``'s own body (not a nested def) holds ``yield``."""
    stack = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return False
