"""Issue 28: who can make a node look faulty through the kernel log.

One OTLP push naming a node cordoned it: Loki ran with `auth_enabled: false` and nothing limited
who reached it. Now Loki is multi-tenant (the real Loki v3.7.8, with the config its chart makes of
our values, refuses a push without a tenant, and the reconciler reads only the kernel-log tenant),
the chart's gateway makes the logged-in user the tenant, and NetworkPolicies admit only the
collector to the gateway and only the gateway, Grafana, Prometheus, Loki itself and the
reconciler's namespace to Loki. No CNI runs here: the NetworkPolicies are checked against the
chart's pod labels (`helm template`), not enforced.
"""

from __future__ import annotations

import json
import urllib.error
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.compile.monitoring import COLLECTOR, KERNEL_LOG_TENANT, LOKI_HTPASSWD_SECRET, LOKI_WRITER_SECRET
from generator.reconciler.sources import LokiSource
from tests.conftest import REPO
from tests.upstream.loki_server import CLUSTER, HARDWARE, LokiServer, Receiver, collector_resource, find, loki_chart
from tests.upstream.processes import wait_or_fail

pytestmark = pytest.mark.usefixtures("upstream_tools")


def _monitoring(name: str) -> dict[str, Any]:
    return dict(yaml.safe_load((REPO / "rendered" / CLUSTER / "monitoring" / name).read_text()))


def test_a_forged_line_never_reaches_the_reconciler(tmp_path: Path) -> None:
    docs = loki_chart(tmp_path)
    receiver = Receiver()
    (tmp_path / "loki").mkdir()
    loki = LokiServer(tmp_path / "loki", docs, {}, receiver.url, receiver.url + "/api/v1/write").start()
    try:
        assert loki.tenant == KERNEL_LOG_TENANT
        with pytest.raises(urllib.error.HTTPError) as refused:  # straight to Loki, no tenant: refused
            loki.push_otlp(collector_resource(CLUSTER, "gpu-victim"), [HARDWARE], tenant=None)
        assert refused.value.code == 401 and b"no org id" in refused.value.read()
        loki.push_otlp(collector_resource(CLUSTER, "gpu-victim"), [HARDWARE], tenant="attacker")  # another tenant
        loki.push_otlp(collector_resource(CLUSTER, "gpu-real"), [HARDWARE])  # the collector's tenant
        source = LokiSource(loki.url, tenant=KERNEL_LOG_TENANT)
        observed = wait_or_fail(
            lambda: (o := source.observe(["gpu-victim", "gpu-real"])) and o["gpu-real"].evidence and o, 30,
            "the collector's line visible to the reconciler")
    finally:
        loki.stop()
        receiver.close()
    assert observed["gpu-real"].state == "faulty"
    assert observed["gpu-victim"].state == "healthy" and not observed["gpu-victim"].evidence


def test_the_gateway_makes_the_logged_in_user_the_tenant(tmp_path: Path) -> None:
    """The chart's nginx: basic auth from a Secret kept out of git, and X-Scope-OrgID set from the
    user on every location, so a client's own header cannot choose the tenant."""
    docs = loki_chart(tmp_path)
    gateway = find(docs, "Deployment", "loki-gateway")
    volumes = {v["name"]: v for v in gateway["spec"]["template"]["spec"]["volumes"]}
    assert any((v.get("secret") or {}).get("secretName") == LOKI_HTPASSWD_SECRET for v in volumes.values())
    nginx = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "loki-gateway")
    conf = nginx["data"]["nginx.conf"]
    assert "auth_basic_user_file /etc/nginx/secrets/.htpasswd;" in conf
    locations = conf.count("location ")
    assert locations > 3 and conf.count("proxy_set_header X-Scope-OrgID $remote_user;") >= locations - 1
    # The collector logs in as the tenant's user, its password from a Secret kept out of git.
    collector = yaml.safe_load(_monitoring(f"configmap-{COLLECTOR}.yaml")["data"]["collector.yaml"])
    assert collector["extensions"]["basicauth/loki"]["client_auth"]["username"] == KERNEL_LOG_TENANT
    assert collector["exporters"]["otlphttp/loki"]["auth"] == {"authenticator": "basicauth/loki"}
    daemonset = _monitoring(f"daemonset-{COLLECTOR}.yaml")["spec"]["template"]["spec"]
    secrets = [v["secret"] for v in daemonset["volumes"] if "secret" in v]
    assert [s["secretName"] for s in secrets] == [LOKI_WRITER_SECRET]  # mounted as a file, never in env


def _ports(workload: dict[str, Any]) -> dict[str, int]:
    """Container port by name, over the pod's containers."""
    return {p["name"]: p["containerPort"] for c in workload["spec"]["template"]["spec"]["containers"]
            for p in c.get("ports", []) if "name" in p}


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def test_the_network_policies_select_the_charts_pods(tmp_path: Path) -> None:
    docs = loki_chart(tmp_path)
    loki_pod = find(docs, "StatefulSet", "loki")["spec"]["template"]["metadata"]["labels"]
    gateway_pod = find(docs, "Deployment", "loki-gateway")["spec"]["template"]["metadata"]["labels"]
    loki = _monitoring("networkpolicy-fleetgen-loki.yaml")["spec"]
    gateway = _monitoring("networkpolicy-fleetgen-loki-gateway.yaml")["spec"]
    assert _matches(loki["podSelector"], loki_pod) and not _matches(loki["podSelector"], gateway_pod)
    assert _matches(gateway["podSelector"], gateway_pod) and not _matches(gateway["podSelector"], loki_pod)
    sources = loki["ingress"][0]["from"]
    assert any(_matches(s.get("podSelector", {}), gateway_pod) for s in sources)
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "fleetgen-system"}}} in sources
    collector = _monitoring(f"daemonset-{COLLECTOR}.yaml")["spec"]["template"]["metadata"]["labels"]
    (only,) = gateway["ingress"][0]["from"]
    assert _matches(only["podSelector"], collector)
    # Issue 52: the collector may send only to the gateway, and the reconciler read only Loki, each on
    # the port the chart's pods listen on (a CNI matches egress after the Service's port is translated).
    gateway_ports = _ports(find(docs, "Deployment", "loki-gateway"))
    loki_ports = _ports(find(docs, "StatefulSet", "loki"))
    (_dns, to_gateway) = _monitoring(f"networkpolicy-{COLLECTOR}.yaml")["spec"]["egress"]
    assert _matches(to_gateway["to"][0]["podSelector"], gateway_pod)
    assert [p["port"] for p in to_gateway["ports"]] == [gateway_ports["http-metrics"]]
    to_loki = _monitoring_health("networkpolicy-fleetgen-health.yaml")["spec"]["egress"][-1]
    assert _matches(to_loki["to"][0]["podSelector"], loki_pod) and not _matches(to_loki["to"][0]["podSelector"],
                                                                                 gateway_pod)
    assert [p["port"] for p in to_loki["ports"]] == [loki_ports["http-metrics"]]
    # The reconciler reads Loki itself, with the tenant, where the policy lets its namespace in.
    policy = yaml.safe_load(next(iter(_monitoring_health("configmap-fleetgen-health.yaml")["data"].values())))
    assert policy["lokiUrl"].startswith("http://loki.monitoring.svc") and policy["lokiTenant"] == KERNEL_LOG_TENANT
    assert json.dumps(policy).count("loki-gateway") == 0


def _monitoring_health(name: str) -> dict[str, Any]:
    return dict(yaml.safe_load((REPO / "rendered" / CLUSTER / "health" / name).read_text()))
