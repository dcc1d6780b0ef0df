"""`kafka-rebalance dev provision|up|status|down`: the local environment from the command line.

Progress and errors go to stderr; stdout carries only what scripts consume (`up --print-env`
prints `export ...` lines and nothing else, so `eval "$(kafka-rebalance dev up --print-env)"`
works). Exit codes: 0 success, 1 failure (which part, and its log tail, on stderr).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from typing import Any

from kafka_rebalance_dev.devenv.environment import (
    ALL_PARTS,
    STATE_DIR_ENV,
    AlreadyUp,
    DevEnvironment,
    PartiallyUp,
    resolve_state_dir,
)
from kafka_rebalance_dev.devenv.supervisor import StartupError


def _err(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def register(subparsers: Any) -> None:
    dev = subparsers.add_parser(
        "dev",
        help="provision and run the local Kafka broker and Kubernetes control plane",
        description="Local development environment: real Kafka (KRaft) and a real Kubernetes "
        "control plane (etcd, kube-apiserver, controller-manager, scheduler, KWOK) as processes.",
    )
    actions = dev.add_subparsers(dest="dev_command", required=True, metavar="ACTION")

    from kafka_rebalance_dev.devenv import provision as provisioning

    provision = actions.add_parser(
        "provision",
        help="download/build the pinned toolchain into ~/.cache/kafka-rebalance",
        description="Build or fetch the pinned toolchain (versions.toml) into the cache.",
    )
    provisioning.add_arguments(provision)
    provision.set_defaults(handler=provisioning.run_from_args)

    def with_state_dir(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--state-dir",
            help=f"where certs, data, logs and pids live (default: ${STATE_DIR_ENV} or ./.dev)",
        )

    up = actions.add_parser("up", help="start everything and wait until it is ready")
    with_state_dir(up)
    up.add_argument(
        "--print-env",
        action="store_true",
        help="print `export KUBECONFIG=... KAFKA_BOOTSTRAP_SERVERS=...` lines on stdout",
    )
    up.add_argument(
        "--only",
        choices=ALL_PARTS,
        action="append",
        help="start only this part (repeatable; default: all)",
    )
    up.add_argument("--timeout", type=float, default=240.0, help="seconds per readiness wait")
    up.add_argument("--kafka-version", help="broker version (default: versions.toml [kafka])")
    up.add_argument(
        "--kubelet",
        action="store_true",
        help="also start a real node (containerd, CNI bridge, kubelet) beside KWOK's; needs root "
        "and Debian's containerd, runc and containernetworking-plugins",
    )
    up.add_argument(
        "--broker-plugin",
        action="store_true",
        help="load the KIP-848 plan-following assignor (broker-plugin/) into the broker as its "
        "default server-side assignor, for apply.mode broker (docs/kip848.md)",
    )
    up.set_defaults(handler=_up)

    image = actions.add_parser(
        "image",
        help="build the project's image and load it into the real node (`up --kubelet`)",
        description="Build the Dockerfile (on the provisioned Debian base) with this "
        "environment's own dockerd, load the image into the real node's containerd and print "
        "its reference as the last line on stdout.",
    )
    with_state_dir(image)
    image.set_defaults(handler=_image)

    status = actions.add_parser("status", help="show each component's pid, ports and health")
    with_state_dir(status)
    status.set_defaults(handler=_status)

    down = actions.add_parser("down", help="stop exactly the processes `up` started")
    with_state_dir(down)
    down.add_argument("--grace", type=float, default=10.0, help="seconds before SIGKILL")
    down.set_defaults(handler=_down)


def _interrupted(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _up(args: argparse.Namespace) -> int:
    env = DevEnvironment(resolve_state_dir(args.state_dir))
    # A SIGTERM/SIGHUP mid-start must still stop what was started (KeyboardInterrupt unwinds).
    signal.signal(signal.SIGTERM, _interrupted)
    signal.signal(signal.SIGHUP, _interrupted)
    try:
        seconds = env.up(
            parts=args.only or ALL_PARTS,
            timeout=args.timeout,
            kafka_version=args.kafka_version,
            log=lambda message: _err(f"dev up: {message}"),
            kubelet=args.kubelet,
            broker_plugin=args.broker_plugin,
        )
    except AlreadyUp as exc:
        _err(f"dev up: {exc}; nothing to do")
    except PartiallyUp as exc:
        _err(f"dev up: {exc}")
        return 1
    except StartupError as exc:
        _err(f"dev up failed: {exc}")
        if exc.component != "toolchain":
            _err("dev up: stopped everything it had started")
        return 1
    except KeyboardInterrupt:
        _err("dev up: interrupted; stopped everything it had started")
        return 130
    else:
        _err(f"dev up: ready in {seconds:.1f}s (state in {env.state_dir})")
    if args.print_env:
        for line in env.env_lines():
            print(line)
    else:
        for line in env.env_lines():
            _err(f"  {line}")
    return 0


def _image(args: argparse.Namespace) -> int:
    from kafka_rebalance_dev.devenv import image
    from kafka_rebalance_dev.devenv.toolchain import toolchain

    started = time.monotonic()
    try:
        ref = image.build_and_load(
            resolve_state_dir(args.state_dir), toolchain(), log=lambda m: _err(f"dev {m}")
        )
    except image.ImageError as exc:
        _err(f"dev image failed: {exc}")
        return 1
    _err(f"dev image: ready in {time.monotonic() - started:.1f}s")
    print(ref)
    return 0


def _status(args: argparse.Namespace) -> int:
    env = DevEnvironment(resolve_state_dir(args.state_dir))
    rows = env.status()
    if not rows:
        print(f"not up (no processes recorded in {env.state_dir})")
        return 1
    listed = [(row, ",".join(f"{k}={v}" for k, v in row.ports.items())) for row in rows]
    width = max(34, *(len(ports) + 2 for _row, ports in listed))  # Kafka lists five ports
    print(f"{'COMPONENT':<26}{'PID':>8}  {'PORTS':<{width}}STATE")
    for row, ports in listed:
        state = "healthy" if row.healthy else ("UNHEALTHY" if row.running else "NOT RUNNING")
        print(f"{row.name:<26}{row.pid:>8}  {ports:<{width}}{state}")
    for line in env.env_lines():
        print(line)
    return 0 if all(r.healthy for r in rows) else 1


def _down(args: argparse.Namespace) -> int:
    env = DevEnvironment(resolve_state_dir(args.state_dir))
    started = time.monotonic()
    count, killed, still_open = env.down(grace=args.grace)
    if count == 0:
        _err(f"dev down: nothing recorded in {env.state_dir}; nothing to stop")
        return 0
    if killed:
        _err(f"dev down: {', '.join(killed)} ignored SIGTERM for {args.grace:.0f}s; killed")
    if still_open:
        _err(f"dev down: ports still listening: {still_open}")
        return 1
    _err(f"dev down: stopped {count} processes in {time.monotonic() - started:.1f}s")
    return 0
