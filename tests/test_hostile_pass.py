"""Issue 52's hostile-input pass: what an attacker in a server's place, in a file or in an argument
found, one case per defect, each run the way the command meets it.

Prometheus and Loki are played by a loopback socket that answers as no real server would (a
trickle, a status line or header that is not HTTP): a real Prometheus cannot be made to, and a
proxy, a compromised pod or a hostile server in its place can.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from generator.emit import ForeignJournal
from generator.errors import UsageError
from generator.kubetransport import NotTheApi, read_answer
from generator.reconciler.sources import KERNEL_LOG_SIGNAL, XID_METRIC_SIGNAL, LokiSource, PrometheusSource
from generator.repofiles import LINK_FIX, LINK_REASON, UnsafePath
from tests.conftest import REPO, git, run
from tests.faultproxy import FaultProxy, serve_each

NODES = ["gpu-0", "gpu-1"]
TIMEOUT = 0.25
"""The sources' timeout in these tests; a whole query must end within it (plus scheduling slack)."""
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
SERVER_ANSWERS: dict[str, tuple[bytes, float]] = {
    # (bytes sent, seconds between bytes)
    "trickled-headers": (HEAD + b"X-Pad: " + b"a" * 4000 + b"\r\n\r\n{}", 0.05),
    "trickled-body": (HEAD + b"\r\n" + b" " * 4000 + b"{}", 0.05),
    "not-a-status-line": (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", 0),
    "header-too-long": (b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70_000 + b"\r\n\r\n", 0),
    "too-many-headers": (b"HTTP/1.1 200 OK\r\n" + b"X: a\r\n" * 200 + b"\r\n", 0),
    "broken-chunk": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\n", 0),
}


class Hostile:
    """Loopback servers sending one answer to every request, counting the requests."""

    def __init__(self) -> None:
        self.listeners: list[socket.socket] = []
        self.requests = 0

    def within(self, started: float) -> bool:
        """Every request ended within the sources' timeout (plus slack for a loaded machine)."""
        return time.monotonic() - started < max(self.requests, 1) * (TIMEOUT + 0.5)


@pytest.fixture
def hostile() -> Iterator[Hostile]:
    servers = Hostile()
    yield servers
    for listener in servers.listeners:
        listener.close()


def _serve(servers: Hostile, answer: bytes, gap: float) -> str:
    """A loopback server sending `answer` to every request, `gap` seconds between its bytes."""
    def one(conn: socket.socket) -> None:
        servers.requests += 1
        with conn:
            conn.recv(65536)
            try:
                if not gap:
                    conn.sendall(answer)
                    conn.shutdown(socket.SHUT_WR)
                for byte in answer if gap else b"":
                    conn.sendall(bytes([byte]))
                    time.sleep(gap)
                time.sleep(0.2)
            except OSError:  # the client gave up: what the test wants
                pass

    listener = serve_each(one)
    servers.listeners.append(listener)
    return f"http://127.0.0.1:{listener.getsockname()[1]}"


@pytest.mark.parametrize("case", SERVER_ANSWERS)
def test_a_prometheus_answer_that_is_not_http_or_never_ends_is_unknown_in_time(hostile: Hostile,
                                                                                case: str) -> None:
    """Before: a trickled answer held the loop as long as the server liked (the timeout bounds each
    read, not the answer), and http.client's errors for a bad status line, header or chunk escaped
    the source as a traceback of the whole loop."""
    url = _serve(hostile, *SERVER_ANSWERS[case])
    started = time.monotonic()
    observed = PrometheusSource(url, timeout=TIMEOUT).observe(NODES)
    assert hostile.within(started)
    assert all(XID_METRIC_SIGNAL in observed[node].unknown_signals for node in NODES)


@pytest.mark.parametrize("case", SERVER_ANSWERS)
def test_a_loki_answer_that_is_not_http_or_never_ends_is_unknown_in_time(hostile: Hostile,
                                                                          case: str) -> None:
    url = _serve(hostile, *SERVER_ANSWERS[case])
    started = time.monotonic()
    observed = LokiSource(url, timeout=TIMEOUT).observe(NODES)
    assert hostile.within(started)
    assert all(KERNEL_LOG_SIGNAL in observed[node].unknown_signals for node in NODES)


def test_a_link_the_diff_helper_refuses_is_named_not_an_internal_error(repo: Path) -> None:
    """Before: the helper process sent its UnsafePath to the parent pickled, and unpickling called
    UnsafePath(message) without its other arguments: `internal error TypeError`."""
    shutil.copytree(REPO / "rendered", repo / "rendered")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "rendered")
    shutil.rmtree(repo / "teams")
    (repo / "teams").symlink_to(REPO / "teams")
    res = run(repo, "diff", "--rendered")
    assert res.code == 2, res.err
    assert res.err.startswith("teams is a symbolic link; fleetgen does not follow links"), res.err


