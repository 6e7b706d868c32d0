"""Applying a unified diff (``diff -u`` / ``git diff``) to files held in memory.

Pure Python on untrusted text: nothing runs, nothing touches the disk, and a diff that
does not apply raises :class:`PatchError` with what was wrong. Lenient where models
usually slip: the line counts in ``@@`` headers are ignored (a hunk runs to the next
header), a blank line inside a hunk counts as a blank context line, ``a/`` and ``b/``
prefixes are stripped, and a hunk whose lines are not at the stated position is looked
for elsewhere in the file.

Example:
    >>> diff = "--- a/m.py\\n+++ b/m.py\\n@@ -1 +1 @@\\n-x = 1\\n+x = 2\\n"
    >>> apply_unified_diff({"m.py": "x = 1\\n"}, diff)
    {'m.py': 'x = 2\\n'}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

DEV_NULL = "/dev/null"


class PatchError(ValueError):
    """A diff that cannot be applied; the message says where and why."""


@dataclass
class _FilePatch:
    old: str
    new: str
    hunks: list[tuple[int, list[str]]] = field(default_factory=list)  # (stated old start, lines with their prefix)


def _path(header: str) -> str:
    name = header[4:].split("\t")[0].strip()
    if name != DEV_NULL and (name.startswith("a/") or name.startswith("b/")):
        name = name[2:]
    return name


def parse_unified_diff(diff: str) -> list[_FilePatch]:
    """The file patches of ``diff``; raises :class:`PatchError` when it holds none."""
    patches: list[_FilePatch] = []
    lines = diff.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("--- ") and index + 1 < len(lines) and lines[index + 1].startswith("+++ "):
            patches.append(_FilePatch(_path(line), _path(lines[index + 1])))
            index += 2
            continue
        if line.startswith("@@"):
            if not patches:
                raise PatchError("a hunk (@@ ... @@) comes before any '--- file' / '+++ file' header")
            start = _old_start(line)
            body: list[str] = []
            index += 1
            while index < len(lines) and not lines[index].startswith("@@") and not (lines[index].startswith("--- ") and index + 1 < len(lines) and lines[index + 1].startswith("+++ ")):
                text = lines[index]
                if text.startswith("\\"):  # "\ No newline at end of file"
                    index += 1
                    continue
                body.append(text if text[:1] in (" ", "-", "+") else " " + text)
                index += 1
            while body and body[-1] == " ":  # trailing blank lines after the hunk are not part of it
                body.pop()
            patches[-1].hunks.append((start, body))
            continue
        index += 1
    if not patches:
        raise PatchError("no '--- file' / '+++ file' header found; write a unified diff (as `diff -u` or `git diff` prints)")
    return patches


def _old_start(header: str) -> int:
    """The old-file start line of a ``@@ -12,3 +12,4 @@`` header (0 when it cannot be read)."""
    try:
        old = header.split()[1]
        return int(old.lstrip("-").split(",")[0]) if old.startswith("-") else 0
    except (IndexError, ValueError):
        return 0


#: Most lines the hunks of one diff may be looked for across, in all: a diff whose hunks are far
#: from their stated lines in a huge file is refused in a fraction of a second, where searching
#: on took seconds a turn (950 misplaced hunks against a 97,000-line file: 3 to 7 s).
MAX_SEARCH_LINES = 1_000_000
#: Lines on each side of the expected line first looked at; the window doubles until a match.
_FIRST_REACH = 64


@dataclass
class _SearchBudget:
    """What is left of the lines one diff's hunks may be looked for across."""

    limit: int
    spent: int = 0

    def spend(self, lines: int, where: str) -> None:
        self.spent += lines
        if self.spent > self.limit:
            raise PatchError(
                f"{where}: not found within {self.limit:,} lines of searching; give each hunk's "
                "line numbers (@@ -LINE,COUNT +LINE,COUNT @@) as the file has them"
            )


