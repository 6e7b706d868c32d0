"""mathgym's tools as an MCP server: ``mathgym mcp-serve`` (or ``python -m mathgym.mcp_server``).

Agents outside mathgym get the tools mathgym's envs give, with the same containment:

* ``run_python(code)``: runs in mathgym's code sandbox (a child process with resource limits, a
  wall clock that kills its process group, a scratch directory, no network), as MathTool-v0 runs
  the agent's code; its output comes back capped and cleaned.
* ``sql_query(query)``: one read-only query on ``--sql-db``, opened as SQLQuery-v0 opens a data
  set's database (read-only and immutable, an authorizer that allows reading only, SQLite's own
  limits, a step and time budget); the result is shown as SQLQuery-v0 shows it.
* ``verify_math(answer, gold)``: mathgym's math verifier (MathVerifier): is ``answer`` equal to ``gold``?

Over stdio (the default) or streamable HTTP (``--transport http``, at ``http://HOST:PORT/mcp``).
Needs the ``mcp`` package (the ``mcp`` extra).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import sqlite3
import sys
from collections.abc import Sequence
from typing import Any

from mathgym.envs.coding.code_records import syntax_error
from mathgym.envs.tools.mcp_client import INSTALL_HINT
from mathgym.errors import ConfigError
from mathgym.rewards.base import Status
from mathgym.rewards.extract import extract_answer
from mathgym.untrusted import clean_text

TOOL_NAMES = ("run_python", "sql_query", "verify_math")
#: Longest ``CREATE`` statements quoted in ``sql_query``'s description.
SCHEMA_CHARS = 4000


def _tool_error(message: str) -> Exception:
    """An error the client sees as the tool's (``isError``), not as the server's."""
    from mcp.server.mcpserver.exceptions import ToolError  # noqa: PLC0415 - optional dependency

    return ToolError(message)


def python_tool(cpu_seconds: float, wall_seconds: float, output_chars: int) -> Any:
    """``run_python``: the code runs in the sandbox; stdout, then the end of stderr when it failed."""
    from mathgym.envs.ahead import sandbox_call  # noqa: PLC0415 - the sandbox starts on first use
    from mathgym.envs.math.math_tool import tool_job  # noqa: PLC0415

    def run_python(code: str) -> str:
        """Run a Python program in a sandbox (no network, limited CPU time and memory) and return what it prints."""
        error = syntax_error(code)
        if error is not None:
            raise _tool_error(error)
        result = sandbox_call(*tool_job(code, cpu_seconds, wall_seconds))
        if result.status is Status.SANDBOX_ERROR:
            raise RuntimeError("the sandbox could not run the program (an infrastructure failure)")
        output = clean_text(result.stdout)[-output_chars:]
        if result.status is Status.TIMEOUT:
            raise _tool_error(f"{output}\nTimed out (limit: {result.details.get('limit') or 'time'}).".strip())
        if result.status is not Status.CORRECT:
            raise _tool_error(f"{output}\n{clean_text(result.stderr).strip()[-output_chars // 2:]}".strip())
        return output.strip() or "(no output; use print() to see values)"

    return run_python


def sql_tool(db_path: str, rows: int, output_chars: int) -> tuple[Any, str]:
    """``sql_query`` on ``db_path`` and its description (the schema); each call opens the file anew,
    read-only, so concurrent calls share nothing."""
    from mathgym.envs.sql.sql_query import _open_read_only, format_result, run_query  # noqa: PLC0415 - SQLQuery-v0's containment

    max_sql_chars, steps, budget_s = 10_000, 1_000_000, 2.0
    try:
        with contextlib.closing(_open_read_only(db_path, max_sql_chars)) as conn:
            schema = "\n".join(f"{sql.strip()};" for (sql,) in conn.execute(
                "SELECT sql FROM sqlite_master WHERE type IN ('table', 'view') AND sql IS NOT NULL AND name NOT LIKE 'sqlite_%'"))
    except sqlite3.Error as err:
        raise ConfigError(f"--sql-db {db_path}: not a SQLite database this process can read ({err}).") from None

    def sql_query(query: str) -> str:
        """Run one read-only SQLite query and return its first rows."""
        with contextlib.closing(_open_read_only(db_path, max_sql_chars)) as conn:
            result = run_query(conn, query, rows, steps, budget_s)
        text = format_result(result, output_chars)
        if result.error:
            raise _tool_error(text)
        return text

    description = f"Run one read-only SQLite query and return its first {rows} rows. The database:\n{schema[:SCHEMA_CHARS]}"
    return sql_query, description


def math_tool() -> Any:
    """``verify_math``: MathVerifier's verdict as JSON."""
    from mathgym.rewards.math import MathVerifier  # noqa: PLC0415 - math-verify loads on first use

    verifier = MathVerifier()

    def verify_math(answer: str, gold: str) -> str:
        """Check a final answer against the gold answer (numbers, fractions, LaTeX expressions); returns JSON."""
        completion = answer if extract_answer(answer, verifier.formats) is not None else f"\\boxed{{{answer}}}"
        result = verifier.score(completion, gold)
        extracted = result.details.get("extracted")
        verdict = {"correct": result.score >= 1.0, "score": result.score, "status": str(result.status),
                   "extracted": None if extracted is None else clean_text(str(extracted), 200)}
        return json.dumps(verdict)

    return verify_math


