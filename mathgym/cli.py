"""The ``mathgym`` command: ``envs``, ``check``, ``play``, ``serve``, ``train``, ``eval``, ``label-steps``."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

from mathgym.options import parse_env_kwargs

#: Modules of the ``train`` extra: a missing one means the extra is not installed.
TRAIN_EXTRA_MODULES = frozenset({"torch", "transformers", "peft", "accelerate", "matplotlib", "safetensors", "tokenizers"})


def _train_extra_hint() -> str:
    """How to add the train extra, said the way this mathgym was installed."""
    from mathgym.install import extra_hint

    return extra_hint("train")


#: What a terminal sends for arrow and function keys when it is not in raw mode (``^[[A``...).
_ESCAPE_SEQUENCE = re.compile(r"\x1b(\[[0-9;]*[A-Za-z~]|O[A-Za-z])")


def cmd_envs(args: argparse.Namespace) -> int:
    from mathgym.catalogue import FACT_COLUMNS, EnvFilter, fact_cells
    from mathgym.catalogue_page import catalogue_rows

    wanted = EnvFilter(domain=args.domain, multi_turn=args.multi_turn, tools=args.tools, extra=args.extra, levels=args.levels or None)
    rows = catalogue_rows(wanted=wanted)
    if args.json:
        for row in rows:
            if (listing := _catalogue_listing(row["id"])) is not None:
                row["listing"] = listing
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("No env matches these filters (`mathgym envs` lists them all).")
        return 0
    width = max(len(row["id"]) for row in rows)
    cells = [fact_cells(row) for row in rows]
    widths = [max(len(name), *(len(c[i]) for c in cells)) for i, name in enumerate(FACT_COLUMNS)]
    print(f"{'id':<{width}}  " + "  ".join(name.ljust(w) for name, w in zip(FACT_COLUMNS, widths)) + "  description")
    for row, cell in zip(rows, cells):
        origin = "" if row["source"] == "mathgym" else f"  [plugin: {row['source']}]"
        print(f"{row['id']:<{width}}  " + "  ".join(c.ljust(w) for c, w in zip(cell, widths)) + f"  {row['description']}{origin}")
        listing = _catalogue_listing(row["id"])
        if listing is not None:
            # Lines break between words only (never at the hyphen of an id or inside a long name); a
            # long plugin id leaves the listing at least 40 columns.
            print(textwrap.fill(
                listing, max(100, width + 44), initial_indent=" " * (width + 2), subsequent_indent=" " * (width + 4),
                break_on_hyphens=False, break_long_words=False,
            ))
    return 0


def _catalogue_listing(env_id: str) -> str | None:
    """Extra lines an env class offers for the catalogue (``catalogue_listing()``, e.g. its tasks)."""
    from mathgym.catalogue_page import listing_of

    return listing_of(env_id)


def cmd_check(args: argparse.Namespace) -> int:
    import mathgym
    from mathgym.checks import run_checks

    env_id = mathgym.resolve_env_id(args.env_id)
    kwargs = parse_env_kwargs(args.option)
    _make_env(env_id, kwargs).close()  # bad options are one error, not one per check
    results = run_checks(env_id, kwargs)
    for result in results:
        mark = "PASS" if result.passed else "FAIL"
        print(f"[{mark}] {result.name}: {result.detail}")
    failed = sum(not r.passed for r in results)
    print(f"{len(results) - failed} passed, {failed} failed")
    if args.references is not None:
        from mathgym.checks import check_references

        report = check_references(env_id, kwargs, args.references or None)
        print("\n".join(report.lines()))
        failed += len(report.failed)
    return 1 if failed else 0


#: What ``mathgym sandbox`` reports: a key of ``ExecutionResult.details``, what it means when it
#: holds, and the key that says why when it does not.
SANDBOX_FACTS = (
    ("network", "no network: a network namespace of the job's own", ("netns", "netns-userns"), None),
    ("pid_namespace", "no other process in sight: the jobs' own PID namespace", ("private",), "pid_namespace_reason"),
    ("fs_view", "only the runtime in view, read-only: the allow-list", ("allow-list",), "fs_view_reason"),
    ("tmp", "fresh /tmp, /var/tmp, /dev/shm for each job", ("private",), "tmp_reason"),
    ("nproc_enforced", "the process limit holds", (True,), None),
)


def cmd_sandbox(args: argparse.Namespace) -> int:
    """Run one program in a :class:`~mathgym.rewards.CodeSandbox` and say which of its protections
    hold on this machine (they depend on root, user namespaces and the kernel), with the reasons."""
    from mathgym.rewards import CodeSandbox, Status

    with CodeSandbox(workers=1) as box:
        result = box.run("print('ok')")
    if result.status != Status.CORRECT or result.stdout != "ok\n":
        print(f"[FAIL] a trivial program did not run: {result.status.value} {result.details.get('error', result.stderr)[-300:]}")
        return 1
    details = result.details
    print(f"running as {'root (each job drops to a uid of its own)' if os.geteuid() == 0 else 'a non-root user (jobs keep your uid, with no capability)'}")
    weak = 0
    for key, meaning, good, reason_key in SANDBOX_FACTS:
        value = details.get(key)
        held = value in good
        weak += not held
        reason = f" ({details[reason_key]})" if not held and reason_key and details.get(reason_key) else ""
        print(f"[{'OK' if held else 'WEAK'}] {meaning}: {key} = {value}{reason}")
    print("every protection holds" if not weak else f"{weak} weaker than the full sandbox: see docs/rewards.md, 'How a job is contained'")
    return 0


def _make_env(env_id: str, kwargs: dict[str, Any], **extra: Any) -> Any:
    """``gym.make`` whose option errors are one :class:`ConfigError` naming the env's real options."""
    import gymnasium as gym

    from mathgym.registry import check_env_kwargs

    check_env_kwargs(env_id, kwargs, "-o")
    return gym.make(env_id, **extra, **kwargs)


