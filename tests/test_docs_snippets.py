"""Every ```python block in README.md and docs/*.md runs as it stands, copied alone into a fresh
interpreter (imports included, no network).

A block that must not run (it needs a GPU, a hub model, a long run) carries an HTML comment on
the line just before its fence, which the rendered page does not show::

    <!-- notest: needs a GPU -->
    ```python
    ...
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[1]
_FENCE = re.compile(r"^(\s*)(`{3,})(.*)$")
_NOTEST = re.compile(r"^\s*<!--\s*notest:\s*(?P<reason>.+?)\s*-->\s*$")


class Snippet(NamedTuple):
    """One python block of a Markdown file."""

    path: Path
    line: int  # 1-based line of the opening fence
    code: str
    skip_reason: str | None


def python_blocks(path: Path) -> list[Snippet]:
    """The ```python blocks of ``path``, each with the reason it is skipped (``None``: it runs).

    Fences follow CommonMark: a block opened by n backticks closes at a line of at least n
    backticks and nothing else, so a ```python line inside a ````-fenced transcript is text.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        indent, ticks, start, body = len(fence.group(1)), len(fence.group(2)), i, []
        i += 1
        while i < len(lines) and not re.fullmatch(rf"\s*`{{{ticks},}}\s*", lines[i]):
            line = lines[i]
            body.append(line[indent:] if line[:indent].strip() == "" else line.lstrip())  # a block in a list item is indented
            i += 1
        if fence.group(3).strip() == "python":
            marker = _NOTEST.match(lines[start - 1]) if start > 0 else None
            blocks.append(Snippet(path, start + 1, "\n".join(body) + "\n", marker.group("reason") if marker else None))
        i += 1
    return blocks


def documented_files() -> list[Path]:
    """README.md and every page under docs/ (pages added later are picked up too)."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


SNIPPETS = [s for path in documented_files() for s in python_blocks(path)]


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[f"{s.path.relative_to(REPO)}:{s.line}" for s in SNIPPETS])
def test_python_block_runs_when_copied(snippet: Snippet, tmp_path: Path):
    if snippet.skip_reason is not None:
        pytest.skip(f"notest: {snippet.skip_reason}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
           "MPLBACKEND": "Agg"}
    result = subprocess.run([sys.executable, "-c", snippet.code], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    where = f"{snippet.path.relative_to(REPO)}:{snippet.line}"
    assert result.returncode == 0, f"the block at {where} failed:\n{snippet.code}\n--- stderr:\n{result.stderr[-3000:]}"


def test_blocks_are_found_and_notest_markers_are_read(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n```python\nx = 1\n```\n\n<!-- notest: needs a GPU -->\n```python\nimport nothing\n```\n"
                    "\n- item:\n\n  ```python\n  def f():\n      return 2\n  ```\n"
                    "\n````\n$ transcript\n```python\nnot code\n```\n````\n\n```bash\nls\n```\n")
    blocks = python_blocks(page)
    assert [(b.line, b.code, b.skip_reason) for b in blocks] == [
        (3, "x = 1\n", None), (8, "import nothing\n", "needs a GPU"), (14, "def f():\n    return 2\n", None),
    ]
    assert len(SNIPPETS) >= 10  # the parametrised test above is not silently checking nothing
