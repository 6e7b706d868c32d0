"""A run is composed, not inherited (issue 49): every class of the trainer family (the registered
trainers, their algorithms, the batch sources and the update loop) stays under 30 methods, inherited
ones counted, and every trainer goes through the one step of :class:`~mathgym.algos.trainer.Trainer`.

The count is honest: no class of the family forwards attribute access (``__getattr__`` /
``__getattribute__``), which would hide its parts' methods behind it rather than leave them where they
live; a caller reaches the part that owns a method (``trainer.algorithm``, ``trainer.source``,
``trainer.loop``)."""

from __future__ import annotations

import types

import pytest

pytest.importorskip("torch")

from mathgym.algos.registry import ALGORITHMS, get_algorithm  # noqa: E402
from mathgym.algos.sources import BatchSource  # noqa: E402
from mathgym.algos.trainer import Trainer  # noqa: E402
from mathgym.algos.update import UpdateLoop  # noqa: E402

MAX_METHODS = 30


def methods(cls: type) -> set[str]:
    """The methods (functions, properties, static and class methods) ``cls`` has through its bases, ``object``'s left out."""
    kinds = (types.FunctionType, property, staticmethod, classmethod)
    return {name for klass in cls.__mro__ if klass is not object for name, value in vars(klass).items() if isinstance(value, kinds)}


def trainer_family() -> list[type]:
    trainers = [get_algorithm(name)[0] for name in sorted(ALGORITHMS)]
    sources = {cls for cls in _subclasses(BatchSource)}
    algorithms = {t.algorithm_class for t in trainers}
    # sorted by name: pytest-xdist's workers must collect the same list in the same order
    return [*trainers, *sorted(algorithms, key=_qualified), *sorted(sources, key=_qualified), UpdateLoop]


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _subclasses(cls: type) -> set[type]:
    found = {cls}
    for sub in cls.__subclasses__():
        found |= _subclasses(sub)
    return found


@pytest.mark.parametrize("cls", trainer_family(), ids=lambda cls: cls.__name__)
def test_no_class_of_the_trainer_family_reaches_30_methods(cls):
    count = len(methods(cls))
    assert count <= MAX_METHODS, f"{cls.__qualname__} has {count} methods with its bases: {sorted(methods(cls))}"


#: The hooks that would let a class answer for attributes it does not have (``object``'s own
#: ``__getattribute__`` is the ordinary lookup, left out by :func:`methods`).
FORWARDING = ("__getattr__", "__getattribute__")


@pytest.mark.parametrize("cls", trainer_family(), ids=lambda cls: cls.__name__)
def test_no_class_of_the_trainer_family_forwards_attributes(cls):
    forwarding = sorted(methods(cls).intersection(FORWARDING))
    assert not forwarding, f"{cls.__qualname__} forwards attribute access ({forwarding}): reach the part that owns the name"


def test_the_forwarding_check_sees_an_inherited_hook():
    class Forwarding:
        def __getattr__(self, name):
            return getattr(self.part, name)

    class Trainerlike(Forwarding):
        pass

    assert methods(Trainerlike).intersection(FORWARDING) == {"__getattr__"}


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_algorithm_goes_through_the_one_step(name):
    trainer = get_algorithm(name)[0]
    assert issubclass(trainer, Trainer) and trainer.train_step is Trainer.train_step and trainer.learn is Trainer.learn
    assert trainer.algorithm_class is not Trainer.algorithm_class  # its own plan and loss
    for hidden in ("_recorded_rows", "_recording_done", "sampling_stats", "_teacher_scores"):
        assert not any(hidden in vars(klass) for klass in (*trainer.__mro__, *trainer.algorithm_class.__mro__))