def _read_action(multiline: bool) -> str | None:
    """One action from stdin (``None`` at end of input). Arrow-key escape sequences are dropped,
    and an action that is left empty is asked for again: neither uses up a turn."""
    while True:
        if not multiline:
            line = sys.stdin.readline()
            if line == "":
                return None
            action = _ESCAPE_SEQUENCE.sub("", line.rstrip("\n"))
        else:
            lines = []
            for line in sys.stdin:
                if line.rstrip("\n") == ".":
                    break
                lines.append(_ESCAPE_SEQUENCE.sub("", line.rstrip("\n")))
            else:
                if not lines:
                    return None
            action = "\n".join(lines)
        if action.strip():
            return action
        print("(empty: type an action; Ctrl-D quits)\n> ", end="", flush=True)


def cmd_play(args: argparse.Namespace) -> int:
    import mathgym

    env_id = mathgym.resolve_env_id(args.env_id)
    env = _make_env(env_id, parse_env_kwargs(args.option), render_mode="ansi")
    obs, info = env.reset(seed=args.seed)
    hint = "end your answer with a line holding only '.'" if args.multiline else "one line per action"
    print(f"== {env_id} (task {info['task_id']}, up to {info['max_turns']} turn(s); {hint}; Ctrl-D quits)\n")
    print(obs)
    total = 0.0
    while True:
        print("\n> ", end="", flush=True)
        action = _read_action(args.multiline)
        if action is None:
            print("\n(quit)")
            return 0
        obs, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        print(f"\n[reward {float(reward):+.3f} · status {info['status']} · turn {info['turn']}]")
        if obs:
            print(obs)
        _print_board(env)
        if terminated or truncated:
            end = "solved" if info.get("correct") else ("out of turns" if truncated else "episode over")
            print(f"\n== {end}: total reward {total:+.3f}")
            print(f"reference solution: {info.get('answer')}")
            return 0


def _print_board(env: Any) -> None:
    """In a terminal, the game's board in colour (the games' ``board(colour=True)``, as in ``render()``)."""
    board = getattr(env.unwrapped, "board", None)
    if callable(board) and sys.stdout.isatty():
        print("\n" + board(colour=True))


