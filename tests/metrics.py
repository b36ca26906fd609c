"""Stand-ins for the exporters Prometheus scrapes: a local endpoint serving Prometheus text exposition,
dcgm-exporter's series for a node's GPUs, and one node whose GPUs fail on demand."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.conftest import SERVER_POLL


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


NODE = "gpu-node-1"
"""The node FakeNode stands for (its GPU capacity series, as kube-state-metrics exports it, names it)."""


class FakeNode:
    """DCGM series of one node whose GPUs can fail on demand."""

    def __init__(self, gpus: int = 8) -> None:
        self.lock = threading.Lock()
        self.present = list(range(gpus))
        self.xids: dict[int, tuple[int, int]] = {}   # gpu -> (xid, count in window)
        self.dbe: dict[int, int] = {g: 0 for g in range(gpus)}

    def labels(self, gpu: int) -> dict[str, str]:
        return {"gpu": str(gpu), "UUID": f"GPU-{gpu:04d}-test", "pci_bus_id": f"00000000:{0x18 + gpu:02X}:00.0",
                "device": f"nvidia{gpu}", "modelName": "NVIDIA H100 80GB HBM3", "Hostname": "dcgm-exporter-abcde"}

    def render(self) -> str:
        with self.lock:
            samples = []
            for gpu in self.present:
                base = self.labels(gpu)
                samples += [("DCGM_FI_DEV_GPU_TEMP", base, 55.0), ("DCGM_EXP_GPU_HEALTH_STATUS", base, 0.0),
                            ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", base, float(self.dbe[gpu])),
                            ("DCGM_FI_DEV_GPU_UTIL", base, 90.0)]
                if gpu in self.xids:
                    xid, count = self.xids[gpu]
                    samples.append(("DCGM_EXP_XID_ERRORS_COUNT", {**base, "xid": str(xid)}, float(count)))
            samples.append(("kube_node_status_capacity", {"node": NODE, "resource": "nvidia_com_gpu"}, 8.0))
            return exposition(samples)
