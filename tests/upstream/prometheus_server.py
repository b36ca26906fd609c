"""The real Prometheus v3.7.3 tools, built from Prometheus's module (tools.py): `promtool`'s path, and a
`prometheus` server on loopback with rule files (tests/alert_rules.py) and static scrape targets
(tests/metrics.py stands in for the exporters)."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from tests.upstream.absent import skip_or_fail
from tests.upstream.processes import free_port


def tool(name: str) -> str:
    """Path of the pinned Prometheus v3.7.3 `prometheus` or `promtool` (tests/upstream/tools.py builds them
    from Prometheus's module), or skip saying how to build it (fail under CI, which builds it)."""

    from tests.upstream import tools

    path = tools.binary(name)
    if not path.is_file():
        skip_or_fail(f"{name} is not built: run python3 tests/upstream/tools.py build {name}")
    return str(path)


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
