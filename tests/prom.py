"""Helpers for tests that run the real Prometheus tools on the rendered rules, read by hand from the
rendered PrometheusRules.

The fleet twin (tests/test_twin_gitops.py) loads the rules as production does, through the real
Prometheus operator, for prod-east and prod-west, and fires one alert from a scraped series. These
helpers serve what it cannot: every alert firing, and staying silent, on chosen series (promtool's
unit tests), `for:` timing on a server scraping a controlled endpoint, the dashboards' queries, and
the clusters no twin bootstraps (dev, hub)."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO, SERVER_POLL


def tool(name: str) -> str:
    """Path of the pinned Prometheus v3.7.3 `prometheus` or `promtool` (tests/upstream/tools.py builds them
    from Prometheus's module), or skip saying how to build it (fail under CI, which builds it)."""
    import os

    from tests.upstream import tools

    path = tools.binary(name)
    if not path.is_file():
        message = f"{name} is not built: run python3 tests/upstream/tools.py build {name}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return str(path)


def rendered_groups(cluster: str = "prod-east", root: Path = REPO) -> list[dict[str, Any]]:
    """Rule groups of every rendered PrometheusRule of a cluster."""
    groups = []
    rendered = root / "rendered" / cluster
    for path in sorted([*(rendered / "monitoring").glob("prometheusrule-*.yaml"),
                        *(rendered / "health").glob("prometheusrule-*.yaml")]):
        groups.extend(yaml.safe_load(path.read_text())["spec"]["groups"])
    assert groups, f"no PrometheusRule rendered for {cluster}"
    return groups


def write_rules(folder: Path, cluster: str = "prod-east") -> Path:
    """The cluster's rules as one Prometheus rule file."""
    path = folder / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rendered_groups(cluster)}, sort_keys=False))
    return path


def alert_rule(name: str, cluster: str = "prod-east") -> dict[str, Any]:
    """The rendered rule of one alert."""
    for group in rendered_groups(cluster):
        for rule in group["rules"]:
            if rule.get("alert") == name:
                return rule
    raise KeyError(name)


def expand(template: str, labels: dict[str, str], value: str = "") -> str:
    """Expand the `{{ $labels.x }}` and `{{ $value }}` placeholders the rules use, as Prometheus does."""
    text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), "<no value>"), template)
    return text.replace("{{ $value }}", value)


def expected(name: str, labels: dict[str, str], value: str = "") -> dict[str, Any]:
    """promtool's exp_alerts entry for `name` with the given series labels."""
    rule = alert_rule(name)
    all_labels = {**labels, **rule["labels"]}
    return {"exp_labels": all_labels,
            "exp_annotations": {k: expand(v, all_labels, value) for k, v in rule["annotations"].items()}}


# --- a real Prometheus server and a local metrics endpoint --------------------------------------

import json  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import urllib.parse  # noqa: E402
import urllib.request  # noqa: E402
from collections.abc import Callable  # noqa: E402
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402

from tests.upstream.processes import free_port  # noqa: E402


class MetricsEndpoint:
    """Serves Prometheus text exposition produced by `render()` on 127.0.0.1 (a stand-in exporter), or at
    `address` (a twin pod's loopback IP and port)."""

    def __init__(self, render: Callable[[], str], address: tuple[str, int] = ("127.0.0.1", 0)) -> None:
        self.render = render
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server API
                body = outer.render().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                # Prometheus may have given up on a scrape past its timeout (a busy machine): `up` says so.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(address, Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": SERVER_POLL},
                                       daemon=True)

    def __enter__(self) -> MetricsEndpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def exposition(samples: list[tuple[str, dict[str, str], float]]) -> str:
    """Prometheus text format for (metric, labels, value) samples."""
    lines = []
    for metric, labels, value in samples:
        inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
        lines.append(f"{metric}{{{inner}}} {value:g}")
    return "\n".join(lines) + "\n"


def dcgm_node(node: str, gpus: int, model: str, xid: tuple[int, int] | None = None,
              temperature: float = 50.0) -> str:
    """What dcgm-exporter serves for a healthy node's GPUs (temperature, health status, DBE count), and
    with `xid` (gpu, code) an XID on that GPU."""
    samples = []
    for gpu in range(gpus):
        base = {"gpu": str(gpu), "UUID": f"GPU-{node}-{gpu}", "modelName": model}
        samples += [("DCGM_FI_DEV_GPU_TEMP", base, temperature), ("DCGM_EXP_GPU_HEALTH_STATUS", base, 0.0),
                    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", base, 0.0)]
        if xid is not None and xid[0] == gpu:
            samples.append(("DCGM_EXP_XID_ERRORS_COUNT", {**base, "xid": str(xid[1])}, 1.0))
    return exposition(samples)


class PrometheusServer:
    """The real prometheus binary on loopback, with rule files and static scrape targets."""

    def __init__(self, workdir: Path, rule_files: list[Path], targets: dict[str, tuple[int, dict[str, str]]],
                 interval: str = "1s", flags: tuple[str, ...] = ()) -> None:
        self.workdir = workdir
        self.flags = flags
        self.port = free_port()
        config = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval, "scrape_timeout": interval},
            "rule_files": [str(p) for p in rule_files],
            "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [f"127.0.0.1:{port}"],
                                                                     "labels": labels}]}
                               for job, (port, labels) in targets.items()],
        }
        self.config = workdir / "prometheus.yml"
        self.config.write_text(yaml.safe_dump(config))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> PrometheusServer:
        self.log = open(self.workdir / "prometheus.log", "wb")  # noqa: SIM115 - closed in __exit__
        self.proc = subprocess.Popen(
            [tool("prometheus"), f"--config.file={self.config}", f"--storage.tsdb.path={self.workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn", *self.flags],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {(self.workdir / 'prometheus.log').read_text()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as resp:
                    if resp.status == 200:
                        return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("prometheus did not become ready in 30s")

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.log.close()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)

    def api(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=5) as resp:
            return json.loads(resp.read())

    def alerts(self) -> list[dict[str, Any]]:
        return list(self.api("alerts")["data"]["alerts"])

    def wait_for_alert(self, name: str, state: str, timeout: float = 30,
                       labels: dict[str, str] | None = None) -> dict[str, Any]:
        """Poll /api/v1/alerts until `name` is in `state` (pending or firing) with `labels`."""
        deadline = time.monotonic() + timeout
        seen: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            seen = self.alerts()
            for alert in seen:
                if alert["labels"].get("alertname") == name and alert["state"] == state and \
                        all(alert["labels"].get(k) == v for k, v in (labels or {}).items()):
                    return alert
            time.sleep(0.25)
        raise AssertionError(f"{name} never became {state} within {timeout}s; alerts seen: {seen}")
