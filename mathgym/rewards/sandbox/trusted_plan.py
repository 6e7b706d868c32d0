"""Assert tests turned into function calls and comparisons made outside the sandbox.

``assert candidate([1, 2]) == 3`` becomes a *call* (the code's function on the input
``([1, 2],)``), which the sandboxed child runs and answers with the returned value
encoded as plain data, and a *check* (``<output> == 3``), which this trusted process
evaluates on the decoded value. The child never receives a test's source or an expected
value, so it has nothing to read, patch or forge: its only way to pass is to return the
right values. Shapes handled (found by :mod:`ast`; nothing of the program runs to find them):

* ``assert f(args) == expected`` (either side, any comparison, ``is None/True/False``),
  ``assert f(x)``, ``assert not f(x)``, ``abs(f(x) - y) < 1e-6``, ``math.isclose(...)``,
  ``set(f(x)) == {...}``, ``f(x)[0] == y``: comparisons and a few pure builtins
  (:data:`SAFE_FUNCTIONS`) over the outputs and literal values;
* HumanEval's ``def check(candidate): assert ...`` followed by ``check(entry_point)``,
  names bound to literal values (``METADATA = {...}``), ``candidate = entry_point``,
  ``import math``, a bare ``print``, and ``for x in <literals or pure builtins>:`` loops
  (unrolled, at most :data:`MAX_UNROLLED` passes);
* comprehensions of values the test computes itself (``sum([i**2 for i in lst if i > 0])``),
  no output or call of the code's function inside, at most :data:`MAX_COMPREHENDED` passes.

Anything else (other loops, comprehensions over outputs, helpers, method calls on outputs,
inputs that are not plain values) makes :func:`plan_tests` return ``None`` and a reason: those tests run
in the trusted judge instead (``details["verdict"] == "trusted-tests"``, see
:mod:`mathgym.rewards.sandbox.trusted_judge`).


The outputs are the program's to choose, so reading and checking them is bounded:
:func:`~mathgym.rewards.sandbox.codec.decode_value` caps sizes and refuses sets and dicts
whose keys flood one hash, the builtins a check calls that build sets or dicts check
their keys the same way, a power, product or division too large to compute is refused,
and messages show outputs with :func:`~mathgym.untrusted.safe_repr` and
:func:`~mathgym.untrusted.clean_text`. Checking stays linear (n log n) in the outputs' size.
"""

from __future__ import annotations

import ast
import builtins
import functools
import itertools
import json
import math
import operator
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mathgym.rewards.sandbox.codec import WRAPPER_NAMES, check_hash_spread, decode_value, encode_value
from mathgym.untrusted import clean_text, safe_repr

#: Builtins that, wrapped around a call of the code's function, the child applies itself, so
#: ``list(f(x))`` works when ``f`` returns a generator (its result is then a plain value).
WRAPPERS = frozenset(WRAPPER_NAMES)
MATH_NAMES = frozenset("isclose fabs sqrt floor ceil isnan isinf isfinite log exp pi e inf nan".split())
_MAX_BUILT = 10**7  # longest sequence a check may build with ``*``
_MAX_POWER_BITS = 1 << 22  # largest int a check may build with ``**`` (a few ms to compute)
_MAX_DIVISION_STEPS = 1 << 24  # (digits of the divisor) x (digits of the quotient), schoolbook division
_SINGLETONS = (None, True, False)
#: Most passes of a test's ``for`` loop that is unrolled into calls (a longer loop goes to the judge).
MAX_UNROLLED = 1000

_UNARY = {ast.Not: operator.not_, ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}
_BINARY = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
}
_COMPARE = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_, ast.IsNot: operator.is_not,
}


def _hashed(items: Any) -> Any:
    """``items`` ready to become set elements or dict keys: a list whose hashes are spread (checked)."""
    if type(items) in (set, frozenset, dict):
        return items  # decoded (checked) or built by the test
    items = list(items)
    check_hash_spread(items)
    return items


def _set(*args: Any) -> set[Any]:
    return set(*map(_hashed, args))


def _frozenset(*args: Any) -> frozenset[Any]:
    return frozenset(*map(_hashed, args))


