"""An MCP server written for the tests, as a third party would write one (the ``mcp`` package only).

Run as a script: over stdio (default), or ``--http`` on 127.0.0.1 at a free port, printed as the
first line of stdout. It exits by itself after ``--lifetime`` seconds (or when its stdio client
leaves), so a test that fails never leaves it behind. ``--pid-file`` writes its process id, for a
test that kills it to play a server that dies.
"""

from __future__ import annotations

import argparse
import os
import socket
import threading
import time

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

app = MCPServer("fixture", log_level="WARNING")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def fail(why: str) -> str:
    """A tool that always fails, with the given reason."""
    raise ToolError(f"refused: {why}")


@app.tool()
def sleep(seconds: float) -> str:
    """Wait, then say so."""
    time.sleep(seconds)
    return f"slept {seconds} s"


@app.tool()
def shout(count: int) -> str:
    """A long text with terminal escape sequences and control characters in it."""
    return "\x1b[2J\x1b]0;owned\x07" + "A" * count + "\x00\x9b\u202eEND"


def _exit_after(seconds: float) -> None:
    def stop() -> None:
        time.sleep(seconds)
        os._exit(0)

    threading.Thread(target=stop, daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--lifetime", type=float, default=300.0)
    parser.add_argument("--pid-file", default="")
    args = parser.parse_args()
    _exit_after(args.lifetime)
    if args.pid_file:
        with open(args.pid_file, "w") as out:
            out.write(str(os.getpid()))
    if not args.http:
        app.run("stdio")
        return
    import anyio
    import uvicorn

    sock = socket.create_server(("127.0.0.1", 0))
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    config = uvicorn.Config(app.streamable_http_app(host="127.0.0.1"), log_level="warning")
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    main()
