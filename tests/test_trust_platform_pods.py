"""Issue 52: the platform's own pods as a scanner (checkov, kube-score) sees them.

The health reconciler and the kernel-log collector had no NetworkPolicy, the collector ran without a
seccomp profile and took the Loki password from an environment variable. Each now has a policy that
lets in only Prometheus (the collector: nothing) and out only what it talks to; the collector runs
under the runtime's default seccomp profile and reads the password from a file the Secret is mounted
as. No CNI runs here: the real API server judges the objects (accepted, read back unchanged) and the
pod's securityContext (Pod Security admission at `restricted` no longer names seccomp); what the
policies let through is our own check against the ports and labels the charts use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.compile.monitoring import COLLECTOR, GATEWAY_POD, LOKI_POD, LOKI_WRITER_SECRET, PROMETHEUS_POD
from tests.conftest import REPO, run

PROMETHEUS_PORT = 9090
"""Where kube-prometheus-stack's Prometheus listens, pod and Service."""
LOKI_PORT, GATEWAY_POD_PORT = 3100, 8080
"""Where the Loki chart's single binary and gateway pods listen (tests/test_trust_loki.py reads them
from `helm template` of the pinned chart)."""
CLUSTERS = ("dev", "prod-east", "prod-west")
DNS = {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
               "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
       "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}
API_SERVER = {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"ipBlock": {"cidr": "::/0"}}],
              "ports": [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 6443}]}


def _load(root: Path, cluster: str, *parts: str) -> dict[str, Any]:
    return dict(yaml.safe_load((root / "rendered" / cluster / Path(*parts)).read_text()))


def _in_monitoring(pods: dict[str, str]) -> dict[str, Any]:
    return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchLabels": pods}}


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_the_reconciler_talks_only_to_what_it_is_configured_for(cluster: str) -> None:
    policy = _load(REPO, cluster, "health", "networkpolicy-fleetgen-health.yaml")
    deploy = _load(REPO, cluster, "health", "deployment-fleetgen-health.yaml")
    pod = deploy["spec"]["template"]
    assert policy["metadata"]["namespace"] == deploy["metadata"]["namespace"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    (port,) = pod["spec"]["containers"][0]["ports"]
    # In: Prometheus in the monitoring namespace, to the metrics port (what the ServiceMonitor scrapes).
    assert policy["spec"]["ingress"] == [{"from": [_in_monitoring(PROMETHEUS_POD)],
                                          "ports": [{"protocol": "TCP", "port": port["containerPort"]}]}]
    # Out: DNS, the API server, and the pods behind the URLs of its policy, on their pods' ports.
    urls = yaml.safe_load(_load(REPO, cluster, "health", "configmap-fleetgen-health.yaml")["data"]["policy.json"])
    assert urls["prometheusUrl"].endswith(f".monitoring.svc:{PROMETHEUS_PORT}")
    assert urls["lokiUrl"].endswith(f".monitoring.svc.cluster.local:{LOKI_PORT}")
    assert policy["spec"]["egress"] == [
        DNS, API_SERVER,
        {"to": [_in_monitoring(PROMETHEUS_POD)], "ports": [{"protocol": "TCP", "port": PROMETHEUS_PORT}]},
        {"to": [_in_monitoring(LOKI_POD)], "ports": [{"protocol": "TCP", "port": LOKI_PORT}]}]


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_the_collector_takes_nothing_in_and_sends_only_to_the_gateway(cluster: str) -> None:
    policy = _load(REPO, cluster, "monitoring", f"networkpolicy-{COLLECTOR}.yaml")
    daemonset = _load(REPO, cluster, "monitoring", f"daemonset-{COLLECTOR}.yaml")
    assert policy["metadata"]["namespace"] == daemonset["metadata"]["namespace"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= \
        daemonset["spec"]["template"]["metadata"]["labels"].items()
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"] and "ingress" not in policy["spec"]
    assert policy["spec"]["egress"] == [
        DNS, {"to": [{"podSelector": {"matchLabels": GATEWAY_POD}}],
              "ports": [{"protocol": "TCP", "port": GATEWAY_POD_PORT}]}]
    config = yaml.safe_load(_load(REPO, cluster, "monitoring", f"configmap-{COLLECTOR}.yaml")["data"]["collector.yaml"])
    assert config["exporters"]["otlphttp/loki"]["endpoint"].startswith("http://loki-gateway.monitoring.svc")


def test_urls_the_cluster_file_sets_open_their_namespace_or_their_port(fleet_root: Path) -> None:
    """A Prometheus outside the cluster (its port to any address) and a Loki in another namespace
    (that namespace: the port its Service forwards to is not known here)."""
    path = fleet_root / "clusters/prod-east.yaml"
    assert "\nhealth:" not in path.read_text(), "test case out of date: the cluster has a health block"
    path.write_text(path.read_text() + "health:\n  prometheusUrl: https://prometheus.corp.net\n"
                    "  lokiUrl: http://loki-read.logging.svc.cluster.local:3100\n")
    assert run(fleet_root, "render").code == 0
    egress = _load(fleet_root, "prod-east", "health", "networkpolicy-fleetgen-health.yaml")["spec"]["egress"]
    assert egress[2:] == [
        {"to": API_SERVER["to"], "ports": [{"protocol": "TCP", "port": 443}]},
        {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "logging"}}}]}]


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_the_collector_reads_its_password_from_a_file_under_the_default_seccomp_profile(cluster: str) -> None:
    daemonset = _load(REPO, cluster, "monitoring", f"daemonset-{COLLECTOR}.yaml")
    spec = daemonset["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "LOKI_PASSWORD" not in yaml.safe_dump(daemonset) and all("valueFrom" not in e or "fieldRef" in e["valueFrom"]
                                                                    for e in container["env"])
    volumes = {v["name"]: v for v in spec["volumes"]}
    (mount,) = [m for m in container["volumeMounts"] if "secret" in volumes[m["name"]]]
    secret = volumes[mount["name"]]["secret"]
    assert secret["secretName"] == LOKI_WRITER_SECRET and mount["readOnly"] is True
    (item,) = secret["items"]
    assert item["key"] == "password" and secret["defaultMode"] == 0o400
    config = yaml.safe_load(_load(REPO, cluster, "monitoring", f"configmap-{COLLECTOR}.yaml")["data"]["collector.yaml"])
    password = config["extensions"]["basicauth/loki"]["client_auth"]["password"]
    assert password == f"${{file:{mount['mountPath']}/{item['path']}}}"


