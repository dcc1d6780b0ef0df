"""`kafka-rebalance dev image`: build the project's image and load it into the real node.

The Dockerfile is the one users build with `docker build .`; only its base differs here: no
registry is reachable, so the base is the provisioned Debian root filesystem
(provision/debian_base.py), imported as `kafka-rebalance-base:<suite>` and passed as the
PYTHON_IMAGE build argument.

The builder is Debian's Docker engine as an instance of this environment's own: a `dockerd` with
its data, exec root, socket and pidfile under `<state>/docker/`, running its containers on the
node's containerd (namespace `moby`), with no bridge, no iptables rules and no IP forwarding.
It runs only for the build and is stopped afterwards. A built image is saved under the cache,
keyed by a digest of everything that goes into it (Dockerfile, build context, base), so an
unchanged tree loads in seconds without starting Docker at all.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from kafka_rebalance_dev.devenv import mounts, node, system_packages
from kafka_rebalance_dev.devenv.processes import StateFile
from kafka_rebalance_dev.devenv.provision.frame import cache_lock
from kafka_rebalance_dev.devenv.supervisor import StartupError, Supervisor
from kafka_rebalance_dev.devenv.toolchain import REPO_ROOT, Toolchain

REPOSITORY = "kafka-rebalance-operator"
# What the Dockerfile copies (keep in step with it and .dockerignore).
CONTEXT = ("Dockerfile", "pyproject.toml", "README.md", "assignors", "common", "kafka_rebalance",
           "operator", "sidecar")  # fmt: skip
SKIPPED = ("__pycache__", ".egg-info", ".pyc")


class ImageError(RuntimeError):
    """The image could not be built or loaded; the message says which step and why."""


def context_digest(root: Path = REPO_ROOT, base_marker: str = "") -> str:
    """sha256 over the build context's paths and contents (and the base's identity)."""
    digest = hashlib.sha256(base_marker.encode())
    for top in CONTEXT:
        path = root / top
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for f in files:
            rel = f.relative_to(root).as_posix()
            if any(part in rel for part in SKIPPED):
                continue
            digest.update(rel.encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()


def git_revision(root: Path = REPO_ROOT) -> str:
    proc = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    )
    return proc.stdout.strip() or "unknown"


def source_url(root: Path = REPO_ROOT) -> str:
    """The repository's `origin` URL, else the local checkout (the project has no public URL)."""
    proc = subprocess.run(
        ["git", "-C", str(root), "remote", "get-url", "origin"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return proc.stdout.strip() or f"file://{root}"


def _docker_binaries() -> tuple[str, str]:
    """dockerd and the docker CLI of the same package (a newer CLI elsewhere on PATH may
    default to BuildKit, which would try to pull the Dockerfile frontend from a registry)."""
    dockerd = system_packages.command("dockerd")
    cli = Path(dockerd).parent.parent / "bin" / "docker"
    return dockerd, str(cli if cli.exists() else system_packages.command("docker"))


def _run(cmd: list[str], log: Path, *, env: dict[str, str], timeout: float = 1800) -> str:
    with log.open("a") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        proc = subprocess.run(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
            timeout=timeout, check=False,
        )  # fmt: skip
        fh.write(proc.stdout)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-20:])
        raise ImageError(
            f"`{' '.join(cmd[:3])} ...` failed (exit {proc.returncode}; log {log}):\n{tail}"
        )
    return proc.stdout


def docker_build(
    state_dir: Path,
    info: dict[str, object],
    tools: Toolchain,
    ref: str,
    out: Path,
    log: Callable[[str], None],
) -> None:
    """Start this environment's dockerd, build `ref` on the Debian base, `docker save` it."""
    gone = system_packages.missing(system_packages.IMAGE_PACKAGES)
    if gone:
        raise ImageError(system_packages.hint(gone))
    if not tools.debian_base_tarball.exists():
        raise ImageError(
            f"the Debian base is not provisioned ({tools.debian_base_tarball}); "
            "run `kafka-rebalance dev provision --only debian-base` (as root)"
        )
    dockerd, docker = _docker_binaries()
    home = state_dir / "docker"
    home.mkdir(parents=True, exist_ok=True)
    sock = home / "docker.sock"
    supervisor = _start_dockerd(state_dir, info, dockerd, home, sock)
    env = {**os.environ, "DOCKER_HOST": f"unix://{sock}", "DOCKER_BUILDKIT": "0"}
    env.pop("DOCKER_CONTEXT", None)
    try:
        supervisor.wait_until(
            "dockerd",
            lambda: (
                subprocess.run(
                    [docker, "version"], env=env, capture_output=True, timeout=10
                ).returncode
                == 0
            ),
            timeout=60,
            what="serving its API",
        )
        _build_and_save(docker, env, tools, ref, out, home / "build.log", log)
    finally:
        supervisor.stop_one("dockerd")
        mounts.unmount_under(home)  # its exec root's netns bind mount, if it left it


