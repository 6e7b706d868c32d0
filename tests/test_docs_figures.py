"""Every measured figure in the docs is a number of a recorded result in ``benchmarks/results``.

A test run's counts (``N passed``, ``N skipped``) are figures too: the README quotes the
default suite's from the record ``benchmarks/test_suite.py`` takes.

A page puts its figures in a block that names the record(s) they come from::

    <!-- figures: code -->
    | mathgym `CodeSandbox` | 164 / 164 | 0.64 | 256.5 | **4.1x** |
    <!-- /figures -->

Inside a block, each percentage, ratio, rate and duration must be one of the record's numbers
(at the precision shown; a percentage may show a fraction ×100). Outside blocks, the pages
that report measurements hold no such figure at all. So a re-run that changes a number fails
here until the page quotes it, and no page can quote a number nobody recorded.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
#: Pages that report measurements: every figure on them sits in a block.
MEASURED_PAGES = ("training.md", "benchmarks.md", "grpo.md", "ppo.md", "dpo.md", "sft.md", "scaling.md")
_OPEN = re.compile(r"<!--\s*figures:\s*(?P<names>[\w\-, ]+?)\s*-->")
_CLOSE = re.compile(r"<!--\s*/figures\s*-->")
_NUMBER = r"(?<![\w.])(?P<value>\d[\d,]*(?:\.\d+)?)"
#: A figure: a number with a unit that marks a measurement.
_FIGURE = re.compile(
    _NUMBER + r"(?P<unit>%|×|x(?![\w])|\s(?:points|ms|s|min|passed|skipped)\b|\s?[a-z]+/s\b|\s?s/step\b)"
)


def _blocks(text: str) -> tuple[list[tuple[int, list[str], str]], str]:
    """The figure blocks of a page (line, record names, body) and the page's text outside them."""
    blocks, outside, pos = [], [], 0
    for opened in _OPEN.finditer(text):
        if opened.start() < pos:
            continue
        closed = _CLOSE.search(text, opened.end())
        assert closed, f"a figures block opened at line {text.count(chr(10), 0, opened.start()) + 1} is never closed"
        outside.append(text[pos : opened.start()])
        names = [n.strip() for n in opened["names"].split(",") if n.strip()]
        blocks.append((text.count("\n", 0, opened.start()) + 1, names, text[opened.end() : closed.start()]))
        pos = closed.end()
    outside.append(text[pos:])
    return blocks, "".join(outside)


def _numbers(value: object) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [float(value)] if math.isfinite(value) else []
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return []


def _shown(figure: re.Match[str], recorded: list[float]) -> bool:
    text = figure["value"].replace(",", "")
    decimals = len(text.split(".")[1]) if "." in text else 0
    shown = float(text)
    candidates = recorded + ([100 * r for r in recorded] if figure["unit"] == "%" else [])
    if figure["unit"].strip() == "min":
        candidates += [r / 60 for r in recorded]
    return any(math.isclose(round(abs(c), decimals), shown, abs_tol=10**-decimals / 2) for c in candidates)


def _pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.name)
def test_every_figure_in_a_block_is_a_recorded_number(page):
    blocks, _ = _blocks(page.read_text())
    for line, names, body in blocks:
        recorded: list[float] = []
        for name in names:
            path = RESULTS / f"{name}.json"
            assert path.is_file(), f"{page.name}:{line}: no recorded result {path.relative_to(REPO)}"
            record = json.loads(path.read_text())
            assert {"command", "date", "machine", "results"} <= set(record), f"{path.name}: a record says its command, date, machine and results"
            recorded += _numbers(record["results"])
        stray = [f.group(0) for f in _FIGURE.finditer(body) if not _shown(f, recorded)]
        assert not stray, f"{page.name}:{line}: figures not in {', '.join(names)}'s record: {stray}"


@pytest.mark.parametrize("name", MEASURED_PAGES)
def test_measured_pages_hold_no_figure_outside_a_block(name):
    page = REPO / "docs" / name
    _, outside = _blocks(page.read_text())
    loose = [f.group(0).strip() for f in _FIGURE.finditer(outside) if f["unit"] in ("%", "×") or f["unit"].endswith("/s")]
    assert not loose, f"docs/{name}: figures outside a <!-- figures: RECORD --> block: {loose}"


def test_every_record_is_quoted_somewhere_and_says_how_it_was_made():
    quoted = {n for page in _pages() for _, names, _ in _blocks(page.read_text())[0] for n in names}
    for path in sorted(RESULTS.glob("*.json")):
        record = json.loads(path.read_text())
        assert record["name"] == path.stem
        assert record["command"].startswith(("python ", "mathgym ")), record["command"]
        assert record["machine"].get("cpus"), path.name
        assert path.stem in quoted, f"{path.name} is recorded but no page quotes it"


def test_the_check_fails_on_a_drifted_figure():
    recorded = [0.49, 0.78, 256.5]
    good = "| before | 49.0% |\n| after | **78.0%** | 256.5 exec/s |"
    bad = "| before | 43.0% |"
    assert all(_shown(f, recorded) for f in _FIGURE.finditer(good))
    assert not any(_shown(f, recorded) for f in _FIGURE.finditer(bad))
    counted = [1769.0, 36.0]
    assert all(_shown(f, counted) for f in _FIGURE.finditer("1,769 passed, 36 skipped"))
    assert not any(_shown(f, counted) for f in _FIGURE.finditer("1,578 passed, 35 skipped"))


def test_the_readme_quotes_the_suites_counts_from_a_record():
    """The README's test counts sit in a block of the ``test_suite`` record (a stale count fails)."""
    _, outside = _blocks((REPO / "README.md").read_text())
    loose = [f.group(0) for f in _FIGURE.finditer(outside) if f["unit"].strip() in ("passed", "skipped")]
    assert not loose, f"README.md: test counts outside a <!-- figures: test_suite --> block: {loose}"
