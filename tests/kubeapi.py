"""A small, faithful HTTP stand-in of the Kubernetes API server, for tests through the real client.

What it does as the API server does: objects stored per resource, namespace and name; a global
resourceVersion bumped on every write and checked on update (409 Conflict when stale); create of
an existing name is 409 AlreadyExists, a missing object 404 NotFound, both as metav1.Status;
JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch (built-in kinds only,
applied as a merge patch; custom resources answer 415, and a dict sent as json-patch is 400, as on
a real server); list with
label selectors; pods/<name>/log (optionally followed); bearer-token authentication (401) and a
per-user authorisation rule (403 with the API server's message). It serves nothing else.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True


RESOURCES = [
    Resource("", "v1", "pods", "Pod"),
    Resource("", "v1", "nodes", "Node", namespaced=False),
    Resource("", "v1", "events", "Event"),
    Resource("", "v1", "namespaces", "Namespace", namespaced=False),
    Resource("", "v1", "configmaps", "ConfigMap"),
    Resource("coordination.k8s.io", "v1", "leases", "Lease"),
    Resource("events.k8s.io", "v1", "events", "Event"),
    Resource("batch", "v1", "jobs", "Job"),
    Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet"),
    Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload"),
]

Authorizer = Callable[[str, str, Resource, str | None], bool]
"""(user, verb, resource, namespace) -> allowed."""


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def status(self) -> dict[str, Any]:
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": self.message, "reason": self.reason, "code": self.code}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _pointer(path: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]


def json_patch(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, test)."""
    doc = copy.deepcopy(doc)
    for op in ops:
        parts = _pointer(op["path"])
        parent = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = parts[-1]
        kind = op["op"]
        if kind == "test":
            current = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if current != op["value"]:
                raise ApiError(422, "Invalid", f"the server rejected our request due to an error in our request: "
                                              f"test failed at {op['path']}")
        elif kind in ("add", "replace"):
            if isinstance(parent, list):
                index = len(parent) if last == "-" else int(last)
                parent.insert(index, op["value"]) if kind == "add" else parent.__setitem__(index, op["value"])
            else:
                if kind == "replace" and last not in parent:
                    raise ApiError(422, "Invalid",
                                   f"replace operation does not apply: doc is missing path: {op['path']}")
                parent[last] = op["value"]
        elif kind == "remove":
            if isinstance(parent, list):
                parent.pop(int(last))
            elif last in parent:
                del parent[last]
            else:
                raise ApiError(422, "Invalid", f"remove operation does not apply: doc is missing path: {op['path']}")
        else:
            raise ApiError(400, "BadRequest", f"unsupported JSON patch op {kind!r}")
    return doc


def matches_selector(labels: dict[str, str], selector: str) -> bool:
    """Kubernetes label selector: a=b, a==b, a!=b, a in (x,y), a notin (x), a, !a."""
    for term in re.findall(r"[^,(]+(?:\([^)]*\))?", selector):
        term = term.strip()
        if not term:
            continue
        if m := re.fullmatch(r"([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)", term):
            values = {v.strip() for v in m.group(3).split(",")}
            if (labels.get(m.group(1)) in values) != (m.group(2) == "in"):
                return False
        elif m := re.fullmatch(r"([\w./-]+)\s*(==|=|!=)\s*([\w./-]*)", term):
            equal = labels.get(m.group(1)) == m.group(3)
            if equal != (m.group(2) != "!="):
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