def _start_dockerd(
    state_dir: Path, info: dict[str, object], dockerd: str, home: Path, sock: Path
) -> Supervisor:
    """dockerd with everything under `home`, on the node's containerd (namespace `moby`), with
    no bridge, iptables rules or IP forwarding; recorded in the environment's state file, so
    `dev down` stops it too if the build is interrupted."""
    supervisor = Supervisor(StateFile(state_dir / "state.json"), extra={
        k: v for k, v in info.items() if k != "processes"})  # fmt: skip
    supervisor.records = StateFile(state_dir / "state.json").records()
    supervisor.start(
        "dockerd",
        [
            dockerd,
            f"--data-root={home / 'data'}",
            f"--exec-root={home / 'exec'}",
            f"--pidfile={home / 'docker.pid'}",
            f"--host=unix://{sock}",
            f"--containerd={info['containerd_socket']}",
            "--containerd-namespace=moby",
            "--containerd-plugins-namespace=moby-plugins",
            "--bridge=none",
            "--iptables=false",
            "--ip6tables=false",
            "--ip-masq=false",
            "--ip-forward=false",
            "--userland-proxy=false",
            "--log-level=warn",
        ],
        home / "dockerd.log",
    )
    return supervisor


def _build_and_save(
    docker: str,
    env: dict[str, str],
    tools: Toolchain,
    ref: str,
    out: Path,
    build_log: Path,
    log: Callable[[str], None],
) -> None:
    """Import the Debian base, build the Dockerfile on it as `ref`, save `ref` to `out` (written
    under a temporary name, then renamed: a half-saved archive is never taken for a build)."""
    base = f"kafka-rebalance-base:{tools.debian_suite}"
    started = time.monotonic()
    _run(
        [docker, "import", "--change", "ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:"
         "/usr/bin:/sbin:/bin", "--change", "ENV LANG=C.UTF-8", "--change",
         'CMD ["python3"]', str(tools.debian_base_tarball), base],
        build_log, env=env,
    )  # fmt: skip
    log(f"image: base {base} imported in {time.monotonic() - started:.1f}s")
    started = time.monotonic()
    _run(
        [docker, "build", "--network=host", "--force-rm", f"--build-arg=PYTHON_IMAGE={base}",
         f"--build-arg=REVISION={git_revision()}", f"--build-arg=SOURCE_URL={source_url()}",
         "-t", ref, str(REPO_ROOT)],
        build_log, env=env,
    )  # fmt: skip
    log(f"image: {ref} built in {time.monotonic() - started:.1f}s")
    tmp = out.with_suffix(f".tmp-{os.getpid()}")
    _run([docker, "save", "-o", str(tmp), ref], build_log, env=env)
    tmp.rename(out)


KEEP_ARCHIVES = 3


def prune_archives(directory: Path, keep: int = KEEP_ARCHIVES) -> None:
    """Keep the newest few saved images (each a few hundred MB); older trees rebuild."""
    archives = sorted(directory.glob("dev-*.tar"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in archives[keep:]:
        old.unlink(missing_ok=True)


def build_and_load(
    state_dir: Path, tools: Toolchain, log: Callable[[str], None] = lambda m: None
) -> str:
    """Build (or reuse) the image for the current tree, load it into the node; return its ref."""
    state = StateFile(state_dir / "state.json")
    info = state.load()
    socket = info.get("containerd_socket")
    if not socket:
        raise ImageError(
            f"no real node in {state_dir}: run `kafka-rebalance dev up --kubelet` first"
        )
    base_marker = ""
    marker = tools.debian_base_dir / ".provisioned"
    if marker.exists():
        base_marker = marker.read_text()
    tag = "dev-" + context_digest(base_marker=base_marker)[:16]
    ref = f"{REPOSITORY}:{tag}"
    archive = tools.image_cache / f"{tag}.tar"
    tools.image_cache.mkdir(parents=True, exist_ok=True)
    with cache_lock(tools.image_cache):
        if archive.exists():
            log(f"image: {ref} unchanged since its last build; reusing {archive}")
        else:
            try:
                docker_build(state_dir, info, tools, ref, archive, log)
                prune_archives(tools.image_cache)
            except StartupError as exc:
                raise ImageError(str(exc)) from exc
    started = time.monotonic()
    node.import_image(Path(str(socket)), archive)
    log(f"image: loaded into the node in {time.monotonic() - started:.1f}s")
    return ref
