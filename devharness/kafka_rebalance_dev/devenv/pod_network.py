"""The real node's pod network: one Linux bridge and one /24 per environment.

Pods get addresses from 10.213.<n>.0/24 on a bridge `kro-pods<n>` that `dev up --kubelet`
creates and `dev down` deletes; the host's address on it (10.213.<n>.1) is where pods reach the
broker's pod listener and the API server's forwarder. <n> is the first index whose bridge does
not exist and whose subnet appears nowhere in the routing tables, so two environments (or a
subnet the machine already uses) never collide; creating the bridge is the claim, because the
kernel refuses a second link of the same name.

Pods get no default route (CNI `isDefaultGateway: false`): the subnet is all they can reach, so
their traffic never leaves the bridge, and the host's firewall and forwarding are not touched.
"""

from __future__ import annotations

import ipaddress
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kafka_rebalance_dev.devenv import system_packages

PREFIX = "10.213"
BRIDGE_STEM = "kro-pods"
MAX_INDEX = 250


class PodNetworkError(RuntimeError):
    """No free subnet, or `ip` refused to create the bridge."""


@dataclass(frozen=True)
class PodNetwork:
    index: int

    @property
    def bridge(self) -> str:
        return f"{BRIDGE_STEM}{self.index}"

    @property
    def subnet(self) -> str:
        return f"{PREFIX}.{self.index}.0/24"

    @property
    def gateway(self) -> str:
        return f"{PREFIX}.{self.index}.1"

    @property
    def network_name(self) -> str:
        return f"kafka-rebalance-{self.index}"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [system_packages.command("ip"), *args], capture_output=True, text=True, check=check
    )


ROUTE_TYPES = frozenset(
    {"unicast", "local", "broadcast", "multicast", "anycast", "blackhole", "unreachable",
     "prohibit", "throw", "nat"}
)  # fmt: skip


def subnet_in_use(subnet: str, routes: str) -> bool:
    """Whether any route's destination in `ip route show table all` output overlaps `subnet`.

    The destination is the first word (the second after a route type such as `local`); the
    default route covers everything and says nothing about who uses a subnet, so it is skipped.
    """
    mine = ipaddress.ip_network(subnet)
    for line in routes.splitlines():
        words = line.split()
        if words and words[0] in ROUTE_TYPES:
            words = words[1:]
        if not words or words[0] == "default":
            continue
        try:
            other = ipaddress.ip_network(words[0], strict=False)
        except ValueError:
            continue
        if other.version == 4 and other.overlaps(mine):
            return True
    return False


def claim() -> PodNetwork:
    """Create the bridge of the first free index, with the gateway address, and bring it up."""
    routes = _ip("-4", "route", "show", "table", "all").stdout
    for index in range(1, MAX_INDEX):
        network = PodNetwork(index)
        if subnet_in_use(network.subnet, routes):
            continue
        made = _ip("link", "add", "name", network.bridge, "type", "bridge", check=False)
        if made.returncode != 0:
            if "exists" in made.stderr:
                continue
            raise PodNetworkError(f"cannot create bridge {network.bridge}: {made.stderr.strip()}")
        try:
            _ip("addr", "add", f"{network.gateway}/24", "dev", network.bridge)
            _ip("link", "set", network.bridge, "up")
        except subprocess.CalledProcessError as exc:
            release(network.bridge)
            raise PodNetworkError(f"cannot set up {network.bridge}: {exc.stderr.strip()}") from exc
        return network
    raise PodNetworkError(f"no free /24 in {PREFIX}.0.0/16 for a pod network")


def release(bridge: str) -> None:
    """Delete the bridge (its veths went with the pods); a missing bridge is fine."""
    if bridge.startswith(BRIDGE_STEM):
        _ip("link", "del", bridge, check=False)


def cni_conflist(network: PodNetwork, ipam_dir: Path) -> dict[str, object]:
    """The CNI config containerd reads: the bridge plugin with host-local addresses.

    IPAM state lives in the environment's directory (not /var/lib/cni), and no masquerading or
    default route is set up, so nothing outside the environment changes.
    """
    return {
        "cniVersion": "1.0.0",
        "name": network.network_name,
        "plugins": [
            {
                "type": "bridge",
                "bridge": network.bridge,
                "isGateway": True,
                "isDefaultGateway": False,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(ipam_dir),
                    "ranges": [[{"subnet": network.subnet, "gateway": network.gateway}]],
                },
            }
        ],
    }
