"""How to add one of mathgym's extras, said the way this copy of mathgym was installed.

mathgym is installed from its repository (a clone or a git URL), not from a package index, so
``pip install "mathgym[train]"`` would look for another project of that name. pip records
where a distribution came from (``direct_url.json``, PEP 610); the hint repeats that source.
:func:`import_extra` imports an extra's module where it is first needed, or says how to add it.
"""

from __future__ import annotations

import importlib
import json
from importlib import metadata
from types import ModuleType
from urllib.parse import unquote, urlparse

from mathgym.errors import ConfigError

REPOSITORY = "https://github.com/mathgym/mathgym"


def install_source() -> tuple[str, bool]:
    """Where pip installed mathgym from (a local directory, a VCS URL, or the repository's URL),
    and whether it is an editable install."""
    # The first record that says where it came from (a source tree's own egg-info, found first
    # when Python starts inside the tree, has none).
    texts = (dist.read_text("direct_url.json") for dist in metadata.distributions(name="mathgym"))
    try:
        record = json.loads(next((text for text in texts if text), "{}"))
    except ValueError:
        record = {}
    if not isinstance(record, dict):
        record = {}
    url, vcs, folder = str(record.get("url", "")), record.get("vcs_info"), record.get("dir_info")
    if url.startswith("file://") and not isinstance(vcs, dict):
        path = unquote(urlparse(url).path)
        if not path.endswith((".whl", ".tar.gz", ".zip")):
            return path, isinstance(folder, dict) and folder.get("editable") is True
    elif isinstance(vcs, dict) and url:
        return f"{vcs.get('vcs', 'git')}+{url}", False
    return f"git+{REPOSITORY}", False


def extra_hint(*extras: str) -> str:
    """The pip command that adds ``extras`` to this mathgym, e.g. ``pip install "/src/mathgym[train]"``.

    >>> extra_hint("train").startswith("pip install ")
    True
    """
    names = ",".join(extras)
    source, editable = install_source()
    if "://" in source:
        return f'pip install "mathgym[{names}] @ {source}"'
    return f'pip install {"-e " if editable else ""}"{source}[{names}]"'


def import_extra(module: str, hint: str) -> ModuleType:
    """``module`` (an optional dependency, imported where it is first needed); where it is missing,
    a :class:`~mathgym.errors.ConfigError` that says ``hint`` (how to add it) and what failed.

    >>> import_extra("json", "never said").__name__
    'json'
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ConfigError(f"{hint} ({err})") from None