def _apply_hunks(text: str, patch: _FilePatch, budget: _SearchBudget) -> str:
    lines = text.splitlines()
    ends_with_newline = text.endswith("\n") or not text
    offset = shift = 0  # lines the earlier hunks added; how far the last one was from its stated line
    for number, (start, body) in enumerate(patch.hunks, 1):
        old = [line[1:] for line in body if line[0] in " -"]
        new = [line[1:] for line in body if line[0] in " +"]
        stated = max(start - 1, 0) + offset
        # As GNU patch does, a hunk is expected as far from its stated line as the one before it
        # was: a diff whose line numbers are all wrong by the same amount (or all missing) is
        # then found hunk after hunk near where the last one was, not searched for from line 1.
        at = _find(lines, old, stated + shift, budget, f"hunk {number} of {patch.new}")
        if at < 0:
            shown = "\n".join(old[:3])
            raise PatchError(f"hunk {number} of {patch.new}: its context/removed lines were not found in the file:\n{shown}")
        lines[at : at + len(old)] = new
        offset += len(new) - len(old)
        shift = at - stated
    return "\n".join(lines) + ("\n" if ends_with_newline and lines else "")


def _find(lines: list[str], block: list[str], hint: int, budget: _SearchBudget, where: str) -> int:
    """Where ``block`` starts in ``lines``: at ``hint`` when it is there, else the nearest match
    (the lower one of two as near), else -1. Looks in a window around ``hint`` that doubles, so
    the work grows with the distance to the match, not the file's length."""
    if not block:
        return min(max(hint, 0), len(lines))
    hint = min(max(hint, 0), len(lines))  # past the end, the nearest match is the last one all the same
    size, last = len(block), len(lines) - len(block)
    if lines[hint : hint + size] == block:
        return hint
    reach = _FIRST_REACH
    while last >= 0:
        low, high = max(hint - reach, 0), min(hint + reach, last)
        budget.spend(max(high - low + 1, 0), where)
        found = _nearest_in(lines, block, hint, low, high, budget, where)
        if found >= 0 or (low == 0 and high == last):
            return found
        reach *= 2
    return -1


def _nearest_in(lines: list[str], block: list[str], hint: int, low: int, high: int, budget: _SearchBudget, where: str) -> int:
    """The match of ``block`` starting in ``low..high`` nearest to ``hint`` (the lower of two), else -1."""
    best, at = -1, low
    while at <= high:
        try:
            at = lines.index(block[0], at, high + 1)  # C speed between the block's first lines
        except ValueError:
            break
        budget.spend(len(block), where)
        if lines[at : at + len(block)] == block and (best < 0 or abs(at - hint) < abs(best - hint)):
            best = at
        at += 1
    return best


def apply_unified_diff(files: Mapping[str, str], diff: str, max_search_lines: int = MAX_SEARCH_LINES) -> dict[str, str]:
    """``files`` (path -> text) with ``diff`` applied; a new dict (``files`` is left as it is).

    A hunk not at its stated line is looked for around it; ``max_search_lines`` bounds the
    lines looked at for all the hunks together.

    Raises:
        PatchError: the diff has no file header, names a file that does not exist (or
            creates one that does), or a hunk's lines are not in the file (or not found
            within ``max_search_lines`` of searching).
    """
    result, budget = dict(files), _SearchBudget(max_search_lines)
    for patch in parse_unified_diff(diff):
        if patch.new == DEV_NULL:  # a deletion
            if patch.old not in result:
                raise PatchError(f"cannot delete {patch.old}: no such file")
            del result[patch.old]
            continue
        if patch.old == DEV_NULL:
            if patch.new in result:
                raise PatchError(f"cannot create {patch.new}: it already exists")
            result[patch.new] = _apply_hunks("", patch, budget)
            continue
        if patch.old not in result:
            raise PatchError(f"{patch.old}: no such file in the workspace")
        text = _apply_hunks(result.pop(patch.old), patch, budget)
        result[patch.new] = text
    return result
