"""Every ```python and shell (```bash) block in README.md and docs/*.md runs as it stands, or says
why it cannot.

A block runs in a fresh interpreter (python) or ``bash -e`` (shell, the venv's ``mathgym`` on the
``PATH``), in an empty directory, with no network. Comment lines just before its fence, which the
rendered page does not show, change that::

    <!-- notest(gpu): needs a GPU and a hub model -->        it does not run, for a reason of KIND gpu
    <!-- heavy: 150 training steps, about 4 minutes -->     it runs under `-m heavy` only
    <!-- continues: the student the block above saved -->  it runs after the page's runnable default-tier
                                                            blocks that do not continue, in the same directory

A ``notest`` reason has one of the kinds of :data:`NOTEST_KINDS`; ``tested`` names the test that runs
the block's commands (``tests/test_x.py::test_name``, in a folder of tests/ or not), which must exist. A block that neither runs nor
says why, with one of those kinds, fails :func:`test_every_block_runs_or_says_why_not`.
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
_MARKER = re.compile(r"^\s*<!--\s*(?P<name>notest|heavy|continues)(?:\((?P<kind>[a-z ]+)\))?\s*:\s*(?P<text>.+?)\s*-->\s*$")
#: The languages of the blocks that are code a reader runs; other blocks (text, transcripts, YAML,
#: JSON) are shown, not run.
PYTHON, SHELL = ("python",), ("bash", "sh", "shell", "console")
#: Why a block may not run in the docs test. The kind is in the marker: ``<!-- notest(KIND): ... -->``.
NOTEST_KINDS = {
    "hub": "downloads a model or a data set from the Hugging Face hub",
    "gpu": "needs a GPU (or several)",
    "server": "needs a server or a cluster that runs apart (vLLM, a judge, a Ray head, a second machine)",
    "install": "installs packages or clones the repository (the network)",
    "interactive": "waits for a person at the terminal",
    "placeholder": "names what the reader supplies (PATH, DIR, a run directory of theirs, a file of their data)",
    "not a program": "an interface summary or signatures, not code to run",
    "tested": "a test of its own runs the same commands: the marker names it, tests/test_x.py::test_name",
    "long": "a run of more than the heavy tier's ten minutes (a benchmark's full size): it names the script that runs it",
}


class Snippet(NamedTuple):
    """One code block of a Markdown file."""

    path: Path
    line: int  # 1-based line of the opening fence
    language: str  # "python" or "bash"
    code: str
    notest: tuple[str, str] | None  # (kind, reason) of a block that does not run
    heavy: str | None  # why it runs under -m heavy only
    continues: bool  # runs after the block that makes what it reads (see :func:`chain`)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO) if self.path.is_relative_to(REPO) else self.path.name}:{self.line}"


def code_blocks(path: Path) -> list[Snippet]:
    """The python and shell blocks of ``path``, each with the markers on the lines before its fence.

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
        language = fence.group(3).strip()
        if language in PYTHON + SHELL:
            markers: dict[str, tuple[str | None, str]] = {}
            j = start - 1
            while j >= 0 and (marker := _MARKER.match(lines[j])):
                markers[marker["name"]] = (marker["kind"], marker["text"])
                j -= 1
            notest = markers.get("notest")
            blocks.append(Snippet(
                path, start + 1, "python" if language in PYTHON else "bash", "\n".join(body) + "\n",
                (notest[0] or "", notest[1]) if notest else None,
                markers["heavy"][1] if "heavy" in markers else None, "continues" in markers,
            ))
        i += 1
    return blocks


def python_blocks(path: Path) -> list[Snippet]:
    """The ```python blocks of ``path`` (see :func:`code_blocks`)."""
    return [b for b in code_blocks(path) if b.language == "python"]


def documented_files() -> list[Path]:
    """README.md and every page under docs/ (pages added later are picked up too)."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def why_not_run(snippet: Snippet) -> str | None:
    """What is wrong with a block's ``notest`` marker (``None``: it runs, or its reason is allowed)."""
    if snippet.notest is None:
        return None
    kind, reason = snippet.notest
    if kind not in NOTEST_KINDS:
        return f"notest({kind}) is not one of the allowed kinds {sorted(NOTEST_KINDS)}: write <!-- notest(KIND): why -->"
    if kind == "tested":
        named = re.search(r"(tests/(?:\w+/)*test_\w+\.py)::(test_\w+)", reason)
        if not named or not (REPO / named[1]).is_file() or f"def {named[2]}(" not in (REPO / named[1]).read_text():
            return f"notest(tested) names no existing test (tests/test_x.py::test_name): {reason!r}"
    if kind == "long" and not any((REPO / p).is_file() for p in re.findall(r"\b(?:benchmarks|tests)/[\w/]+\.py", reason)):
        return f"notest(long) names no script that runs it (benchmarks/x.py): {reason!r}"
    return None


