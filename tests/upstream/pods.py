"""One pod of the twin run for real: its volumes filled as its kubelet fills them, its container's program
started with the container's own arguments in a mount namespace where each volume sits at its mountPath.

kwok only pretends to run pods. Where a test needs what a pod's program makes of what the cluster gave it
(the Prometheus server the Prometheus operator configured), `PodVolumes` reads the Pod from the API
server and writes each volume the way pkg/kubelet/volumemanager does at Kubernetes v1.36.3: a Secret's or
ConfigMap's keys as files (or its `items`), a projected volume's sources (the service account token
through the TokenRequest API, bound to the pod, as the kubelet's token manager asks for it; the
downward API's fields), an emptyDir and a claimed volume as fresh folders. What is not the cluster's: the
in-cluster address of the API server is its own loopback address (no kube-proxy routes the `kubernetes`
Service's ClusterIP here).
"""

from __future__ import annotations

import base64
import contextlib
import os
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.upstream.cluster import Stack
from tests.upstream.processes import Process, StartError, spawn


@dataclass
class PodVolumes:
    """A pod's volumes as folders under `workdir`, and where each container mounts them."""

    stack: Stack
    pod: dict[str, Any]
    workdir: Path
    folders: dict[str, Path] = field(default_factory=dict)
    made: list[Path] = field(default_factory=list)
    """Mount points `run` made on this machine, removed by `release`."""

    @classmethod
    def fill(cls, stack: Stack, namespace: str, name: str, workdir: Path) -> PodVolumes:
        pod = stack._get(f"/api/v1/namespaces/{namespace}/pods/{name}")
        if not pod:
            raise StartError(f"pod {namespace}/{name} is absent")
        volumes = cls(stack, pod, workdir)
        for volume in pod["spec"].get("volumes") or []:
            folder = workdir / "volumes" / volume["name"]
            folder.mkdir(parents=True, exist_ok=True)
            volumes._write(volume, folder)
            volumes.folders[volume["name"]] = folder
        return volumes

    @property
    def namespace(self) -> str:
        return str(self.pod["metadata"]["namespace"])

    def _get(self, kind: str, name: str, optional: bool) -> dict[str, str]:
        obj = self.stack._get(f"/api/v1/namespaces/{self.namespace}/{kind}/{name}")
        if not obj:  # absent: a kubelet waits for a required one; the test cannot
            if optional:
                return {}
            raise StartError(f"{kind}/{name} of pod {self.pod['metadata']['name']} is absent")
        if kind == "secrets":
            return {k: base64.b64decode(v).decode("latin-1") for k, v in (obj.get("data") or {}).items()}
        binary = {k: base64.b64decode(v).decode("latin-1") for k, v in (obj.get("binaryData") or {}).items()}
        return {**(obj.get("data") or {}), **binary}

    def _keys(self, kind: str, source: dict[str, Any], name_field: str) -> dict[str, str]:
        """path -> content of a Secret or ConfigMap source (all its keys, or its `items`)."""
        data = self._get(kind, source[name_field], bool(source.get("optional")))
        items = source.get("items")
        return {i["path"]: data[i["key"]] for i in items if i["key"] in data} if items else data

    def _token(self, spec: dict[str, Any]) -> str:
        from kubernetes import client

        request: dict[str, Any] = {"spec": {
            "expirationSeconds": spec.get("expirationSeconds", 3600),
            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": self.pod["metadata"]["name"],
                               "uid": self.pod["metadata"]["uid"]}}}
        if spec.get("audience"):
            request["spec"]["audiences"] = [spec["audience"]]
        answer = client.CoreV1Api(self.stack.client()).create_namespaced_service_account_token(
            self.pod["spec"]["serviceAccountName"], self.namespace, request)
        return str(answer.status.token)

    def _field(self, path: str) -> str:
        node: Any = self.pod
        for part in path.replace("[", ".").replace("]", "").replace("'", "").split("."):
            node = (node or {}).get(part)
        return "" if node is None else str(node)

    def _write(self, volume: dict[str, Any], folder: Path) -> None:
        files: dict[str, str] = {}
        if "secret" in volume:
            files = self._keys("secrets", volume["secret"], "secretName")
        elif "configMap" in volume:
            files = self._keys("configmaps", volume["configMap"], "name")
        elif "projected" in volume:
            for source in volume["projected"].get("sources") or []:
                if "secret" in source:
                    files.update(self._keys("secrets", source["secret"], "name"))
                elif "configMap" in source:
                    files.update(self._keys("configmaps", source["configMap"], "name"))
                elif "serviceAccountToken" in source:
                    files[source["serviceAccountToken"]["path"]] = self._token(source["serviceAccountToken"])
                elif "downwardAPI" in source:
                    for item in source["downwardAPI"].get("items") or []:
                        files[item["path"]] = self._field(item["fieldRef"]["fieldPath"])
        elif not ({"emptyDir", "persistentVolumeClaim"} & set(volume)):
            raise StartError(f"volume {volume['name']}: a kind the twin's pods do not fill: {sorted(volume)}")
        for path, content in files.items():
            target = folder / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content.encode("latin-1"))

    def container(self, name: str) -> dict[str, Any]:
        everything = [*(self.pod["spec"].get("initContainers") or []), *self.pod["spec"]["containers"]]
        return next(c for c in everything if c["name"] == name)

    def mounts(self, container: str) -> dict[str, Path]:
        """mountPath -> host path for a container (a subPath mount is that file or folder of the volume)."""
        out = {}
        for mount in self.container(container).get("volumeMounts") or []:
            source = self.folders[mount["name"]]
            if mount.get("subPath"):
                source = source / mount["subPath"]
                if not source.exists():  # the kubelet makes a missing subPath a folder of the volume
                    source.mkdir(parents=True)
            out[mount["mountPath"]] = source
        return out

    def host_path(self, container: str, path: str) -> Path:
        """Where a path inside the container is on this machine (through its longest mountPath)."""
        for target, source in sorted(self.mounts(container).items(), key=lambda kv: -len(kv[0])):
            if path == target or path.startswith(target.rstrip("/") + "/"):
                return source / path[len(target):].lstrip("/")
        raise StartError(f"{path} is on no volume of container {container}")

    def env(self, container: str) -> dict[str, str]:
        """The container's environment: its values and downward-API fields."""
        out = {}
        for var in self.container(container).get("env") or []:
            if "value" in var:
                out[var["name"]] = str(var["value"])
            elif "fieldRef" in (var.get("valueFrom") or {}):
                out[var["name"]] = self._field(var["valueFrom"]["fieldRef"]["fieldPath"])
        return out

    def run(self, container: str, argv: list[str], log: Path, env: dict[str, str] | None = None) -> Process:
        """`argv` in a mount namespace of its own with the container's volumes at their mountPaths, and
        the in-cluster API server address a kubelet gives every container. The mount points are made
        on this machine's filesystem where missing (a namespace shares it) and removed by `release`.
        Needs root (CI is)."""
        if os.geteuid() != 0:
            raise StartError("a twin pod's program needs root: its volumes are bind-mounted in a mount namespace")
        mounts = self.mounts(container)
        steps = []
        try:
            for target, source in sorted(mounts.items()):
                self._mount_point(Path(target), source.is_dir())
                steps.append(f"mount --bind {shlex.quote(str(source))} {shlex.quote(target)}")
            host, port = self.stack.server.removeprefix("https://").rsplit(":", 1)
            wrapped = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                       " && ".join([*steps, 'exec "$@"']), "sh", *argv]
            return spawn(f"{self.pod['metadata']['name']}/{container}", wrapped, log, env={
                **self.env(container), "KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port,
                **(env or {})})
        except BaseException:
            self.release()
            raise

    def _mount_point(self, target: Path, folder: bool) -> None:
        for path in [*reversed(target.parents), target]:
            if path.exists():
                continue
            if path == target and not folder:
                path.touch()
            else:
                path.mkdir()
            self.made.append(path)

    def release(self) -> None:
        """Remove the mount points `run` made (still empty: the volumes were mounted only inside)."""
        for path in reversed(self.made):
            with contextlib.suppress(OSError):
                path.rmdir() if path.is_dir() else path.unlink()
        self.made.clear()


@contextlib.contextmanager
def standing_in_for(pod_ip: str) -> Iterator[str]:
    """A kwok pod's IP on this machine's loopback interface for the duration, so a process of the test
    listening there is what the pod's Service endpoints reach. (The pods cannot simply get loopback IPs:
    the API server refuses loopback addresses in EndpointSlices, k8s v1.36.3
    pkg/apis/discovery/validation/validation.go:123 and pkg/apis/core/validation/validation.go:8433, and the
    fleet twin's EndpointSlices then listed none.) An address already there is refused, not shared.
    Needs root (CI is); the address is removed afterwards."""
    if os.geteuid() != 0:
        raise StartError("standing in for a pod needs root: its IP is added to the loopback interface")
    added = subprocess.run(["ip", "address", "add", f"{pod_ip}/32", "dev", "lo"], capture_output=True, text=True,
                           check=False)
    if added.returncode != 0:  # held already: another test's, or a machine's own address
        raise StartError(f"ip address add {pod_ip}/32 dev lo: {added.stderr.strip()}")
    try:
        yield pod_ip
    finally:
        subprocess.run(["ip", "address", "del", f"{pod_ip}/32", "dev", "lo"], capture_output=True, check=False)