def cmd_serve(args: argparse.Namespace) -> int:
    if args.format == "openenv":
        return _serve_openenv(args)
    try:
        from mathgym.serve import EnvServer, run_forever
    except ModuleNotFoundError as err:
        from mathgym.errors import ConfigError
        from mathgym.install import extra_hint

        raise ConfigError(f'serving envs over HTTP needs aiohttp ({err.name} is not installed): {extra_hint("serve")}') from None
    token = None
    if args.token_env:
        token = os.environ.get(args.token_env, "")
        if not token.strip():
            from mathgym.errors import ConfigError

            raise ConfigError(f"--token-env {args.token_env}: the environment variable {args.token_env} is not set or empty.")
    server = EnvServer(args.env_id, max_sessions=args.max_sessions, session_timeout=args.session_timeout,
                       client_timeout=args.client_timeout, env_kwargs=parse_env_kwargs(args.option), token=token)
    run_forever(server, args.host, args.port)
    return 0


def _serve_openenv(args: argparse.Namespace) -> int:
    """``mathgym serve --format openenv``: :mod:`mathgym.integrations.openenv`'s server (OpenEnv's own app)."""
    from mathgym.errors import ConfigError

    if len(args.env_id) != 1:
        raise ConfigError(f"--format openenv serves one env per server (OpenEnv's app has one env class), "
                          f"got {len(args.env_id)}: {' '.join(args.env_id)}; start one server per env.")
    if args.token_env:  # OpenEnv's app checks no token: serving without one when asked to would be worse than refusing
        raise ConfigError("--token-env: OpenEnv's server checks no token; "
                          "serve on 127.0.0.1 or behind a proxy that checks one.")
    from mathgym.registry import check_env_kwargs, resolve_env_id

    env_id, env_kwargs = resolve_env_id(args.env_id[0]), parse_env_kwargs(args.option)
    check_env_kwargs(env_id, env_kwargs, "-o")  # before openenv-core's import, which takes seconds
    try:
        from mathgym.integrations.openenv import serve
    except ModuleNotFoundError as err:
        from mathgym.install import extra_hint

        missing = f"--format openenv needs openenv-core ({err.name} is not installed)"
        raise ConfigError(f"{missing}: {extra_hint('openenv')}") from None
    serve(env_id, env_kwargs, args.host, args.port, args.max_sessions)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mathgym", description="Gymnasium text environments for RL of language models.")
    sub = parser.add_subparsers(dest="command", required=True)

    envs = sub.add_parser("envs", help="list every registered environment (plugins included)")
    envs.add_argument("--json", action="store_true", help="print as JSON")
    envs.add_argument("--domain", help="only envs of this domain (math, code, swe, games, reasoning, instructions, sql, qa, mixture)")
    turns = envs.add_mutually_exclusive_group()
    turns.add_argument("--multi-turn", dest="multi_turn", action="store_const", const=True, help="only multi-turn envs")
    turns.add_argument("--single-turn", dest="multi_turn", action="store_const", const=False, help="only single-turn envs")
    envs.add_argument("--tools", action=argparse.BooleanOptionalAction, default=None, help="only envs with tools (--no-tools: without)")
    envs.add_argument("--extra", metavar="NAME", help="only envs that need the extra mathgym[NAME]; 'none' for those needing none")
    envs.add_argument("--levels", action="store_true", help="only envs with difficulty levels to choose")
    envs.set_defaults(func=cmd_envs)

    check = sub.add_parser("check", help="run the env contract checks on ENV_ID")
    check.add_argument("env_id")
    check.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE", help="env constructor option")
    check.add_argument(
        "--references", nargs="?", type=int, const=0, default=None, metavar="N",
        help="also grade each task's own reference answer (the expert) through the env and list those that fail: every task "
             "of a data set, or N of them (a generating env: the tasks of seeds 0..N-1, 100 by default)",
    )
    check.set_defaults(func=cmd_check)

    sandbox = sub.add_parser("sandbox", help="run one program in the code sandbox and say which protections hold on this machine")
    sandbox.set_defaults(func=cmd_sandbox)

    play = sub.add_parser("play", help="play ENV_ID yourself in the terminal")
    play.add_argument("env_id")
    play.add_argument("--seed", type=int, default=None, help="seed of the task")
    play.add_argument("--multiline", action="store_true", help="actions span lines; a line '.' ends one")
    play.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE", help="env constructor option")
    play.set_defaults(func=cmd_play)

    serve = sub.add_parser("serve", help="serve ENV_ID over HTTP for gym.make('mathgym/Remote-v0', url=...) "
                                         "(docs/scaling.md) or OpenEnv's clients (--format openenv, docs/envs-out.md)")
    serve.add_argument("env_id", nargs="+", help="env id(s) clients may make (--format openenv: one)")
    serve.add_argument("--format", choices=("mathgym", "openenv"), default="mathgym",
                       help="wire format: mathgym's sessions (mathgym/Remote-v0), or OpenEnv's app (its HTTP and "
                            "WebSocket sessions, for OpenEnv's EnvClient; needs mathgym[openenv]; one env id; "
                            "the timeouts do not apply)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: this machine only)")
    serve.add_argument("--port", type=int, default=8000, help="port (0: any free one; the address is printed)")
    serve.add_argument("--max-sessions", type=int, default=256,
                       help="most envs held at once; more answer 503 (256 fits a default `mathgym train` run: 128 + 100 for its evaluation)")
    serve.add_argument("--session-timeout", type=float, default=600.0,
                       help="seconds after which an idle session of a client without a lease (curl) is closed")
    serve.add_argument("--client-timeout", type=float, default=30.0,
                       help="seconds after which the sessions of a mathgym/Remote-v0 client that stopped beating are closed")
    serve.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE", help="env option every session gets")
    serve.add_argument("--token-env", default="", metavar="VAR",
                       help="answer 401 unless a request carries the token held in the environment variable VAR "
                            "(clients: token_env='VAR')")
    serve.set_defaults(func=cmd_serve)

    mcp = sub.add_parser("mcp-serve", add_help=False,
                         help="serve mathgym's tools (sandboxed Python, read-only SQL, the math verifier) over MCP (docs/mcp.md)")
    mcp.add_argument("rest", nargs=argparse.REMAINDER)
    mcp.set_defaults(func=lambda args: _run_mcp_serve(args.rest))

    for name, text in (
        ("train", "train a model on an env: grpo, ppo, dpo or sft (see `mathgym train --help`)"),
        ("eval", "evaluate a model on an env (see `mathgym eval --help`)"),
        ("label-steps", "label a policy's solution steps by rollouts, for a PRM (see `mathgym label-steps --help`)"),
    ):
        command = sub.add_parser(name, help=text, add_help=False)
        command.add_argument("rest", nargs=argparse.REMAINDER)
        command.set_defaults(func=lambda args, name=name: _run_training_command(name, args.rest))
    return parser