def chain(snippet: Snippet, page: list[Snippet]) -> list[Snippet]:
    """The blocks to run for ``snippet``, in order: a block that continues runs after every runnable
    block of the default tier before it on the page that does not continue (the page's set-up: what
    it reads is made there, however far above), then itself."""
    if not snippet.continues:
        return [snippet]
    before = [b for b in page[: page.index(snippet)] if b.notest is None and not b.continues and b.heavy is None]
    return [*before, snippet]


def run_block(snippet: Snippet, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run one block as a reader runs it: python alone in a fresh interpreter, shell in ``bash -e``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
           "MPLBACKEND": "Agg", "PATH": os.pathsep.join((str(Path(sys.executable).parent), os.environ.get("PATH", "")))}
    command = [sys.executable, "-c", snippet.code] if snippet.language == "python" else ["bash", "-e", "-o", "pipefail", "-c", snippet.code]
    return subprocess.run(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


PAGES = {path: code_blocks(path) for path in documented_files()}
SNIPPETS = [s for blocks in PAGES.values() for s in blocks]
#: A heavy block's chain may take its blocks' time each (a warm start, then training): past pytest's 600 s.
HEAVY = [pytest.mark.heavy, pytest.mark.timeout(1500)]
RUNNABLE = [pytest.param(s, id=s.where, marks=HEAVY if any(b.heavy for b in chain(s, PAGES[s.path])) else [])
            for s in SNIPPETS if s.notest is None]


@pytest.mark.parametrize("snippet", RUNNABLE)
def test_block_runs_when_copied(snippet: Snippet, tmp_path: Path):
    for block in chain(snippet, PAGES[snippet.path]):
        result = run_block(block, tmp_path, timeout=1400 if block.heavy else 300)  # heavy: within its mark (1500 s)
        assert result.returncode == 0, (f"the block at {block.where} failed:\n{block.code}\n--- stdout:\n{result.stdout[-2000:]}"
                                        f"\n--- stderr:\n{result.stderr[-3000:]}")


def test_every_block_runs_or_says_why_not():
    wrong = {s.where: problem for s in SNIPPETS if (problem := why_not_run(s))}
    assert not wrong, "blocks that neither run nor say why, with one of the allowed kinds:\n" + "\n".join(
        f"  {where}: {problem}" for where, problem in wrong.items())
    orphans = [s.where for s in SNIPPETS if s.continues and s.notest is None and chain(s, PAGES[s.path]) == [s]]
    assert not orphans, f"'continues' on a page's first runnable block: {orphans}"


def test_blocks_and_markers_are_read(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n```python\nx = 1\n```\n\n<!-- notest(gpu): needs a GPU -->\n```python\nimport nothing\n```\n"
                    "\n- item:\n\n  ```python\n  def f():\n      return 2\n  ```\n"
                    "\n````\n$ transcript\n```python\nnot code\n```\n````\n\n"
                    "<!-- heavy: minutes -->\n<!-- continues: x above -->\n```bash\nls\n```\n\n```text\nshown\n```\n"
                    "\n<!-- notest: a reason of no kind -->\n```sh\nrm -rf /\n```\n\n<!-- notest(tested): tests/test_nope.py::test_x -->\n"
                    "```console\nmathgym\n```\n")
    blocks = code_blocks(page)
    assert [(b.line, b.language, b.code, b.notest, b.heavy, b.continues) for b in blocks] == [
        (3, "python", "x = 1\n", None, None, False), (8, "python", "import nothing\n", ("gpu", "needs a GPU"), None, False),
        (14, "python", "def f():\n    return 2\n", None, None, False), (28, "bash", "ls\n", None, "minutes", True),
        (37, "bash", "rm -rf /\n", ("", "a reason of no kind"), None, False),
        (42, "bash", "mathgym\n", ("tested", "tests/test_nope.py::test_x"), None, False),
    ]
    assert [why_not_run(b) is None for b in blocks] == [True, True, True, True, False, False]
    assert [b.line for b in chain(blocks[3], blocks)] == [3, 14, 28]  # after the page's runnable set-up, not the skipped one
    assert why_not_run(blocks[3]._replace(notest=("tested", "tests/test_docs_snippets.py::test_blocks_and_markers_are_read"))) is None
    assert len(SNIPPETS) >= 80 and len(RUNNABLE) >= 30  # the parametrised test above is not silently checking nothing
