"""The local base image of Terminal-v0, built where no image can be pulled.

A Debian root file system made with Debian's own tool (``debootstrap --variant=minbase``, from
the distribution's package mirror, which apt reaches where registries do not) with Python 3 and
pytest, imported as an image (``tar | podman import``). About 160 MB; three minutes on two cores::

    python -m mathgym.rewards.sandbox.container_image                 # localhost/mathgym/debian:bookworm
    python -m mathgym.rewards.sandbox.container_image --rootfs DIR    # import a root fs made elsewhere

Needs root (debootstrap, chroot) and ``apt-get install debootstrap podman``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from mathgym.rewards.sandbox.container import ContainerError, ContainerRuntime, find_runtime

#: The image Terminal-v0 builds its tasks on where their Dockerfile's base cannot be pulled.
BASE_IMAGE = "localhost/mathgym/debian:bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
#: Packages beyond minbase: what terminal-bench's and Harbor's test scripts call.
PACKAGES = ("python3", "python3-pytest")


def make_rootfs(target: Path, suite: str = "bookworm", mirror: str = DEFAULT_MIRROR) -> None:
    """A minimal Debian root file system in ``target`` (debootstrap), caches and docs removed."""
    if shutil.which("debootstrap") is None:
        raise ContainerError("debootstrap is not installed: apt-get install debootstrap")
    done = subprocess.run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", suite, str(target), mirror],
                          capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise ContainerError(f"debootstrap failed: {done.stderr.strip()[-500:] or done.stdout.strip()[-500:]}")
    for folder in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man"):
        for item in (target / folder).glob("*"):
            if item.is_file():
                item.unlink()
            elif item.is_dir():
                shutil.rmtree(item, ignore_errors=True)


def import_rootfs(runtime: ContainerRuntime, rootfs: Path, tag: str = BASE_IMAGE) -> None:
    """Import the root file system ``rootfs`` as image ``tag``."""
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    try:
        done = subprocess.run(runtime.command("import", "--change", 'CMD ["/bin/bash"]', "-", tag),
                              stdin=tar.stdout, capture_output=True, timeout=900, check=False)
    finally:
        tar.wait()
    if done.returncode != 0:
        raise ContainerError(f"{runtime.name} import failed: {done.stderr.decode(errors='replace')[-500:]}")


def runtime_for_building() -> ContainerRuntime:
    """A runtime able to import images (its probe needs no image: any image name will do)."""
    probe = find_runtime("localhost/mathgym/none:probe")
    if probe.runtime is not None:
        return probe.runtime
    for name in ("podman", "docker"):
        binary = shutil.which(name)
        if binary and subprocess.run([binary, "info"], capture_output=True, timeout=60, check=False).returncode == 0:
            return ContainerRuntime(name, binary)
    raise ContainerError(f"no container runtime works here: {probe.reason}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mathgym.rewards.sandbox.container_image", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", default=BASE_IMAGE, help="the image's name")
    parser.add_argument("--rootfs", type=Path, help="import this root file system instead of making one")
    parser.add_argument("--suite", default="bookworm", help="Debian suite for debootstrap")
    parser.add_argument("--mirror", default=DEFAULT_MIRROR, help="Debian package mirror")
    parser.add_argument("--force", action="store_true", help="build it again when it is there already")
    args = parser.parse_args(argv)
    try:
        runtime = runtime_for_building()
        if runtime.has_image(args.tag) and not args.force:
            print(f"{args.tag} is there already (--force builds it again)")
            return 0
        if args.rootfs is not None:
            import_rootfs(runtime, args.rootfs, args.tag)
        else:
            with tempfile.TemporaryDirectory(prefix="mathgym-rootfs-", dir="/var/tmp") as tmp:
                make_rootfs(Path(tmp) / "root", args.suite, args.mirror)
                import_rootfs(runtime, Path(tmp) / "root", args.tag)
    except (ContainerError, OSError, subprocess.TimeoutExpired) as err:
        print(f"mathgym: the base image was not built: {err}", file=sys.stderr)
        return 1
    print(f"built {args.tag} with {runtime.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
