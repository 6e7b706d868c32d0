"""RepoRepair-v0's diffs: a hunk off its stated line is found near it, in a search that is bounded."""

from __future__ import annotations

import random

import pytest

from mathgym.envs.repo.unified_diff import PatchError, apply_unified_diff


def _reference_place(lines, block, hint):
    """Where a hunk went before the search was bounded: at ``hint``, else the nearest match (the lower of two)."""
    if lines[hint : hint + len(block)] == block:
        return hint
    matches = [i for i in range(len(lines) - len(block) + 1) if lines[i : i + len(block)] == block]
    return min(matches, key=lambda i: abs(i - hint)) if matches else -1


def _diff(path, hunks):
    """A diff of ``(stated line, removed lines, added lines)`` hunks."""
    body = "".join(f"@@ -{start} +{start} @@\n" + "".join(f"-{r}\n" for r in removed) + "".join(f"+{a}\n" for a in added)
                   for start, removed, added in hunks)
    return f"--- a/{path}\n+++ b/{path}\n{body}"


def test_a_hunk_off_its_line_goes_to_the_nearest_match_in_a_search_bounded_by_the_file():
    rng = random.Random(7)
    for _ in range(2000):
        lines = [rng.choice("abc") for _ in range(rng.randint(1, 40))]
        size = rng.randint(1, 3)
        at = rng.randrange(len(lines) - size + 1) if len(lines) >= size and rng.random() < 0.8 else None
        block = lines[at : at + size] if at is not None else [rng.choice("abcd") for _ in range(size)]
        stated = rng.randint(0, len(lines) + 5)
        files = {"f.txt": "\n".join(lines) + "\n"}
        diff = _diff("f.txt", [(stated, block, ["NEW"])])
        place = _reference_place(lines, block, max(stated - 1, 0))
        if place < 0:
            with pytest.raises(PatchError, match="not found in the file"):
                apply_unified_diff(files, diff, max_search_lines=(len(lines) + 1) * (size + 1))
            continue
        patched = apply_unified_diff(files, diff, max_search_lines=(len(lines) + 1) * (size + 1))
        assert patched["f.txt"].splitlines() == lines[:place] + ["NEW"] + lines[place + size :], (lines, block, stated)


def test_hunks_all_off_their_lines_by_as_much_are_found_one_after_another():
    # 950 hunks, each stated at line 1, against a 97,000-line file: each is looked for near the
    # one before it, in a window that doubles: a few times the file's length in all, where the
    # whole file was scanned for each (92 million lines, 3 to 7 s).
    lines = [f"line {i % 7}" for i in range(97_000)]
    targets = range(0, 95_000, 100)
    for i in targets:
        lines[i] = f"target {i}"
    diff = _diff("big.txt", [(1, [f"target {i}"], [f"fixed {i}"]) for i in targets])
    patched = apply_unified_diff({"big.txt": "\n".join(lines) + "\n"}, diff, max_search_lines=8 * len(lines))
    assert patched["big.txt"].count("fixed") == 950 and "target" not in patched["big.txt"]


def test_a_hunk_after_a_displaced_one_is_expected_as_far_from_its_line():
    # The diff's lines are 40 short of the file's (a header the model left out): hunk 2's
    # "return x" is the one 40 lines below its stated line, not the one nearer it.
    lines = [f"line {i}" for i in range(60)]
    lines[4] = lines[49] = "return x"
    lines[44] = "first"
    diff = _diff("m.py", [(5, ["first"], ["FIRST"]), (10, ["return x"], ["return y"])])
    patched = apply_unified_diff({"m.py": "\n".join(lines) + "\n"}, diff)["m.py"].splitlines()
    assert (patched[4], patched[44], patched[49]) == ("return x", "FIRST", "return y")


def test_a_diff_whose_hunks_need_a_long_search_is_refused_with_what_to_do():
    lines = [f"l{i}" for i in range(97_000)]
    zigzag = [i for k in range(475) for i in (k * 100, 96_000 - k * 100)]  # each hunk at the other end of the file
    diff = _diff("f.txt", [(1, [f"l{i}"], [f"x{i}"]) for i in zigzag])
    with pytest.raises(PatchError, match=r"not found within 1,000,000 lines of searching; give each hunk's line numbers"):
        apply_unified_diff({"f.txt": "\n".join(lines) + "\n"}, diff)
