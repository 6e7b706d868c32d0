from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("MATHGYM_SHARED_DATA", REPO.parent / "shared" / "data"))
GSM8K_TEST = SHARED_DATA / "gsm8k_test.jsonl"


@pytest.fixture(scope="session")
def gsm8k_path() -> Path:
    if not GSM8K_TEST.is_file():
        pytest.fail(f"GSM8K test file not found at {GSM8K_TEST}; set MATHGYM_SHARED_DATA")
    return GSM8K_TEST
