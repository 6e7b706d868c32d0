"""Serve one NeMo-Gym resources server on 127.0.0.1, for NeMoGym-v0 (:mod:`mathgym.envs.interop.nemo_gym_env`).

A script, run by an interpreter that has ``nemo-gym`` (Python >= 3.12), not imported by mathgym::

    python -P .../mathgym/envs/interop/nemo_gym_launch.py mcqa
    python -P .../mathgym/envs/interop/nemo_gym_launch.py my_package.server:MyResourcesServer --config '{"x": 1}'

``SERVER`` is the name of a resources server that nemo-gym ships (``resources_servers/NAME/app.py``)
or ``"module:Class"``, a ``SimpleResourcesServer`` subclass of one's own. It is made as nemo-gym's own
tests make one (its config class given host, port, name and ``--config``), without ``ng_run``'s head
server and Ray: a resources server answers ``/seed_session``, ``/verify`` and its tools by itself. The
script binds a free port (``--port 0``), prints one JSON line (``{"url", "dataset"}``: the server's URL
and the example data set nemo-gym ships beside it, or ``null``), then serves until it is killed, its
parent process is gone, or ``--lifetime-s`` have passed. Without nemo-gym it prints
``{"error": ...}`` and exits with status 3. Only the standard library is imported before that.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

#: The exit status when nemo-gym cannot be imported.
NO_NEMO_GYM = 3


def _say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def _server_class(target: str, base: type) -> tuple[type, Path | None]:
    """The resources-server class ``target`` names, and the example data set shipped beside it."""
    module_name, _, class_name = target.partition(":")
    if not class_name:
        module_name = f"resources_servers.{target}.app"
    module = importlib.import_module(module_name)
    if class_name:
        cls = getattr(module, class_name)
    else:  # the one resources server the shipped app module defines (its own, not an imported base)
        found = [c for _, c in inspect.getmembers(module, inspect.isclass)
                 if issubclass(c, base) and c.__module__ == module.__name__ and not inspect.isabstract(c)]
        if len(found) != 1:
            raise SystemExit(f"{module_name} defines {len(found)} resources servers; name one as 'module:Class'")
        cls = found[0]
    example = Path(inspect.getfile(module)).parent / "data" / "example.jsonl"
    return cls, example if example.is_file() else None


def _watch(parent: int, lifetime_s: float) -> None:
    """End this process once its parent is gone or its lifetime is over (a test's server never lingers)."""
    deadline = time.monotonic() + lifetime_s if lifetime_s > 0 else float("inf")
    while time.monotonic() < deadline:
        if os.getppid() != parent:
            break
        time.sleep(0.5)
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("server", help="a resources server nemo-gym ships (e.g. mcqa) or 'module:Class'")
    parser.add_argument("--config", default="{}", help="JSON object of the server config's own fields")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--path", action="append", default=[], help="a folder to import 'module:Class' from")
    parser.add_argument("--lifetime-s", type=float, default=0.0, help="stop after this many seconds (0: never)")
    args = parser.parse_args(argv)
    sys.path[:0] = args.path
    try:
        import uvicorn
        from nemo_gym.base_resources_server import SimpleResourcesServer
        from nemo_gym.config_types import BaseServerConfig
        from nemo_gym.server_utils import ServerClient
        from omegaconf import OmegaConf
    except ImportError as err:
        _say(error=f"nemo-gym is not importable by {sys.executable} (Python {sys.version.split()[0]}): {err}")
        return NO_NEMO_GYM
    cls, example = _server_class(args.server, SimpleResourcesServer)
    sock = socket.create_server(("127.0.0.1", args.port))
    port = sock.getsockname()[1]
    config_cls = cls.model_fields["config"].annotation
    fields = {"host": "127.0.0.1", "port": port, "entrypoint": "", "name": args.server.replace(":", ".")}
    config = config_cls.model_validate(fields | json.loads(args.config))
    # A resources server calls no other server: its client points nowhere.
    client = ServerClient(head_server_config=BaseServerConfig(host="127.0.0.1", port=port), global_config_dict=OmegaConf.create({}))
    server = cls(config=config, server_client=client)
    app = server.setup_webserver()
    server.setup_liveness(app)
    threading.Thread(target=_watch, args=(os.getppid(), args.lifetime_s), daemon=True).start()
    _say(url=f"http://127.0.0.1:{port}", dataset=str(example) if example else None)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1)).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
