"""A real Loki (built from its Go module, tests/upstream/loki) run with the configuration the pinned
Loki chart makes of a cluster's rendered values, and the rules its sidecar would load.

What is changed for a loopback run is the environment only: listen addresses and ports, the
directories the chart mounts (/var/loki, /rules, the runtime config), the memberlist peers (one
process: an in-memory ring, the query frontend called back on loopback, no 15 s readiness delay)
and the Alertmanager and
remote-write URLs, which point at a local receiver and a real Prometheus. Everything else, limits,
schema, OTLP label mapping and the ruler's storage, is the chart's own output.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from generator.versions import component
from tests.conftest import SERVER_POLL
from tests.rendered import chart_values, kubernetes_version, rendered_object
from tests.upstream import tools
from tests.upstream.processes import Process, StartError, free_port, spawn, start_with_retry, wait_until

CLUSTER = "prod-east"
"""The cluster whose rendered values Loki runs with unless asked."""
HARDWARE = "NVRM: Xid (PCI:0000:4e:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
"""A kernel line of a hardware-class XID (79), which the rendered rules alert on and the reconciler cordons for."""


def chart_version() -> str:
    return str(yaml.safe_load((tools.chart("loki") / "Chart.yaml").read_text())["version"])


def helm_template(values: dict[str, Any], tmp_path: Path, kube_version: str) -> list[dict[str, Any]]:
    """`helm template` of the pinned Loki chart with `values`; the rendered objects."""
    chart = tmp_path / "loki-chart"
    if chart.exists():
        shutil.rmtree(chart)
    tools.trimmed_chart("loki", values, chart)
    values_file = tmp_path / "loki-values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    proc = subprocess.run([str(tools.binary("helm")), "template", "loki", str(chart), "--namespace", "monitoring",
                           "--values", str(values_file), "--kube-version", kube_version],
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def loki_chart(tmp_path: Path, cluster: str = CLUSTER) -> list[dict[str, Any]]:
    """What the pinned Loki chart makes of the cluster's rendered values (the chart the Loki module the tests
    build ships, which must be the one versions.yaml pins)."""
    pinned = component("loki")
    assert chart_version() == pinned.version, (
        f"the Loki module the tests build ships chart {chart_version()}, versions.yaml pins {pinned.version}")
    return helm_template(chart_values(cluster, "loki"), tmp_path, f"{kubernetes_version(cluster)}.0")


def collector_resource(cluster: str, node: str) -> dict[str, str]:
    """The resource attributes the rendered collector sets (`resource/node`), for `node`."""
    collector = yaml.safe_load(rendered_object(cluster, "monitoring", "configmap-fleetgen-kernel-log.yaml")
                               ["data"]["collector.yaml"])
    attributes = collector["processors"]["resource/node"]["attributes"]
    return {a["key"]: str(a["value"]).replace("${env:K8S_NODE_NAME}", node) for a in attributes}


def find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    for doc in docs:
        if doc["kind"] == kind and doc["metadata"]["name"] == name:
            return doc
    raise KeyError(f"{kind}/{name} not rendered by the chart: {[(d['kind'], d['metadata']['name']) for d in docs]}")


class Receiver:
    """Records what Loki's ruler sends to Alertmanager (POST /api/v2/alerts)."""

    def __init__(self) -> None:
        self.alerts: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.endswith("/api/v2/alerts"):
                    outer.alerts.extend(json.loads(body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": SERVER_POLL}, daemon=True).start()

    def names(self) -> set[tuple[str, ...]]:
        """(alertname, node, xid or sxid) of every alert received."""
        return {(a["labels"]["alertname"], a["labels"].get("k8s_node_name", ""),
                 a["labels"].get("xid") or a["labels"].get("sxid", "")) for a in self.alerts}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class LokiServer:
    """The loki binary with the chart's config.yaml and runtime config, adapted to loopback."""

    def __init__(self, workdir: Path, docs: list[dict[str, Any]], rules: dict[str, str], alertmanager: str,
                 remote_write: str, overrides: dict[str, Any] | None = None) -> None:
        self.workdir = workdir
        self.docs = docs
        self.rules = rules
        self.alertmanager = alertmanager
        self.remote_write = remote_write
        self.overrides = overrides or {}
        self.proc: Process | None = None
        self.port = 0

    def _config(self, http: int, grpc: int) -> dict[str, Any]:
        (text,) = find(self.docs, "ConfigMap", "loki")["data"].values()
        config: dict[str, Any] = yaml.safe_load(text)
        statefulset = find(self.docs, "StatefulSet", "loki")
        mounts = {m["name"]: m["mountPath"] for c in statefulset["spec"]["template"]["spec"]["containers"]
                  if c["name"] == "loki" for m in c["volumeMounts"]}
        moved = {mounts["storage"]: str(self.workdir / "var-loki")}
        text = yaml.safe_dump(config)
        for old, new in moved.items():
            text = text.replace(f"{old}/", f"{new}/").replace(f": {old}\n", f": {new}\n")
        config = yaml.safe_load(text)
        config["ruler"]["storage"]["local"]["directory"] = str(self.workdir / "rules")
        config["ruler"]["alertmanager_url"] = self.alertmanager
        config["ruler"]["remote_write"]["client"]["url"] = self.remote_write
        runtime = yaml.safe_load(find(self.docs, "ConfigMap", "loki-runtime")["data"]["runtime-config.yaml"]) or {}
        if self.overrides:
            runtime = tools.merged_values(runtime, {"overrides": self.overrides})
        (self.workdir / "runtime-config.yaml").write_text(yaml.safe_dump(runtime))
        config["runtime_config"]["file"] = str(self.workdir / "runtime-config.yaml")
        config["server"].update({"http_listen_address": "127.0.0.1", "http_listen_port": http,
                                 "grpc_listen_address": "127.0.0.1", "grpc_listen_port": grpc})
        config["common"]["compactor_grpc_address"] = f"127.0.0.1:{grpc}"
        config["common"]["ring"] = {"kvstore": {"store": "inmemory"}, "instance_addr": "127.0.0.1"}
        config.setdefault("frontend", {})["address"] = "127.0.0.1"  # queriers call the frontend back there
        # Ready as soon as the ring is (the 15 s default paces rolling restarts of many ingesters).
        config.setdefault("ingester", {}).setdefault("lifecycler", {})["min_ready_duration"] = "0s"
        config.pop("memberlist", None)
        return config

    def _sidecar_folder(self) -> Path:
        """Where the chart's rules sidecar writes labelled ConfigMaps, under our rules directory."""
        statefulset = find(self.docs, "StatefulSet", "loki")
        (sidecar,) = [c for c in statefulset["spec"]["template"]["spec"]["containers"] if c["name"] == "loki-sc-rules"]
        folder = {e["name"]: e.get("value") for e in sidecar["env"]}["FOLDER"]
        tenant = Path(folder).name  # /rules/fake: the ruler reads <directory>/<tenant>/
        return self.workdir / "rules" / tenant

    @property
    def tenant(self) -> str:
        """The tenant the rules belong to (the sidecar's folder): the kernel-log tenant."""
        return self._sidecar_folder().name

    def start(self) -> LokiServer:
        folder = self._sidecar_folder()
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in self.rules.items():
            (folder / name).write_text(text)
        statefulset = find(self.docs, "StatefulSet", "loki")
        (container,) = [c for c in statefulset["spec"]["template"]["spec"]["containers"] if c["name"] == "loki"]

        def attempt() -> Process:
            http, grpc = free_port(), free_port()
            config_file = self.workdir / "config.yaml"
            config_file.write_text(yaml.safe_dump(self._config(http, grpc)))
            args = [a for a in container["args"] if not a.startswith("-config.file=")]
            proc = spawn("loki", [str(tools.binary("loki")), f"-config.file={config_file}", *args],
                         self.workdir / "loki.log")
            self.port = http
            try:
                wait_until(proc, self._ready, 90, "ready")
            except StartError:
                proc.stop()
                raise
            return proc

        self.proc = start_with_retry(attempt)
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _ready(self) -> bool:
        with urllib.request.urlopen(f"{self.url}/ready", timeout=2) as resp:
            return resp.status == 200

    def stop(self) -> None:
        if self.proc:  # nothing to keep: no need to wait for its graceful flush (10 s)
            self.proc.stop(grace=1.0)

    def push_otlp(self, resource: dict[str, str], lines: list[str], tenant: str | None = "") -> None:
        """What the collector's otlphttp exporter sends (one resource, one log record per line),
        as the gateway forwards it: under the collector's tenant (default), another one, or none."""
        now = time.time_ns()
        body = {"resourceLogs": [{
            "resource": {"attributes": [{"key": k, "value": {"stringValue": v}} for k, v in resource.items()]},
            "scopeLogs": [{"logRecords": [{"timeUnixNano": str(now - (len(lines) - i) * 1000),
                                           "observedTimeUnixNano": str(now),
                                           "body": {"stringValue": line}} for i, line in enumerate(lines)]}]}]}
        headers = {"Content-Type": "application/json"}
        if tenant is not None:
            headers["X-Scope-OrgID"] = tenant or self.tenant
        request = urllib.request.Request(f"{self.url}/otlp/v1/logs", data=json.dumps(body).encode(),
                                         headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=10) as resp:
            assert resp.status in (200, 204), resp.status

    def get(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        request = urllib.request.Request(f"{self.url}{path}{query}", headers={"X-Scope-OrgID": self.tenant})
        with urllib.request.urlopen(request, timeout=10) as resp:
            text = resp.read().decode()
        return yaml.safe_load(text) if not text.lstrip().startswith("{") else json.loads(text)
