"""A node's log endpoint for the test stack: the one kubelet call `fleetgen job logs` needs.

The API server serves `pods/<name>/log` by calling the kubelet of the pod's node at
`https://<InternalIP>:<daemonEndpoints.kubeletEndpoint.Port>/containerLogs/<ns>/<pod>/<container>`
(k8s.io/kubernetes v1.36.3 pkg/registry/core/pod/strategy.go, LogLocation). No kubelet runs
here, so this serves that path from a dict; authentication, RBAC on `pods/log`, the pod lookup
and the streaming through the API server are all the real API server's.
"""

from __future__ import annotations

import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.upstream import pki


class FakeKubelet:
    """HTTPS on 127.0.0.1; `logs[(namespace, pod, container)]` is what each container printed."""

    def __init__(self, authority: pki.KeyPair, workdir: Path) -> None:
        self.logs: dict[tuple[str, str, str], str] = {}
        self.requests: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                url = urlparse(self.path)
                owner.requests.append(self.path)
                parts = url.path.strip("/").split("/")
                if len(parts) != 4 or parts[0] != "containerLogs":
                    self.send_error(404)
                    return
                text = owner.logs.get((parts[1], parts[2], parts[3]))
                if text is None:
                    self.send_error(404, "container not found")
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(text.encode())
                if parse_qs(url.query).get("follow") == ["true"]:
                    time.sleep(0.2)  # a followed stream ends when the container does

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        serving = pki.issue(authority, "fake-kubelet", server=True, ips=("127.0.0.1",), dns=("localhost",))
        crt, key = serving.write(workdir, "kubelet")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(crt), str(key))
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def node(self, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
        """A Node object whose kubelet is this endpoint."""
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
                "status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                           "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}},
                           "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                           "message": "fake kubelet"}],
                           "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                           "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