def _run_training_command(name: str, argv: list[str]) -> int:
    from mathgym import train_cli

    return int(train_cli.main(name, argv) or 0)


def _run_mcp_serve(argv: list[str]) -> int:
    from mathgym import mcp_server

    return mcp_server.main(argv)


def _run(argv: list[str]) -> int:
    if argv and argv[0] in ("train", "eval", "label-steps"):  # argparse.REMAINDER drops a leading --option
        return _run_training_command(argv[0], argv[1:])
    if argv and argv[0] == "mcp-serve":
        return _run_mcp_serve(argv[1:])
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``mathgym`` command; every error a user can cause is one line on stderr and a non-zero exit."""
    from mathgym.errors import MathgymError

    argv = list(sys.argv[1:] if argv is None else argv)
    command = f"mathgym {argv[0]}" if argv and not argv[0].startswith("-") else "mathgym"
    try:
        return _run(argv)
    except MathgymError as err:
        print(f"{command}: error: {err}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as err:
        if (err.name or "").split(".")[0] not in TRAIN_EXTRA_MODULES:
            raise
        missing = f"this needs the training stack ({err.name} is not installed)"
        print(f"{command}: error: {missing}: {_train_extra_hint()}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\n{command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `mathgym envs | head -1`: the reader left; say nothing more
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's own flush at exit would fail again
        return 141


if __name__ == "__main__":
    sys.exit(main())
