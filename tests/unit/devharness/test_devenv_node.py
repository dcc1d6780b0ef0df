"""The pure parts of the real node (`dev up --kubelet`) and `dev image`: configs, the pod network
choice, the sandbox image archive, the image cache key. The daemons themselves run in
tests/integration/test_real_pods.py."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
from kafka_rebalance_dev.devenv import image, node, pod_network, system_packages
from kafka_rebalance_dev.devenv.provision import pause
from kafka_rebalance_dev.devenv.toolchain import toolchain

ROUTES = """\
default via 192.0.2.1 dev eth0
192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2
10.213.1.0/24 dev kro-pods1 proto kernel scope link src 10.213.1.1
local 10.213.1.1 dev kro-pods1 table local proto kernel scope host src 10.213.1.1
broadcast 10.213.1.255 dev kro-pods1 table local proto kernel scope link src 10.213.1.1
"""


def test_a_subnet_is_in_use_when_any_route_overlaps_it_but_not_because_of_the_default_route():
    assert pod_network.subnet_in_use("10.213.1.0/24", ROUTES)
    assert not pod_network.subnet_in_use("10.213.2.0/24", ROUTES)
    assert pod_network.subnet_in_use("10.0.0.0/8", ROUTES)  # covers 10.213.1.0/24
    assert not pod_network.subnet_in_use("10.213.2.0/24", "default via 10.213.2.1 dev eth0\n")


def test_the_pod_network_keeps_pods_on_their_bridge():
    network = pod_network.PodNetwork(7)
    assert (network.bridge, network.subnet, network.gateway) == (
        "kro-pods7",
        "10.213.7.0/24",
        "10.213.7.1",
    )
    assert len(network.bridge) <= 15  # Linux interface names
    config = pod_network.cni_conflist(network, Path("/state/ipam"))
    bridge = config["plugins"][0]
    assert bridge["bridge"] == "kro-pods7"
    # No default route and no NAT: a pod reaches its subnet (the gateway) and nothing else.
    assert bridge["isDefaultGateway"] is False and bridge["ipMasq"] is False
    assert bridge["ipam"]["dataDir"] == "/state/ipam"  # not the machine's /var/lib/cni
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.213.7.0/24", "gateway": "10.213.7.1"}]]


def test_release_never_deletes_an_interface_that_is_not_a_pod_bridge(monkeypatch):
    calls = []
    monkeypatch.setattr(pod_network, "_ip", lambda *a, **k: calls.append(a))
    pod_network.release("eth0")
    pod_network.release("kro-pods3")
    assert calls == [("link", "del", "kro-pods3")]


def test_containerd_config_keeps_everything_in_the_state_dir_with_the_settings_found_by_trial():
    text = node.containerd_config(Path("/state/node"), Path("/usr/lib/cni"), "/usr/sbin/runc")
    assert "restrict_oom_score_adj = true" in text
    assert 'address = "/state/node/containerd/containerd.sock"' in text
    assert 'root = "/state/node/containerd/root"' in text
    assert 'Root = "/state/node/containerd/runc"' in text
    assert 'conf_dir = "/state/node/cni/net.d"' in text
    assert f'sandbox_image = "{pause.image_name("1")}"' in text
    assert "/var/lib/containerd" not in text and "/run/containerd" not in text


def test_kubelet_config_has_the_cgroup_v1_settings_and_admits_only_the_environments_certificates():
    ca = Path("/state/control-plane/pki/ca.crt")
    config = node.kubelet_config(Path("/state/node"), "10.213.4.1", 10250, 10248, ca)
    assert config["failCgroupV1"] is False
    assert config["cgroupDriver"] == "cgroupfs"
    assert config["cgroupsPerQOS"] is False
    assert config["enforceNodeAllocatable"] == []
    assert config["failSwapOn"] is False
    # The API on the bridge address (the node's InternalIP), health on loopback only.
    assert config["address"] == "10.213.4.1" and config["healthzBindAddress"] == "127.0.0.1"
    # Pods reach the bridge address: no anonymous access, only the environment's CA.
    assert config["authentication"] == {
        "anonymous": {"enabled": False},
        "webhook": {"enabled": False},
        "x509": {"clientCAFile": str(ca)},
    }
    assert config["readOnlyPort"] == 0
    assert config["containerRuntimeEndpoint"] == "unix:///state/node/containerd/containerd.sock"


def test_chart_values_add_only_the_api_address_and_the_node_never_the_security_context():
    values = node.chart_values("10.213.4.1", 6443)
    assert set(values) == {"extraEnv", "nodeSelector"}
    env = {e["name"]: e["value"] for e in values["extraEnv"]}
    assert env == {"KUBERNETES_SERVICE_HOST": "10.213.4.1", "KUBERNETES_SERVICE_PORT": "6443"}


def test_the_pause_archive_is_an_oci_layout_ctr_can_import_under_its_name():
    archive = pause.oci_archive(b"\x7fELF-not-really", "localhost/kafka-rebalance-pause:1")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    index = json.loads(files["index.json"])
    descriptor = index["manifests"][0]
    assert descriptor["annotations"]["io.containerd.image.name"] == (
        "localhost/kafka-rebalance-pause:1"
    )
    manifest_bytes = files[f"blobs/sha256/{descriptor['digest'].split(':')[1]}"]
    assert hashlib.sha256(manifest_bytes).hexdigest() == descriptor["digest"].split(":")[1]
    manifest = json.loads(manifest_bytes)
    config = json.loads(files[f"blobs/sha256/{manifest['config']['digest'].split(':')[1]}"])
    assert config["config"]["Entrypoint"] == ["/pause"]
    layer_digest = manifest["layers"][0]["digest"]
    assert config["rootfs"]["diff_ids"] == [layer_digest]  # uncompressed: diff id = digest
    layer = files[f"blobs/sha256/{layer_digest.split(':')[1]}"]
    with tarfile.open(fileobj=io.BytesIO(layer)) as layer_tar:
        member = layer_tar.getmember("pause")
        assert member.mode == 0o755
        assert layer_tar.extractfile(member).read() == b"\x7fELF-not-really"


def _context(root: Path) -> None:
    for top in image.CONTEXT:
        if top in ("Dockerfile", "pyproject.toml", "README.md"):
            (root / top).write_text(top)
        else:
            (root / top / "pkg").mkdir(parents=True)
            (root / top / "pkg" / "mod.py").write_text("x = 1\n")


def test_the_image_cache_key_follows_sources_and_base_but_not_bytecode(tmp_path):
    _context(tmp_path)
    first = image.context_digest(tmp_path, "base-1")
    (tmp_path / "sidecar" / "pkg" / "__pycache__").mkdir()
    (tmp_path / "sidecar" / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"x")
    assert image.context_digest(tmp_path, "base-1") == first
    assert image.context_digest(tmp_path, "base-2") != first
    (tmp_path / "operator" / "pkg" / "mod.py").write_text("x = 2\n")
    assert image.context_digest(tmp_path, "base-1") != first


def test_the_image_context_is_what_the_dockerfile_copies():
    dockerfile = (image.REPO_ROOT / "Dockerfile").read_text()
    for top in image.CONTEXT:
        if top != "Dockerfile":
            assert f"COPY {top}" in dockerfile or f" {top} " in dockerfile, top


def test_dev_image_without_a_real_node_says_what_to_run(tmp_path):
    with pytest.raises(image.ImageError, match="dev up --kubelet"):
        image.build_and_load(tmp_path, toolchain())


def test_missing_system_packages_are_named_with_both_ways_to_get_them():
    line = system_packages.hint(["containerd", "runc"])
    assert "\n" not in line
    assert "apt-get install containerd runc" in line
    assert "KAFKA_REBALANCE_INSTALL_SYSTEM_PACKAGES=1" in line


def test_only_log_links_into_our_own_pod_logs_are_removed(tmp_path):
    links = tmp_path / "containers"
    links.mkdir()
    ours, theirs = tmp_path / "state" / "pod-logs", tmp_path / "other" / "pod-logs"
    (links / "a.log").symlink_to(ours / "ns_a_uid" / "c" / "0.log")
    (links / "b.log").symlink_to(theirs / "ns_b_uid" / "c" / "0.log")
    (links / "c.log").write_text("a plain file")
    node.remove_log_links(ours, links)
    assert sorted(p.name for p in links.iterdir()) == ["b.log", "c.log"]