def build_server(args: argparse.Namespace) -> Any:
    """The ``MCPServer`` holding the tools ``args`` asks for."""
    try:
        from mcp.server.mcpserver import MCPServer  # noqa: PLC0415 - optional dependency
    except ImportError as err:
        raise ConfigError(f"{INSTALL_HINT} ({err})") from None
    if args.tools:
        names = [name.strip() for name in args.tools.split(",") if name.strip()]
    else:  # every tool that can run: sql_query only with a database
        names = [name for name in TOOL_NAMES if name != "sql_query" or args.sql_db]
    unknown = [n for n in names if n not in TOOL_NAMES]
    if unknown or not names:
        raise ConfigError(f"--tools {args.tools!r}: choose among {', '.join(TOOL_NAMES)}.")
    if "sql_query" in names and not args.sql_db:
        raise ConfigError("the sql_query tool needs --sql-db PATH (a SQLite file).")
    instructions = "mathgym's tools: sandboxed Python, read-only SQL, a math verifier."
    server = MCPServer("mathgym", instructions=instructions, log_level="WARNING")
    if "run_python" in names:
        server.add_tool(python_tool(args.cpu_seconds, args.wall_seconds, args.output_chars))
    if "sql_query" in names:
        function, description = sql_tool(args.sql_db, args.sql_rows, args.output_chars)
        server.add_tool(function, description=description)
    if "verify_math" in names:
        server.add_tool(math_tool())
    return server


def serve_http(server: Any, host: str, port: int) -> None:
    """Serve over streamable HTTP at ``http://HOST:PORT/mcp``; port 0 takes a free one. The
    address is printed (flushed) once the socket listens, so a caller can read it."""
    import anyio  # noqa: PLC0415 - comes with mcp
    import uvicorn  # noqa: PLC0415

    sock = socket.create_server((host, port))
    print(f"mathgym mcp-serve: http://{host}:{sock.getsockname()[1]}/mcp", flush=True)
    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, log_level="warning")
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mathgym mcp-serve", description="Serve mathgym's tools over MCP (docs/mcp.md).")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio", help="stdio (default), or streamable HTTP")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP: address to listen on (default: this machine only)")
    parser.add_argument("--port", type=int, default=8000, help="HTTP: port (0: any free one; the address is printed)")
    parser.add_argument("--tools", default="", help=f"comma-separated tools to serve, among {', '.join(TOOL_NAMES)} "
                                                    "(default: all; sql_query only with --sql-db)")
    parser.add_argument("--sql-db", default="", metavar="PATH", help="the SQLite file sql_query reads (opened read-only)")
    parser.add_argument("--sql-rows", type=int, default=20, help="rows of a query's result shown")
    parser.add_argument("--cpu-seconds", type=float, default=5.0, help="run_python: CPU-time limit of one run")
    parser.add_argument("--wall-seconds", type=float, default=10.0, help="run_python: wall-clock limit of one run")
    parser.add_argument("--output-chars", type=int, default=4000, help="longest output of one call")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until its client leaves (stdio) or it is stopped (HTTP)."""
    args = build_parser().parse_args(argv)
    server = build_server(args)
    if args.transport == "http":
        serve_http(server, args.host, args.port)
    else:
        server.run("stdio")
    return 0


if __name__ == "__main__":
    from mathgym.errors import MathgymError

    try:
        sys.exit(main())
    except MathgymError as err:
        print(f"mathgym mcp-serve: error: {err}", file=sys.stderr)
        sys.exit(2)