@pytest.mark.parametrize("error", [UnsafePath("teams", LINK_REASON, LINK_FIX), ForeignJournal("is not JSON")],
                         ids=type)
def test_every_usage_error_crosses_a_process_as_it_is(error: UsageError) -> None:
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error) and str(again) == str(error) and vars(again) == vars(error)


@pytest.fixture
def front() -> Iterator[FaultProxy]:
    """A fake API server: every request meets a fault with its own answer (nothing is forwarded)."""
    alone = FaultProxy("https://127.0.0.1:9", Path("/nonexistent"))
    alone.serve()
    yield alone
    alone.shutdown()


NOT_OBJECTS: dict[str, tuple[object, str]] = {
    # (custom-object answer, what the error says is wrong with it)
    "items-not-a-list": ({"kind": "JobSetList", "metadata": {}, "items": 5}, "items is not a list"),
    "item-not-an-object": ({"kind": "JobSetList", "metadata": {}, "items": ["x"]}, "items[0]: not an object"),
    "item-without-name": ({"kind": "JobSetList", "metadata": {}, "items": [{"metadata": {}}]},
                          "items[0]: metadata.name is not a string"),
    "metadata-a-list": ({"kind": "JobSet", "metadata": ["x"]}, "metadata is not an object"),
    "status-a-string": ({"kind": "JobSet", "metadata": {"name": "x"}, "status": "ok"}, "status is not an object"),
    "conditions-strings": ({"kind": "JobSet", "metadata": {"name": "x"}, "status": {"conditions": ["ok"]}},
                           "status.conditions is not a list of objects"),
    "a-number": (5, "a JSON int, not an object"),
}


@pytest.mark.parametrize("case", NOT_OBJECTS)
def test_a_custom_object_answer_of_the_wrong_shape_is_the_servers_fault(case: str) -> None:
    """Custom objects come back from the client as plain JSON, indexed by every caller."""
    answer, wrong = NOT_OBJECTS[case]
    with pytest.raises(NotTheApi, match=re.escape(f"JSON that is not a Kubernetes object or list ({wrong})")):
        read_answer("the cluster at https://x", json.dumps(answer), "object", "application/json",
                    lambda text, kind, media: json.loads(text))