def _dict(*args: Any, **kwargs: Any) -> dict[Any, Any]:
    if len(args) == 1 and type(args[0]) is not dict:
        pairs = [tuple(pair) for pair in args[0]]
        check_hash_spread([pair[0] for pair in pairs if len(pair) == 2])
        args = (pairs,)
    return dict(*args, **kwargs)


def _sum(items: Any, start: Any = 0) -> Any:
    """``sum``, linear also when it concatenates lists or tuples (``sum(xs, [])``)."""
    if type(start) not in (list, tuple):
        return sum(items, start)
    joined = list(start)
    for item in items:
        if type(item) is not type(start):
            raise TypeError(f'can only concatenate {type(start).__name__} (not "{type(item).__name__}") to {type(start).__name__}')
        joined.extend(item)
    return type(start)(joined)


def _bytes(*args: Any) -> bytes:
    if args and type(args[0]) is int and args[0] > _MAX_BUILT:
        raise MemoryError("the bytes are too long to build")
    return bytes(*args)


def _divmod(left: Any, right: Any) -> tuple[Any, Any]:
    _check_size(ast.FloorDiv(), left, right)
    return divmod(left, right)


#: Builtins a check may apply to outputs (pure, bounded by their input's size).
SAFE_FUNCTIONS: dict[str, Callable[..., Any]] = {
    name: getattr(builtins, name)
    for name in (
        "abs all any bool bytes complex dict divmod enumerate float frozenset int isinstance len list max min "
        "range repr reversed round set sorted str sum tuple type zip"
    ).split()
}
#: What a check's call of these builtins runs instead, to stay linear (n log n) in the
#: outputs' size: sets and dicts check their keys' hashes first, so a flood of colliding
#: keys from the program is refused rather than stalling this process (the names keep
#: their builtin value, for ``isinstance(x, set)``).
_BOUNDED_CALLS: dict[Callable[..., Any], Callable[..., Any]] = {
    set: _set, frozenset: _frozenset, dict: _dict, sum: _sum, bytes: _bytes, divmod: _divmod,
}


class NotConvertible(Exception):
    """The test has a shape this module does not compare outside the sandbox."""


class CallFailed(Exception):
    """The code's function raised (message from the child) or returned no readable value."""


class OutputMissing(Exception):
    """The child ended (killed, timed out, exited) before answering this call."""


@dataclass(frozen=True)
class Call:
    """One call the child makes: ``function(*args, **kwargs)``.

    Each input is ``{"value": encoded}`` (a literal, or computed here from names the test
    bound) or ``{"src": expression}`` (built from literals and pure builtins only; the child
    evaluates it before the code is loaded, as the test would have).
    """

    function: str
    args: tuple[dict[str, Any], ...]
    kwargs: dict[str, dict[str, Any]]
    wrap: str | None = None  # a builtin the child applies to the result: list(f(x)) of a generator

    def payload(self) -> dict[str, Any]:
        """The call as the worker receives it."""
        return {"function": self.function, "args": list(self.args), "kwargs": self.kwargs, "wrap": self.wrap}


@dataclass(frozen=True)
class Check:
    """One ``assert``: its expression, its message, the names it may read and its calls."""

    test: ast.expr
    message: str
    env: dict[str, Any]
    calls: dict[int, int]  # id(ast.Call) -> index into TestPlan.calls


@dataclass
class TestPlan:
    """The calls to run in the sandbox and, per test, the checks to evaluate here."""

    __test__ = False

    calls: list[Call] = field(default_factory=list)
    tests: list[tuple[str, list[Check]]] = field(default_factory=list)
    payload: list[dict[str, Any]] = field(default_factory=list)  # the calls as the worker receives them


def plan_tests(tests: Sequence[tuple[str, str]]) -> tuple[TestPlan | None, str]:
    """Plan ``(name, source)`` assert tests; ``(None, reason)`` when one does not convert.

    Plans are cached (a batch scores many samples of one task); a plan is only read.
    """
    with _PLAN_LOCK:  # CPython 3.11's ast.parse is not safe to call from threads at once ("recursion depth mismatch")
        return _plan_cached(tuple((str(name), str(source)) for name, source in tests))


_PLAN_LOCK = threading.Lock()