@dataclass
class KubeApi:
    """The stand-in's state; `serve()` starts it on 127.0.0.1 and returns the base URL."""

    tokens: dict[str, str] = field(default_factory=lambda: {"admin-token": "admin"})
    authorize: Authorizer = lambda user, verb, res, ns: True  # noqa: E731
    objects: dict[tuple[str, str, str, str], dict[str, Any]] = field(default_factory=dict)
    logs: dict[tuple[str, str], str] = field(default_factory=dict)
    requests: list[tuple[str, str, str]] = field(default_factory=list)
    writes: list[tuple[str, str, str]] = field(default_factory=list)
    """(user, verb, path) of every write request that succeeded."""
    interfere: Callable[[str, str], None] | None = None
    """Called before each request is served (verb, path): lets a test play a concurrent writer."""
    resource_version: int = 1000
    lock: threading.RLock = field(default_factory=threading.RLock)

    # --- direct access for tests (what controllers such as Kueue would do) ---

    def put(self, group: str, plural: str, namespace: str | None, obj: dict[str, Any]) -> dict[str, Any]:
        """Store an object as a controller would (bumps resourceVersion)."""
        with self.lock:
            res = self._resource(group, plural)
            key = (group, plural, namespace or "", obj["metadata"]["name"])
            stored = self._stamp(res, copy.deepcopy(obj), namespace, self.objects.get(key))
            self.objects[key] = stored
            return copy.deepcopy(stored)

    def get(self, group: str, plural: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        with self.lock:
            found = self.objects.get((group, plural, namespace or "", name))
            return copy.deepcopy(found) if found else None

    def list(self, group: str, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            return [copy.deepcopy(o) for (g, p, ns, _), o in sorted(self.objects.items())
                    if g == group and p == plural and (namespace is None or ns == namespace)]

    # --- HTTP ---

    def serve(self) -> str:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self, verb: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    code, body, ctype = api.handle(verb, self.path, self.headers, raw)
                except ApiError as err:
                    code, body, ctype = err.code, json.dumps(err.status()).encode(), "application/json"
                if callable(body):  # a followed log: stream chunks, then close
                    self.send_response(code)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for chunk in body():
                        self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    return
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                self._handle("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._handle("POST")

            def do_PUT(self) -> None:  # noqa: N802
                self._handle("PUT")

            def do_PATCH(self) -> None:  # noqa: N802
                self._handle("PATCH")

            def do_DELETE(self) -> None:  # noqa: N802
                self._handle("DELETE")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def shutdown(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- request handling ---

    def _resource(self, group: str, plural: str) -> Resource:
        for res in RESOURCES:
            if res.group == group and res.plural == plural:
                return res
        raise ApiError(404, "NotFound", f"the server could not find the requested resource ({plural}.{group})")

    def _parse(self, path: str) -> tuple[Resource, str | None, str | None, str | None]:
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        namespace = None
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        if not rest:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        res = self._resource(group, rest[0])
        if res.version != version:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({version})")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        return res, namespace, name, sub

    def _user(self, headers: Any) -> str:
        auth = headers.get("Authorization") or ""
        token = auth[7:] if auth.startswith("Bearer ") else None
        if token not in self.tokens:
            raise ApiError(401, "Unauthorized", "Unauthorized")
        return self.tokens[token]

    def _stamp(self, res: Resource, obj: dict[str, Any], namespace: str | None,
               old: dict[str, Any] | None) -> dict[str, Any]:
        self.resource_version += 1
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(self.resource_version)
        if namespace and res.namespaced:
            meta["namespace"] = namespace
        if old is None:
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            meta["generation"] = 1
        else:
            meta["uid"] = old["metadata"]["uid"]
            meta["creationTimestamp"] = old["metadata"]["creationTimestamp"]
            meta["generation"] = old["metadata"].get("generation", 1) + (obj.get("spec") != old.get("spec"))
        obj["apiVersion"] = f"{res.group}/{res.version}" if res.group else res.version
        obj["kind"] = res.kind
        return obj

    def handle(self, verb: str, raw_path: str, headers: Any, raw: bytes) -> tuple[int, Any, str]:
        url = urlparse(raw_path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        with self.lock:
            self.requests.append((verb, url.path, url.query))
        user = self._user(headers)
        if self.interfere is not None:
            with self.lock:
                self.interfere(verb, url.path)
        res, namespace, name, sub = self._parse(url.path)
        api_verb = {"GET": "get" if name else "list", "POST": "create", "PUT": "update", "PATCH": "patch",
                    "DELETE": "delete"}[verb]
        target = f"{res.plural}/{sub}" if sub else res.plural
        if not self.authorize(user, api_verb, res, namespace):
            where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
            group = f'"{res.group}"' if res.group else '""'
            raise ApiError(403, "Forbidden", f'{target}{"." + res.group if res.group else ""}'
                           f'{" " + repr(name).replace(chr(39), chr(34)) if name else ""} is forbidden: User '
                           f'"{user}" cannot {api_verb} resource "{target}" in API group {group}{where}')
        with self.lock:
            if sub == "log":
                return self._log(namespace, name or "", query)
            if sub is not None:
                raise ApiError(404, "NotFound", f"subresource {sub} is not served by the stand-in")
            body = json.loads(raw) if raw else None
            out = getattr(self, f"_{api_verb}")(res, namespace, name, body, headers, query)
            if verb in ("POST", "PUT", "PATCH", "DELETE"):
                self.writes.append((user, verb, url.path))
            return 200 if verb != "POST" else 201, json.dumps(out).encode(), "application/json"

    def _key(self, res: Resource, namespace: str | None, name: str) -> tuple[str, str, str, str]:
        return (res.group, res.plural, namespace or "" if res.namespaced else "", name)

    def _missing(self, res: Resource, name: str) -> ApiError:
        group = f".{res.group}" if res.group else ""
        return ApiError(404, "NotFound", f'{res.plural}{group} "{name}" not found')

    def _get(self, res: Resource, ns: str | None, name: str, *_: Any) -> dict[str, Any]:
        obj = self.objects.get(self._key(res, ns, name))
        if obj is None:
            raise self._missing(res, name)
        return obj

    def _list(self, res: Resource, ns: str | None, _name: Any, _body: Any, _h: Any,
              query: dict[str, str]) -> dict[str, Any]:
        selector = query.get("labelSelector", "")
        items = [o for (g, p, o_ns, _), o in sorted(self.objects.items())
                 if g == res.group and p == res.plural and (ns is None or o_ns == ns)
                 and matches_selector(o["metadata"].get("labels") or {}, selector)]
        return {"kind": f"{res.kind}List", "apiVersion": f"{res.group}/{res.version}" if res.group else res.version,
                "metadata": {"resourceVersion": str(self.resource_version)}, "items": items}

    def _create(self, res: Resource, ns: str | None, _name: Any, body: dict[str, Any], *_: Any) -> dict[str, Any]:
        meta = body.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        name = meta.get("name")
        if not name:
            raise ApiError(422, "Invalid", f"{res.kind} is invalid: metadata.name: Required value")
        key = self._key(res, ns, name)
        if key in self.objects:
            group = f".{res.group}" if res.group else ""
            raise ApiError(409, "AlreadyExists", f'{res.plural}{group} "{name}" already exists')
        body.get("metadata", {}).pop("resourceVersion", None)
        self.objects[key] = self._stamp(res, body, ns, None)
        return self.objects[key]

    def _check_version(self, res: Resource, name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        wanted = (new.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != old["metadata"]["resourceVersion"]:
            group = f".{res.group}" if res.group else ""
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {res.plural}{group} "{name}": the '
                           "object has been modified; please apply your changes to the latest version and try again")

    def _update(self, res: Resource, ns: str | None, name: str, body: dict[str, Any], *_: Any) -> dict[str, Any]:
        key = self._key(res, ns, name)
        old = self.objects.get(key)
        if old is None:
            raise self._missing(res, name)
        if (body.get("metadata") or {}).get("resourceVersion") is None:
            raise ApiError(422, "Invalid", f"{res.kind} is invalid: metadata.resourceVersion: Invalid value: 0x0: "
                           "must be specified for an update")
        self._check_version(res, name, old, body)
        self.objects[key] = self._stamp(res, body, ns, old)
        return self.objects[key]

    def _patch(self, res: Resource, ns: str | None, name: str, body: Any, headers: Any, *_: Any) -> dict[str, Any]:
        key = self._key(res, ns, name)
        old = self.objects.get(key)
        if old is None:
            raise self._missing(res, name)
        ctype = (headers.get("Content-Type") or "").split(";")[0]
        if ctype == "application/json-patch+json":
            if not isinstance(body, list):
                raise ApiError(400, "BadRequest", "json: cannot unmarshal object into Go value of type jsonpatch.Patch")
            new = json_patch(old, body)
        elif ctype == "application/strategic-merge-patch+json" and "." in res.group and not \
                res.group.endswith(".k8s.io"):
            raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted "
                           "media types include: application/json-patch+json, application/merge-patch+json, "
                           "application/apply-patch+yaml")
        elif ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            # Strategic merge on built-in kinds is applied as a merge patch: lists are replaced, not merged
            # by key, so code under test that patches lists sends the whole list (or a JSON patch).
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the patch must be a JSON object")
            self._check_version(res, name, old, body)
            new = merge_patch(old, body)
        else:
            raise ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {ctype}")
        new.setdefault("metadata", {})["name"] = name
        self.objects[key] = self._stamp(res, new, ns, old)
        return self.objects[key]

    def _delete(self, res: Resource, ns: str | None, name: str, *_: Any) -> dict[str, Any]:
        key = self._key(res, ns, name)
        if key not in self.objects:
            raise self._missing(res, name)
        del self.objects[key]
        self.resource_version += 1
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": name, "group": res.group, "kind": res.plural}}

    def _log(self, ns: str | None, pod: str, query: dict[str, str]) -> tuple[int, Any, str]:
        if self._key(self._resource("", "pods"), ns, pod) not in self.objects:
            raise self._missing(self._resource("", "pods"), pod)
        text = self.logs.get((ns or "", pod), "")
        if query.get("follow") == "true":
            lines = text.splitlines(keepends=True)
            return 200, lambda: [line.encode() for line in lines], "text/plain"
        return 200, text.encode(), "text/plain"


def free_port_closed() -> int:
    """A loopback port nothing listens on (for unreachable-cluster tests)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