def test_the_real_shapes_pass() -> None:
    for answer in ({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"},
                   {"kind": "JobSetList", "metadata": {"continue": ""}, "items": []},
                   {"kind": "JobSet", "metadata": {"name": "x"}, "spec": {}, "status": {"conditions": [{}]}}):
        assert read_answer("x", json.dumps(answer), "object", None, lambda text, kind, media: json.loads(text)) \
            == answer


def test_job_list_given_items_that_are_not_a_list_names_the_cluster(front: FaultProxy) -> None:
    """Before: `internal error TypeError: 'int' object is not iterable`."""
    front.add("*", "", 200, body=json.dumps(NOT_OBJECTS["items-not-a-list"][0]).encode())
    res = run(REPO, "job", "list", "--team", "vision", "--server", front.url, "--token", "t")
    assert res.code == 2, res.err
    assert f"the cluster at {front.url} answered with JSON that is not a Kubernetes object or list (items is " \
        "not a list)" in res.err, res.err


NOWHERE = ["--server", "http://127.0.0.1:9", "--token", "t"]
SECONDS_ARGS: dict[str, list[str]] = {
    # before: nan reached the API client (`internal error ValidationError`), inf and 1e300 a timer
    # thread (OverflowError traceback), and the render lock's wait and job wait took them as given
    "request-timeout-nan": ["job", "list", "--request-timeout", "nan", *NOWHERE],
    "request-timeout-inf": ["job", "list", "--request-timeout", "inf", *NOWHERE],
    "request-timeout-1e300": ["job", "list", "--request-timeout", "1e300", *NOWHERE],
    "lock-timeout-nan": ["render", "--lock-timeout", "nan"],
    "wait-timeout-inf": ["job", "wait", "x", "-n", "vision", "--timeout", "inf", *NOWHERE],
    "wait-interval-nan": ["job", "wait", "x", "-n", "vision", "--interval", "nan", *NOWHERE],
}


@pytest.mark.parametrize("case", SECONDS_ARGS)
def test_seconds_that_no_timer_can_wait_are_a_usage_error(fleet_root: Path, case: str) -> None:
    res = run(fleet_root, *SECONDS_ARGS[case])
    assert res.code == 2 and "is not a number of seconds this platform can wait" in res.err, res.err


def test_a_token_with_a_line_break_is_refused_before_any_request(tmp_path: Path) -> None:
    """Before: `internal error ValueError: Invalid header value b'Bearer a\\nb'` (http.client)."""
    res = run(REPO, "job", "list", "--server", "http://127.0.0.1:9", "--token", "a\nb")
    assert res.code == 2 and res.err.startswith("the bearer token holds a control character"), res.err
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "x",
              "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
              "users": [{"name": "u", "user": {"token": "a\r\nX-Injected: 1"}}],
              "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}
    (tmp_path / "kubeconfig").write_text(json.dumps(config))
    res = run(REPO, "job", "list", "--kubeconfig", str(tmp_path / "kubeconfig"))
    assert res.code == 2 and res.err.startswith("the bearer token holds a control character"), res.err


JOB_FILES: dict[str, tuple[str, str]] = {
    # (what the file holds: "fifo" or its text, the error's start after "cannot read job file <path>")
    "fifo": ("fifo", ": not a regular file"),
    "deeper-than-python": ("[" * 100_000 + "]" * 100_000, ":1: invalid YAML: exceeded maximum nesting depth"),
    "alias-bomb": ("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "\n".join(
        f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)) + "\n",
        ":1: a4[0][6][8][8][8]: document expands to more than 20000 nodes"),
}


@pytest.mark.parametrize("case", JOB_FILES)
def test_a_job_file_that_is_not_one_is_refused_before_any_request(tmp_path: Path, case: str) -> None:
    """Before: `job submit FIFO` waited for a writer forever, a deeply nested file was `internal error
    RecursionError` (yaml.safe_load recurses per level)."""
    text, said = JOB_FILES[case]
    path = tmp_path / "job.yaml"
    if text == "fifo":
        os.mkfifo(path)
    else:
        path.write_text(text)
    started = time.monotonic()
    res = run(REPO, "job", "submit", str(path), *NOWHERE)
    assert res.code == 2 and res.err.startswith(f"cannot read job file {path}{said}"), res.err
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("listen", ["nonsense", ":-1", ":65536", ":\uff18\uff10"])
def test_an_address_health_run_cannot_listen_on_is_a_usage_error(listen: str) -> None:
    """Before: `internal error ValueError: invalid literal for int()` (nonsense, fullwidth digits)
    or `OverflowError: bind(): port must be 0-65535` once the reconciler was built."""
    res = run(REPO, "health", "run", "--cluster", "dev", "--listen", listen, *NOWHERE)
    assert res.code == 2 and f"Invalid value for '--listen': {listen!r} is not [HOST]:PORT with a port from 0 " \
        "to 65535." in res.err, res.err


