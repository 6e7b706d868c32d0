"""Text-to-SQL data sets for SQLQuery-v0: Spider's and BIRD's layouts, on their own SQLite files.

A record names its database (``db_id``), a question and the gold query: Spider's ``query``,
BIRD's ``SQL`` (with its ``evidence``, the external knowledge shown with the question), or
``sql``. The database is ``DB_DIR/<db_id>/<db_id>.sqlite`` (how both ship theirs), or a
record's own ``db_path`` (relative to the data file). A record may instead carry its database
as the statements that build it (Gretel's synthetic_text_to_sql: ``sql_prompt``,
``sql_context`` with ``CREATE TABLE`` and ``INSERT`` statements, ``sql``; b-mc2's
sql-create-context: ``question``, ``context``, ``answer``): it is built in memory for each
episode. A data file is JSON (a list of records, as Spider's ``dev.json``) or JSONL.

Results compare as each data set's own evaluator compares them, exactly (no tolerance): BIRD's
as sets of rows; Spider's and the rest as multisets, in order when the gold query ends in a
top-level ``ORDER BY``. Columns may come in any order (as Spider's test-suite evaluation allows).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mathgym.envs.math.data import jsonl_rows
from mathgym.envs.sql.sql_tasks import Compare
from mathgym.errors import DatasetError

#: Column orders tried when matching a result's columns to the gold ones (after the pruning by
#: each column's values, more than one is left only for columns holding the same values), and
#: the most partial orders looked at to find them.
MAX_COLUMN_ORDERS, MAX_ORDER_STEPS = 720, 100_000


@dataclass(frozen=True)
class SQLRecord:
    """One text-to-SQL task of a data set.

    Attributes:
        task_id: ``<file stem>/<index>`` (or the record's ``question_id``).
        db_path: The SQLite file.
        question: The question, with BIRD's evidence after it when there is some.
        sql: The gold query.
        compare: ``"set"``, ``"multiset"`` or ``"ordered"`` (see the module).
        setup: For a record that carries its own database (``sql_context``): the statements
            that build it in memory (``db_path`` is then ``""``).
    """

    task_id: str
    db_path: str
    question: str
    sql: str
    compare: Compare
    setup: str = ""


def load_sql_dataset(path: str | Path, db_dir: str | Path | None) -> tuple[SQLRecord, ...]:
    """The records of a Spider-, BIRD- or Gretel-layout file (JSON list or JSONL).

    Raises:
        DatasetError: The file or a database is missing, or a record lacks its question,
            gold query or database (naming the record).
    """
    path = Path(path)
    rows = jsonl_rows(path, "SQL data set", json_list=True)
    records = tuple(_record(row, index, path, db_dir) for index, (_, row) in enumerate(rows))
    if not records:
        raise DatasetError(f"{path} holds no records")
    missing = sorted({r.db_path for r in records if not r.setup and not Path(r.db_path).is_file()})
    if missing:
        raise DatasetError(f"{path}: {len(missing)} database file(s) not found, e.g. {missing[0]!r} (db_dir={str(db_dir)!r})")
    return records


def _record(row: Any, index: int, path: Path, db_dir: str | Path | None) -> SQLRecord:
    where = f"{path}: record {index}"
    if not isinstance(row, dict):
        raise DatasetError(f"{where} is a JSON object, not {type(row).__name__}")
    bird = isinstance(row.get("SQL"), str)
    setup = next((row[k] for k in ("sql_context", "context") if isinstance(row.get(k), str) and _CREATES.search(row[k])), "")
    names = ("SQL", "query", "sql", "answer") if setup else ("SQL", "query", "sql")  # b-mc2's gold query is its 'answer'
    sql = next((row[k] for k in names if isinstance(row.get(k), str) and row[k].strip()), None)
    question = next((row[k] for k in ("question", "sql_prompt") if isinstance(row.get(k), str) and row[k].strip()), None)
    if sql is None or question is None:
        raise DatasetError(f"{where} needs a question and its gold query (Spider's 'query', BIRD's 'SQL', or 'sql')")
    if setup and not isinstance(row.get("db_id"), str) and not isinstance(row.get("db_path"), str):
        db_path = ""
    elif isinstance(row.get("db_path"), str):
        db_path = ((path if path.is_dir() else path.parent) / row["db_path"]).resolve()
    elif isinstance(row.get("db_id"), str) and row["db_id"].strip() and "/" not in row["db_id"] and row["db_id"] not in (".", ".."):
        if db_dir is None:
            raise DatasetError(f"{where} names its database by db_id: give db_dir, the folder holding <db_id>/<db_id>.sqlite")
        db_path = Path(db_dir) / row["db_id"] / f"{row['db_id']}.sqlite"
    else:
        raise DatasetError(f"{where} names no database (db_id, or db_path)")
    evidence = row.get("evidence")
    shown = question.strip() + (f"\nExternal knowledge: {evidence.strip()}" if isinstance(evidence, str) and evidence.strip() else "")
    compare: Compare = "set" if bird else ("ordered" if ends_in_order_by(sql) else "multiset")
    task_id = str(row.get("question_id", row.get("id", f"{path.stem}/{index}")))
    return SQLRecord(task_id, str(db_path), shown, sql.strip().rstrip(";"), compare, setup if not db_path else "")


#: A ``CREATE TABLE`` statement: a record's context that builds its own database.
_CREATES = re.compile(r"\bcreate\s+table\b", re.IGNORECASE)

_STRINGS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\[[^\]]*\]")


def ends_in_order_by(sql: str) -> bool:
    """Whether the query's outermost ``SELECT`` has an ``ORDER BY`` (not one in a subquery or a string).

    Example:
        >>> ends_in_order_by("SELECT name FROM t ORDER BY age DESC LIMIT 1"), ends_in_order_by("SELECT * FROM (SELECT a FROM t ORDER BY a)")
        (True, False)
    """
    text, depth, outer = _STRINGS.sub("''", sql), 0, []
    for char in text:
        depth += char == "("
        depth -= char == ")"
        outer.append(char if depth == 0 else " ")
    return re.search(r"\border\s+by\b", "".join(outer), re.IGNORECASE) is not None


def _canonical(value: Any) -> Any:
    """A cell as its data set's evaluator compares it: numbers by value (``2 == 2.0``), the rest as they are."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def exact_results_match(candidate: Sequence[Sequence[Any]], gold: Sequence[Sequence[Any]], compare: Compare) -> tuple[bool, str]:
    """Whether a result equals the gold one exactly (columns in any order); and, when not, why.

    Linear in the rows for each column order tried; the orders are only those that give each
    column the same values as the gold column it stands for (at most :data:`MAX_COLUMN_ORDERS`).

    Example:
        >>> exact_results_match([("Oslo", 2), ("Lima", 3.0)], [(3, "Lima"), (2, "Oslo")], "multiset")
        (True, '')
    """
    width = len(gold[0]) if gold else (len(candidate[0]) if candidate else 0)
    if candidate and len(candidate[0]) != width:
        return False, f"the result has {len(candidate[0])} columns; the question asks for {width}"
    cand = [tuple(map(_canonical, row)) for row in candidate]
    want = [tuple(map(_canonical, row)) for row in gold]
    if compare != "ordered" and len(cand) != len(want) and compare != "set":
        return False, f"the result has {len(cand)} rows; {len(want)} expected"
    column_values = [Counter(map(repr, column)) for column in zip(*cand)] if cand else [Counter()] * width
    gold_values = [Counter(map(repr, column)) for column in zip(*want)] if want else [Counter()] * width
    fits = [[k for k in range(width) if (set(column_values[k]) == set(gold_values[g]) if compare == "set" else column_values[k] == gold_values[g])]
            for g in range(width)]
    for order in itertools.islice(_column_orders(fits), MAX_COLUMN_ORDERS):
        rows = [tuple(row[k] for k in order) for row in cand]
        if compare == "ordered":
            same = rows == want
        elif compare == "set":
            same = set(rows) == set(want)
        else:
            same = Counter(rows) == Counter(want)
        if same:
            return True, ""
    return False, "the rows differ from the expected result" + (" (in this order)" if compare == "ordered" else "")


def _column_orders(fits: list[list[int]]) -> Iterator[tuple[int, ...]]:
    """Orders giving gold column ``g`` one of the result's columns ``fits[g]``, no column twice;
    depth first, and no more than :data:`MAX_ORDER_STEPS` partial orders looked at in all."""
    steps = [0]

    def extend(chosen: list[int]) -> Iterator[tuple[int, ...]]:
        if len(chosen) == len(fits):
            yield tuple(chosen)
            return
        for column in fits[len(chosen)]:
            steps[0] += 1
            if steps[0] > MAX_ORDER_STEPS:
                return
            if column not in chosen:
                chosen.append(column)
                yield from extend(chosen)
                chosen.pop()

    yield from extend([])