PASSWORDS = ["s3cr3t", "123456", "yes", "null", "~", "0x1F", "+/aB0==", "a: b", "[x]", "#x", "p@ss word",
             "s3cr3t\n"]
"""What `openssl rand -base64` makes, and what YAML would read as a number, a boolean, nothing, a map,
a list or a comment: the collector must log in with the file's bytes, a trailing newline included."""


@pytest.mark.parametrize("cluster", ["prod-east", "prod-west"])  # the upstream and the journald collector
def test_the_collector_logs_in_with_the_bytes_of_the_mounted_secret(upstream_tools: None, tmp_path: Path,
                                                                     cluster: str) -> None:
    """The real collector's resolver (confmap v1.45.0, as contrib 0.139.0 links it, with its env and
    file providers) resolves the rendered configuration; only the mounted file's path is moved into
    the test's folder. A LOKI_PASSWORD left in the environment is not what it logs in with."""
    import json
    import os
    import subprocess

    from tests.upstream import tools

    spec = _load(REPO, cluster, "monitoring", f"daemonset-{COLLECTOR}.yaml")["spec"]["template"]["spec"]
    mounts = [m["mountPath"] for m in spec["containers"][0]["volumeMounts"] if m["mountPath"].startswith("/secrets/")]
    assert len(mounts) == 1, f"the collector mounts no password file: {spec['containers'][0]['volumeMounts']}"
    mounted = f"{mounts[0]}/password"
    text = _load(REPO, cluster, "monitoring", f"configmap-{COLLECTOR}.yaml")["data"]["collector.yaml"]
    assert text.count(mounted) == 1, "the configuration does not read the mounted password file"
    config = tmp_path / "collector.yaml"
    config.write_text(text.replace(mounted, str(tmp_path / "password")))
    env = {**os.environ, "K8S_NODE_NAME": "gpu-1", "LOKI_PASSWORD": "from-the-environment"}
    for password in PASSWORDS:
        (tmp_path / "password").write_text(password)
        proc = subprocess.run([str(tools.binary("otelcol-config")), str(config), "basicauth/loki"], env=env,
                              capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == {"username": "kernel-logs", "password": password}, password


# --- judged by the real API server -------------------------------------------------------------

@pytest.fixture(scope="module")
def platform_stack(upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tests.upstream.cluster import Stack

    stack = Stack.start(tmp_path_factory.mktemp("platform-pods"), upstream_etcd, platform=False)  # no Kueue
    yield stack
    stack.stop()


@pytest.mark.upstream
@pytest.mark.parametrize("cluster", CLUSTERS)
def test_the_api_server_keeps_the_policies_as_rendered(platform_stack: Any, cluster: str) -> None:
    """Server-side applied with strict field validation, as Argo CD and Flux apply them, and read back
    with the same spec (anything the API server drops or defaults would keep GitOps out of sync)."""
    from tests.upstream.fleet import apply

    for folder, name in (("health", "fleetgen-health"), ("monitoring", COLLECTOR)):
        namespace = _load(REPO, cluster, "health", "namespace-fleetgen-system.yaml") if folder == "health" else \
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "monitoring"}}
        apply(platform_stack, namespace)
        rendered = _load(REPO, cluster, folder, f"networkpolicy-{name}.yaml")
        back = platform_stack.dynamic().resources.get(api_version="networking.k8s.io/v1", kind="NetworkPolicy").get(
            name=apply(platform_stack, rendered)["metadata"]["name"], namespace=rendered["metadata"]["namespace"])
        assert back.to_dict()["spec"] == rendered["spec"], (cluster, name)


@pytest.mark.upstream
@pytest.mark.parametrize("cluster", ["prod-east", "prod-west"])  # the file and the journald collector
def test_pod_security_finds_no_seccomp_gap_in_the_collector(platform_stack: Any, cluster: str) -> None:
    """The collector must stay root with the host's log mounted, so it cannot meet `restricted`; but the
    real Pod Security admission must no longer name its seccomp profile among the reasons."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from tests.upstream.fleet import apply

    namespace = f"restricted-{cluster}"
    apply(platform_stack, {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": namespace, "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
    account = _load(REPO, cluster, "monitoring", f"serviceaccount-{COLLECTOR}.yaml")
    apply(platform_stack, {**account, "metadata": {**account["metadata"], "namespace": namespace}})
    spec = _load(REPO, cluster, "monitoring", f"daemonset-{COLLECTOR}.yaml")["spec"]["template"]["spec"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "collector"}, "spec": spec}
    with pytest.raises(ApiException) as refused:
        client.CoreV1Api(platform_stack.client()).create_namespaced_pod(namespace, pod, dry_run="All")
    body = str(refused.value.body)
    assert refused.value.status == 403 and 'violates PodSecurity \\"restricted:latest\\"' in body, body
    assert "restricted volume types" in body and "runAsNonRoot" in body  # what it needs, still named
    assert "seccompProfile" not in body, body