def test_an_answer_of_null_is_the_servers_fault(front: FaultProxy) -> None:
    """Before: the client read `null` as None for a typed answer (a SelfSubjectAccessReview), and
    `job list` failed with `internal error AttributeError: 'NoneType' object has no attribute 'status'`."""
    front.add("*", "", 200, body=b"null")
    res = run(REPO, "job", "list", "--server", front.url, "--token", "t")
    assert res.code == 2, res.err
    assert f"the cluster at {front.url} answered with JSON that is not a Kubernetes object or list (null)" \
        in res.err, res.err


MISSHAPEN_JOBS: dict[str, tuple[str, dict[str, object], str]] = {
    # (kind, its spec or None for none, what the error names); before: each an internal error once
    # the pre-submit checks indexed it (KeyError 'spec' in companion_service, AttributeError in
    # requested_gpus or the capacity check)
    "jobset-no-spec": ("JobSet", {}, "spec is missing"),
    "jobset-replicated-job-a-number": ("JobSet", {"spec": {"replicatedJobs": [5]}},
                                       "spec.replicatedJobs is not a list of mappings"),
    "job-no-spec": ("Job", {}, "spec is missing"),
    "job-containers-a-mapping": ("Job", {"spec": {"template": {"spec": {"containers": {"name": "x"}}}}},
                                 "spec.template.spec.containers is not a list of mappings"),
    "rayjob-cluster-spec-a-list": ("RayJob", {"spec": {"rayClusterSpec": []}},
                                   "spec.rayClusterSpec is list, not a mapping"),
    "raycluster-workers-a-string": ("RayCluster", {"spec": {"headGroupSpec": {"template": {"spec": {
        "containers": []}}}, "workerGroupSpecs": "x"}}, "spec.workerGroupSpecs is not a list of mappings"),
    "trainjob-trainer-a-number": ("TrainJob", {"spec": {"trainer": 5}}, "spec.trainer is int, not a mapping"),
    "deployment-no-spec": ("Deployment", {}, "spec is missing"),
    "leaderworkerset-no-spec": ("LeaderWorkerSet", {}, "spec is missing"),
    # before: `internal error ValueError: invalid literal for int() with base 10: 'abc'` (requested_gpus)
    "gpu-request-not-a-number": ("Job", {"metadata": {"name": "x", "namespace": "speech", "labels": {
        "fleetgen.io/team": "speech", "fleetgen.io/cluster": "dev", "fleetgen.io/profile": "asr-eval"}},
        "spec": {"template": {"spec": {"containers": [{
        "name": "x", "resources": {"requests": {"nvidia.com/gpu": "abc"}}}]}}}},
        "spec.template.spec.containers[0].resources.requests.nvidia.com/gpu is 'abc' is not a Kubernetes quantity"),
    "gpu-limit-a-fraction": ("JobSet", {"spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {
        "template": {"spec": {"containers": [{"name": "x", "resources": {"limits": {"nvidia.com/gpu": "1.5"}}}]}}}}}]}},
        "spec.replicatedJobs[0].template.spec.template.spec.containers[0].resources.limits.nvidia.com/gpu is '1.5': "
        "nvidia.com/gpu counts whole devices"),
    "cpu-request-a-list": ("Deployment", {"spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"spec": {
        "containers": [{"name": "x", "resources": {"requests": {"cpu": [1]}}}]}}}},
        "spec.template.spec.containers[0].resources.requests.cpu is list, not a quantity"),
}