@functools.lru_cache(maxsize=512)
def _plan_cached(tests: tuple[tuple[str, str], ...]) -> tuple[TestPlan | None, str]:
    plan = TestPlan()
    for name, source in tests:
        planner = _Planner(plan)
        try:
            planner.statements(ast.parse(source).body, depth=0)
        except NotConvertible as err:
            return None, f"test {name!r}: {err}"
        except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
            return None, f"test {name!r}: {type(err).__name__}"
        plan.tests.append((name, planner.checks))
    plan.payload = [call.payload() for call in plan.calls]
    return plan, ""


class _Planner:
    """Walks one test's statements, binding names and collecting calls and checks."""

    def __init__(self, plan: TestPlan):
        self.plan = plan
        self.env: dict[str, Any] = {}
        self.aliases: dict[str, str] = {}  # test name -> the code's function it stands for
        self.opaque: set[str] = set()
        self.functions: dict[str, ast.FunctionDef] = {}
        self.checks: list[Check] = []
        self.comprehending = False  # validating inside a comprehension

    def statements(self, body: Sequence[ast.stmt], depth: int) -> None:
        for node in body:
            self.statement(node, depth)

    def statement(self, node: ast.stmt, depth: int) -> None:
        if isinstance(node, ast.Pass) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound = (alias.asname or alias.name).split(".")[0]
                if isinstance(node, ast.Import) and alias.name == "math":
                    self.env[bound] = math
                else:
                    self.opaque.add(bound)
            return
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            self.assign(node.targets[0].id, node.value)
            return
        if isinstance(node, ast.FunctionDef) and depth == 0 and _one_parameter(node):
            self.functions[node.name] = node
            return
        if isinstance(node, ast.Expr) and depth == 0 and self.inline_check(node.value):
            return
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Name) and self.is_builtin(node.value.id):
            return  # a bare ``print``: reading a builtin has no effect
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and not node.orelse:
            for item in self.iteration(node.iter):  # unrolled: each pass binds the name, as the loop would
                self.assign_value(node.target.id, item)
                self.statements(node.body, depth)
            return
        if isinstance(node, ast.Assert):
            calls: dict[int, int] = {}
            self.validate(node.test, calls)
            message = node.msg.value if isinstance(node.msg, ast.Constant) and isinstance(node.msg.value, str) else ""
            self.checks.append(Check(node.test, message, dict(self.env), calls))
            return
        raise NotConvertible(f"line {node.lineno}: a {type(node).__name__} statement")

    def assign(self, target: str, value: ast.expr) -> None:
        for table in (self.env, self.aliases, self.functions):
            table.pop(target, None)
        self.opaque.discard(target)
        function = self.solution_function(value)
        if function is not None:
            self.aliases[target] = function
        else:
            self.env[target] = self.evaluate_now(value)

    def assign_value(self, target: str, value: Any) -> None:
        for table in (self.env, self.aliases, self.functions):
            table.pop(target, None)
        self.opaque.discard(target)
        self.env[target] = value

    def is_builtin(self, name: str) -> bool:
        """Whether ``name`` still means the builtin of that name in the test."""
        return hasattr(builtins, name) and not any(name in table for table in (self.env, self.aliases, self.opaque, self.functions))

    def iteration(self, node: ast.expr) -> list[Any]:
        """The items a ``for`` loop of the test runs over: literals and pure builtins only, at most :data:`MAX_UNROLLED`."""
        self.validate(node, None)
        try:
            items = list(itertools.islice(iter(evaluate(node, self.env, {}, {})), MAX_UNROLLED + 1))
        except Exception as err:  # noqa: BLE001 - as the loop would have raised it: left to the judge
            raise NotConvertible(f"line {node.lineno}: the loop's items raise {type(err).__name__}") from None
        if len(items) > MAX_UNROLLED:
            raise NotConvertible(f"line {node.lineno}: a loop of more than {MAX_UNROLLED} passes")
        return items

    def inline_check(self, node: ast.expr) -> bool:
        """``check(entry_point)``: run ``check``'s body with its parameter bound to the code's function."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in self.functions):
            return False
        function = self.functions[node.func.id]
        target = self.solution_function(node.args[0]) if len(node.args) == 1 and not node.keywords else None
        if target is None:
            raise NotConvertible(f"line {node.lineno}: {node.func.id}() is not called with the code's function")
        self.aliases[function.args.args[0].arg] = target
        self.statements(function.body, depth=1)
        return True

    def solution_function(self, node: ast.expr) -> str | None:
        """The code's function a name stands for: an alias, or a name the test leaves unbound."""
        if not isinstance(node, ast.Name):
            return None
        name = node.id
        if name in self.aliases:
            return self.aliases[name]
        if name in self.env or name in self.opaque or name in self.functions or hasattr(builtins, name):
            return None
        return name

    def evaluate_now(self, node: ast.expr) -> Any:
        """A value the test computes from literals alone (an input, a bound constant)."""
        self.validate(node, None)
        try:
            value = evaluate(node, self.env, {}, {})
            encode_value(value)
        except Exception as err:  # noqa: BLE001 - not a plain value, or raises: leave it to the child
            raise NotConvertible(f"line {node.lineno}: {ast.unparse(node)[:80]} is not a plain value ({type(err).__name__})") from None
        return value

    def input(self, node: ast.expr) -> dict[str, Any]:
        """An input of a call: its value when it is a literal or needs a name the test bound,
        else its source (the child evaluates it: ``range(3)``, ``float("inf")``, ``[[]] * 3``)."""
        self.validate(node, None)
        if _is_literal(node):  # the child decodes it, rather than compiling its source (a parse per input)
            try:
                return {"value": encode_value(ast.literal_eval(node))}
            except Exception:  # noqa: BLE001 - an unhashable key, too deep: the child evaluates it, as the test would
                pass
        names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        if names <= SAFE_FUNCTIONS.keys() and not names & self.env.keys() and not any(isinstance(n, ast.Attribute) for n in ast.walk(node)):
            return {"src": ast.unparse(node)}
        return {"value": encode_value(self.evaluate_now(node))}

    def validate(self, node: ast.expr, calls: dict[int, int] | None) -> bool:  # noqa: C901, PLR0911, PLR0912
        """Raise :class:`NotConvertible` unless ``node`` is supported; True when it reads an output.

        With ``calls`` (an assert's expression), calls of the code's functions are planned
        and recorded there; without it (an input), any such call is refused.
        """
        def sub(child: ast.AST | None) -> bool:
            return child is not None and self.validate(child, calls)  # type: ignore[arg-type]

        if isinstance(node, ast.Constant):
            return False
        if isinstance(node, ast.Name):
            if node.id in self.env or (node.id in SAFE_FUNCTIONS and self.solution_function(node) is None and node.id not in self.opaque):
                return False
            raise NotConvertible(f"line {node.lineno}: the name {node.id!r} is read as a value")
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return any([sub(element) for element in node.elts])
        if isinstance(node, ast.Dict) and all(key is not None for key in node.keys):
            return any([sub(part) for part in (*node.keys, *node.values)])
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return sub(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = sub(node.left), sub(node.right)
            if (isinstance(node.op, ast.Pow) and right) or (isinstance(node.op, ast.Mult) and left and right):
                raise NotConvertible(f"line {node.lineno}: an output in a power or a product of outputs")
            return left or right
        if isinstance(node, ast.BoolOp):
            return any([sub(value) for value in node.values])
        if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
            operands = [node.left, *node.comparators]
            for op, left, right in zip(node.ops, operands, operands[1:]):
                if isinstance(op, (ast.Is, ast.IsNot)) and not any(_is_singleton(side) for side in (left, right)):
                    raise NotConvertible(f"line {node.lineno}: 'is' with something other than None, True or False")
            return any([sub(operand) for operand in operands])
        if isinstance(node, ast.IfExp):
            return any([sub(node.test), sub(node.body), sub(node.orelse)])
        if isinstance(node, ast.Subscript):
            return any([sub(node.value), sub(node.slice)])
        if isinstance(node, ast.Slice):
            return any([sub(node.lower), sub(node.upper), sub(node.step)])
        if isinstance(node, ast.Attribute) and self.is_math(node):
            return False
        if isinstance(node, ast.Call):
            return self.validate_call(node, calls)
        if isinstance(node, _COMPREHENSIONS):
            self.validate_comprehension(node)
            return False
        raise NotConvertible(f"line {getattr(node, 'lineno', '?')}: a {type(node).__name__} expression")

    def validate_comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        """A comprehension of values the test computes itself: no call of the code's function and no
        output inside it (those stay the judge's), at most :data:`MAX_COMPREHENDED` passes in all,
        evaluated once here to know it ends; its names are bound in its own scope only."""
        for inner in ast.walk(node):
            if isinstance(inner, ast.Call) and self.solution_function(inner.func) is not None:
                raise NotConvertible(f"line {node.lineno}: a comprehension calling the code's function")
        saved, outermost = dict(self.env), not self.comprehending
        self.comprehending = True
        try:
            for generator in node.generators:
                if generator.is_async:
                    raise NotConvertible(f"line {node.lineno}: an async comprehension")
                self.validate(generator.iter, None)
                for name in _target_names(generator.target, node.lineno):
                    self.env[name] = None  # bound: the checks below read it as a value of the test
                for condition in generator.ifs:
                    self.validate(condition, None)
            for part in (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,):
                self.validate(part, None)
        finally:
            self.env.clear()
            self.env.update(saved)
            self.comprehending = not outermost
        if not outermost:
            return  # its names hold placeholders here: evaluated within the outermost one
        try:
            evaluate(node, self.env, {}, {})
        except Exception as err:  # noqa: BLE001 - too long, or raises: left to the judge, which runs it as written
            raise NotConvertible(f"line {node.lineno}: the comprehension raises {type(err).__name__}") from None

    def validate_call(self, node: ast.Call, calls: dict[int, int] | None) -> bool:
        if any(isinstance(arg, ast.Starred) for arg in node.args) or any(kw.arg is None for kw in node.keywords):
            raise NotConvertible(f"line {node.lineno}: a call with * or ** arguments")
        function = self.solution_function(node.func)
        if function is not None:
            return self.plan_call(node, node, function, None, calls)
        safe = isinstance(node.func, ast.Name) and node.func.id in SAFE_FUNCTIONS and node.func.id not in self.env
        inner = node.args[0] if len(node.args) == 1 and not node.keywords else None
        if safe and node.func.id in WRAPPERS and isinstance(inner, ast.Call):  # list(f(x)): the child applies list()
            function = self.solution_function(inner.func)
            if function is not None:
                return self.plan_call(node, inner, function, node.func.id, calls)
        safe = isinstance(node.func, ast.Name) and node.func.id in SAFE_FUNCTIONS and node.func.id not in self.env
        if not (safe or (isinstance(node.func, ast.Attribute) and self.is_math(node.func))):
            raise NotConvertible(f"line {node.lineno}: a call of {ast.unparse(node.func)[:40]}")
        reads = [self.validate(part, calls) for part in (*node.args, *(kw.value for kw in node.keywords))]
        if any(reads) and isinstance(node.func, ast.Name) and node.func.id == "range":
            raise NotConvertible(f"line {node.lineno}: range() over an output")
        return any(reads)

    def plan_call(self, node: ast.Call, call: ast.Call, function: str, wrap: str | None, calls: dict[int, int] | None) -> bool:
        """Record ``call`` (the code's ``function``; ``wrap`` applied to its result in the child) as ``node``'s output."""
        if calls is None:
            raise NotConvertible(f"line {node.lineno}: the code's function called inside another call's input")
        if any(isinstance(arg, ast.Starred) for arg in call.args) or any(kw.arg is None for kw in call.keywords):
            raise NotConvertible(f"line {node.lineno}: a call with * or ** arguments")
        args = tuple(self.input(arg) for arg in call.args)
        kwargs = {kw.arg: self.input(kw.value) for kw in call.keywords if kw.arg is not None}
        calls[id(node)] = len(self.plan.calls)
        self.plan.calls.append(Call(function, args, kwargs, wrap))
        return True

    def is_math(self, node: ast.Attribute) -> bool:
        if not (isinstance(node.value, ast.Name) and node.value.id == "math" and node.attr in MATH_NAMES):
            return False
        bound = self.env.get("math", math)
        return bound is math and "math" not in self.opaque and "math" not in self.aliases


def _is_literal(node: ast.expr) -> bool:
    """Whether ``node`` is a literal whose decoded value is the one its source builds.

    Constants, and lists, tuples and dicts of them (a signed number included): each
    element is its own object, as decoded. Not a set literal, whose iteration order could
    differ once rebuilt from a list, nor a complex written as ``1 + 2j``.
    """
    if isinstance(node, ast.Constant):
        return node.value is not Ellipsis
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float, complex)
    if isinstance(node, (ast.List, ast.Tuple)):
        return all(_is_literal(element) for element in node.elts)
    if isinstance(node, ast.Dict):
        return all(key is not None and _is_literal(key) and _is_literal(value) for key, value in zip(node.keys, node.values))
    return False


