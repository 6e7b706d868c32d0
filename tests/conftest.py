from __future__ import annotations

import os
from pathlib import Path

import pytest

if os.environ.get("PYTEST_XDIST_WORKER") and "OMP_NUM_THREADS" not in os.environ:
    # pytest-xdist runs two workers on two cores: one torch thread each (set before torch loads),
    # unless a test asks for more. Oversubscribed OpenMP threads spin and slow every test several-fold.
    os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 2) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))

REPO = Path(__file__).resolve().parents[1]
#: Where the full GSM8K test split may lie: ``$MATHGYM_SHARED_DATA/gsm8k_test.jsonl``, by default
#: ``../shared/data/`` beside the repository. Optional: the repository ships a sample of it.
SHARED_DATA = Path(os.environ.get("MATHGYM_SHARED_DATA", REPO.parent / "shared" / "data"))
GSM8K_TEST = SHARED_DATA / "gsm8k_test.jsonl"


@pytest.fixture(scope="session", params=["sample", "full"])
def gsm8k_path(request: pytest.FixtureRequest) -> Path:
    """GSM8K test problems: the sample shipped in ``mathgym/samples`` (always there), then the
    full test split where it is present (a skip that names the path where it is not)."""
    if request.param == "sample":
        from mathgym.envs.math.data import GSM8K_SAMPLE  # here, not above: after OMP_NUM_THREADS is set

        return GSM8K_SAMPLE
    if not GSM8K_TEST.is_file():
        pytest.skip(f"full GSM8K test split not found at {GSM8K_TEST} (optional: set MATHGYM_SHARED_DATA "
                    "to the folder holding gsm8k_test.jsonl); the shipped sample was checked")
    return GSM8K_TEST


#: The learning checks (minutes each, two torch threads): one xdist worker runs them in turn,
#: so that two of them never share the two cores at once.
LEARNING_CHECKS = ("tests/algos/test_train_learning.py", "tests/algos/test_ppo_dpo_learning.py")
#: Files whose tests share costly module fixtures (a local Ray session and its actor processes,
#: math-verify's verdicts on a corpus, the uninterrupted training runs that resumed ones are
#: compared with): each runs whole on one worker, so each fixture is built once, not once per worker.
WHOLE_FILES = ("tests/algos/test_ray_executor.py", "tests/algos/test_train_resume.py", "tests/rewards/test_math_differential.py",
               "tests/envs/test_nemo_gym.py")  # its NeMo-Gym servers, started once


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Schedule test by test, except the learning checks, which form one unit of work, and the
    files of :data:`WHOLE_FILES`, one unit each.

    (xdist's own ``--dist loadgroup`` did not group tests with pytest 9 / xdist 3.8 here.)
    """
    from xdist.scheduler import LoadScopeScheduling

    class LearningChecksTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::")[0]
            if path in LEARNING_CHECKS:
                return "learning-checks"
            return path if path in WHOLE_FILES else nodeid

        def _assign_work_unit(self, node) -> None:
            # The longest units first (xdist orders scopes by their number of tests, which put the
            # one learning check near the end, its minutes then added to the run's).
            for scope in reversed(("learning-checks", *WHOLE_FILES)):
                if scope in self.workqueue:
                    self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return LearningChecksTogether(config, log)