@pytest.mark.parametrize("case", MISSHAPEN_JOBS)
def test_a_job_file_without_the_fields_its_kind_needs_is_refused_by_name(front: FaultProxy, tmp_path: Path,
                                                                         case: str) -> None:
    """Before: `internal error KeyError: 'spec'` (compile/jobs.py companion_service) and the like, from
    the pre-submit checks, against any cluster that answers."""
    kind, spec, said = MISSHAPEN_JOBS[case]
    allowed = {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
               "metadata": {"name": "x"}, "spec": {}, "status": {"allowed": True}}
    front.add("*", "", 200, body=json.dumps(allowed).encode())
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": kind,
                                "metadata": {"name": "x", "namespace": "vision"}, **spec}))
    res = run(REPO, "job", "submit", str(path), "--server", front.url, "--token", "t")
    assert res.code == 2 and res.err.startswith(f"job file {path}: {said}") and "fleetgen job new" in res.err, res.err
    assert not [seen for seen in front.seen if seen[0] not in ("GET", "POST") or
                seen[0] == "POST" and "selfsubjectaccessreviews" not in seen[1]], front.seen


def _custom_objects() -> dict[str, tuple[str, str, str, bool]]:
    """(group, version, plural, namespaced) of every custom object the SDK reads: its job kinds, Ray
    clusters, and Kueue's objects."""
    from generator.jobs.job import KINDS
    from generator.jobs.ray import GROUP, PLURAL, VERSION

    found = {k.kind: (k.group, k.version, k.plural, True) for k in KINDS.values()}
    return {**found, "RayCluster": (GROUP, VERSION, PLURAL, True),
            "Workload": ("kueue.x-k8s.io", "v1beta1", "workloads", True),
            "LocalQueue": ("kueue.x-k8s.io", "v1beta1", "localqueues", True),
            "WorkloadPriorityClass": ("kueue.x-k8s.io", "v1beta1", "workloadpriorityclasses", False)}


CUSTOM_OBJECTS = _custom_objects()
A_LIST = {"kind": "List", "apiVersion": "v1", "items": [], "metadata": {}}
AN_OBJECT = {"kind": "X", "apiVersion": "v1", "metadata": {"name": "x"}}


@pytest.mark.parametrize("asked", ["get", "list"])
@pytest.mark.parametrize("kind", CUSTOM_OBJECTS)
def test_a_list_for_one_object_or_one_for_a_list_is_the_servers_fault(front: FaultProxy, kind: str,
                                                                      asked: str) -> None:
    """Before: a list answered where one object was asked passed the shape check, and `job logs`
    failed with `internal error KeyError: 'name'` (job.py, reading the job's metadata)."""
    from kubernetes import client

    from generator.jobs import connect

    group, version, plural, namespaced = CUSTOM_OBJECTS[kind]
    objects = client.CustomObjectsApi(connect(token="t", server=front.url, request_timeout=5).client)
    scope = ("namespaced", ("vision",)) if namespaced else ("cluster", ())

    def call() -> object:
        if asked == "get":
            return getattr(objects, f"get_{scope[0]}_custom_object")(group, version, *scope[1], plural, "x")
        return getattr(objects, f"list_{scope[0]}_custom_object")(group, version, *scope[1], plural)

    right, wrong, said = ((AN_OBJECT, A_LIST, "a list where one object was asked for") if asked == "get" else
                          (A_LIST, AN_OBJECT, "one object where a list was asked for"))
    front.add("GET", "", 200, times=1, body=json.dumps(right).encode())
    assert call() == right
    front.add("GET", "", 200, times=1, body=json.dumps(wrong).encode())
    with pytest.raises(NotTheApi, match=re.escape(f"not a Kubernetes object or list ({said})")):
        call()


def test_job_logs_given_a_list_for_its_job_names_the_cluster(front: FaultProxy) -> None:
    """Before: `internal error KeyError: 'name'`."""
    front.add("*", "", 200, body=json.dumps(A_LIST).encode())
    res = run(REPO, "job", "logs", "x", "--team", "vision", "--server", front.url, "--token", "t")
    assert res.code == 2, res.err
    assert f"the cluster at {front.url} answered with JSON that is not a Kubernetes object or list (a list where " \
        "one object was asked for)" in res.err, res.err