def _one_parameter(node: ast.FunctionDef) -> bool:
    args = node.args
    return len(args.args) == 1 and not (args.posonlyargs or args.kwonlyargs or args.vararg or args.kwarg or node.decorator_list)


def _is_singleton(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and any(node.value is value for value in _SINGLETONS)


def evaluate(node: ast.AST, env: dict[str, Any], calls: dict[int, int], outputs: dict[int, tuple[bool, Any]]) -> Any:  # noqa: C901, PLR0911
    """Evaluate a validated expression; a call of the code's function reads its output."""
    def ev(child: ast.AST | None) -> Any:
        return None if child is None else evaluate(child, env, calls, outputs)

    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.id] if node.id in env else SAFE_FUNCTIONS[node.id]
    if isinstance(node, ast.List):
        return [ev(e) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(ev(e) for e in node.elts)
    if isinstance(node, ast.Set):
        return {ev(e) for e in node.elts}
    if isinstance(node, ast.Dict):
        return {ev(k): ev(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](ev(node.operand))
    if isinstance(node, ast.BinOp):
        left, right = ev(node.left), ev(node.right)
        if isinstance(node.op, (ast.Mult, ast.Pow, ast.FloorDiv, ast.Mod)):
            _check_size(node.op, left, right)
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.BoolOp):
        result = None
        for value in node.values:
            result = ev(value)
            if bool(result) != isinstance(node.op, ast.And):
                return result
        return result
    if isinstance(node, ast.Compare):
        left = ev(node.left)
        for op, comparator in zip(node.ops, node.comparators):
            right = ev(comparator)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return ev(node.body) if ev(node.test) else ev(node.orelse)
    if isinstance(node, ast.Subscript):
        return ev(node.value)[ev(node.slice)]
    if isinstance(node, ast.Slice):
        return slice(ev(node.lower), ev(node.upper), ev(node.step))
    if isinstance(node, ast.Attribute):
        return getattr(math, node.attr)
    if isinstance(node, _COMPREHENSIONS):
        return _comprehend(node, env, calls, outputs)
    assert isinstance(node, ast.Call)
    if id(node) in calls:
        index = calls[id(node)]
        if index not in outputs:
            raise OutputMissing(index)
        ok, value = outputs[index]
        if not ok:
            raise CallFailed(value)
        return value
    function = ev(node.func)  # a builtin of SAFE_FUNCTIONS or a math function
    function = _BOUNDED_CALLS.get(function, function)
    return function(*[ev(a) for a in node.args], **{kw.arg: ev(kw.value) for kw in node.keywords})


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
#: Most passes, over all its ``for`` clauses, of a comprehension a test computes outside the sandbox.
MAX_COMPREHENDED = 100_000


def _target_names(target: ast.expr, line: int) -> list[str]:
    """The names a comprehension's ``for`` binds: a name, or a tuple or list of them."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in target.elts):
        return [e.id for e in target.elts]  # type: ignore[attr-defined]
    raise NotConvertible(f"line {line}: a comprehension binding {ast.unparse(target)[:40]}")


def _bind(target: ast.expr, value: Any, scope: dict[str, Any]) -> None:
    if isinstance(target, ast.Name):
        scope[target.id] = value
        return
    names = [e.id for e in target.elts]  # type: ignore[attr-defined]
    values = tuple(value)
    if len(values) != len(names):
        raise ValueError(f"cannot unpack {len(values)} values into {len(names)} names")
    scope.update(zip(names, values))


def _comprehend(node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp, env: dict[str, Any],
                calls: dict[int, int], outputs: dict[int, tuple[bool, Any]]) -> Any:
    """The value of a comprehension (a generator expression gives a list: a check only reads it),
    after at most :data:`MAX_COMPREHENDED` passes (MemoryError past them)."""
    passes = [0]
    items: list[Any] = []

    def walk(level: int, scope: dict[str, Any]) -> None:
        if level == len(node.generators):
            if isinstance(node, ast.DictComp):
                items.append((evaluate(node.key, scope, calls, outputs), evaluate(node.value, scope, calls, outputs)))
            else:
                items.append(evaluate(node.elt, scope, calls, outputs))
            return
        generator = node.generators[level]
        for value in evaluate(generator.iter, scope, calls, outputs):
            passes[0] += 1
            if passes[0] > MAX_COMPREHENDED:
                raise MemoryError(f"a comprehension of more than {MAX_COMPREHENDED} passes")
            inner = dict(scope)
            _bind(generator.target, value, inner)
            if all(evaluate(condition, inner, calls, outputs) for condition in generator.ifs):
                walk(level + 1, inner)

    walk(0, dict(env))
    if isinstance(node, ast.SetComp):
        return _set(items)
    if isinstance(node, ast.DictComp):
        return _dict(items)
    return items


def _check_size(op: ast.operator, left: Any, right: Any) -> None:
    """Refuse a product, power or division that would take this process minutes or gigabytes (an output is in it)."""
    if isinstance(op, ast.Pow):
        if type(left) is int and type(right) is int and left.bit_length() * abs(right) > _MAX_POWER_BITS:
            raise MemoryError("the power is too large to compute")
        return
    if isinstance(op, (ast.FloorDiv, ast.Mod)):
        if type(left) is int and type(right) is int:
            divisor, quotient = right.bit_length() // 30 + 1, max(0, left.bit_length() - right.bit_length()) // 30 + 1
            if divisor * quotient > _MAX_DIVISION_STEPS:
                raise MemoryError("the division is too large to compute")
        return
    for sequence, count in ((left, right), (right, left)):
        if isinstance(sequence, (str, bytes, list, tuple)) and type(count) is int and len(sequence) * count > _MAX_BUILT:
            raise MemoryError("the product is too large to build")


def read_outputs(lines: Sequence[str], count: int) -> tuple[dict[int, tuple[bool, Any]], str | None]:
    """The child's answers: call index -> (returned, value or error message), and a load error.

    The first answer for an index counts; unreadable lines are ignored (that call then has
    no output, a failure); an unreadable value is a failed call.
    """
    outputs: dict[int, tuple[bool, Any]] = {}
    load_error = None
    for line in lines:
        try:
            message = json.loads(line)
        except Exception:  # noqa: BLE001 - the child wrote it: anything is possible
            continue
        if type(message) is not dict:
            continue
        if "load_error" in message and load_error is None:
            load_error = clean_text(message["load_error"], 500)
        index = message.get("i")
        if type(index) is not int or not 0 <= index < count or index in outputs:
            continue
        if "ok" in message:
            try:
                outputs[index] = (True, decode_value(message["ok"]))
            except Exception as err:  # noqa: BLE001 - out of bounds, a hash flood, not an encoding
                outputs[index] = (False, f"the returned value could not be read: {_describe(err)}"[:500])
        else:
            outputs[index] = (False, clean_text(message.get("error"), 500))
    return outputs, load_error


def run_checks(checks: Sequence[Check], outputs: dict[int, tuple[bool, Any]]) -> tuple[bool, str]:
    """Evaluate one test's checks in order: ``(passed, message)``; :class:`OutputMissing` propagates."""
    for check in checks:
        try:
            holds = bool(evaluate(check.test, check.env, check.calls, outputs))
        except OutputMissing:
            raise
        except CallFailed as err:
            return False, str(err)
        except Exception as err:  # noqa: BLE001 - as the assert would have raised it
            return False, _describe(err)
        if not holds:
            return False, _failure_message(check, outputs)
    return True, ""


def _failure_message(check: Check, outputs: dict[int, tuple[bool, Any]]) -> str:
    message = f"AssertionError: {check.message}" if check.message else "AssertionError"
    returned = [safe_repr(outputs[index][1], 200) for index in sorted(check.calls.values()) if outputs.get(index, (False,))[0]]
    if returned:
        message += f" (returned {', '.join(returned)})"
    return message[:500]


def _describe(err: BaseException) -> str:
    """``"Type: message"`` of an exception, capped; its message may hold an output (a KeyError's key)."""
    try:
        text = str(err)
    except Exception:  # noqa: BLE001 - a huge int in the message, say
        text = safe_repr(err.args, 200)
    return clean_text(f"{type(err).__name__}: {text}" if text else type(err).__name__, 500)
