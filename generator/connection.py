"""Connect to a cluster with the official client, and turn its failures into one-sentence errors.

The job SDK (generator.jobs) and the health reconciler (generator.reconciler) both reach the API
server over a `Connection` from `connect()`; neither imports the other.
"""

from __future__ import annotations

import functools
import json
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from generator.errors import UsageError
from generator.repofiles import refuse_special

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

T = TypeVar("T")
S = TypeVar("S")
P = ParamSpec("P")
TIMEOUT = (5.0, 60.0)
"""(connect, read) seconds for every API call: an unreachable cluster fails in seconds, not minutes."""


@dataclass(frozen=True)
class Connection:
    """A connection to one cluster, as `connect()` makes it: pass it as `api` to the SDK. `client` is the
    official client's ApiClient, for the kubernetes package's own APIs
    (`kubernetes.client.CoreV1Api(api.client)`); `timeout` the (connect, read) seconds each call may take
    (None: 5 and 60, or the health reconciler's shorter default); `flags` whether advice names
    command-line flags (the `fleetgen` command's connections) or Python arguments; `context` the
    kubeconfig context it was made from (None: a token and server, or the pod's service account)."""

    client: ApiClient
    timeout: tuple[float, float] | None = None
    flags: bool = False
    context: str | None = None
    versions: dict[str, str | None] = field(default_factory=dict, init=False, repr=False, compare=False)
    """The version of each API group the cluster prefers, as discovery said (asked once per connection)."""


def timeout(api: Connection | None) -> tuple[float, float]:
    """The (connect, read) timeout for calls on `api`: `connect(request_timeout=)` or TIMEOUT."""
    return (api.timeout if api is not None else None) or TIMEOUT


class ClusterError(Exception):
    """The cluster could not be reached, refused us, or said no; the message says which and what to do."""


def where(host: str, context: str | None) -> str:
    """A cluster as the user named it: its URL, and the kubeconfig context if any."""
    return f"the cluster at {host}" + (f" (context {context})" if context else "")


def word(api: Connection | bool | None, cli: str, python: str) -> str:
    """Advice as the caller can follow it: command-line flags for `fleetgen job`, arguments in Python.
    The command line marks its connections (`connect(..., flags=True)`); a notebook's are Python's."""
    return cli if flags_of(api) else python


CONTROL = re.compile(r"[\x00-\x1f\x7f]")
"""What http.client refuses in a header value (a line break would start a header of its own)."""


def flags_of(api: Connection | bool | None) -> bool:
    """Whether advice for `api` (a connection, or already the answer) should name command-line flags."""
    return api if isinstance(api, bool) else isinstance(api, Connection) and api.flags


def connect(kubeconfig: str | None = None, context: str | None = None, token: str | None = None,
            server: str | None = None, insecure_skip_tls_verify: bool = False, in_cluster: bool = False,
            certificate_authority: str | None = None, request_timeout: float | None = None,
            flags: bool = False) -> Connection:
    """A Connection from the pod's service account, a bearer token and server URL, or a kubeconfig.

    `certificate_authority` (a PEM file) verifies the server's certificate, for a token login to a
    cluster whose CA is not in the system's trust store; it overrides a kubeconfig's CA too.
    `request_timeout` bounds each call in seconds, its whole answer included (default: TIMEOUT's read
    timeout). `flags`: errors advise command-line flags (the `fleetgen` command sets it) instead of
    these arguments.
    """
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    configuration = client.Configuration()
    if in_cluster:
        try:
            config.load_incluster_config(client_configuration=configuration)
        except ConfigException as exc:
            raise UsageError(f"not running in a pod: {exc}") from None
    elif token or server:
        if not (token and server):
            raise UsageError(word(flags, "--token and --server go together", "token= and server= go together"))
        configuration.host = server.rstrip("/")
        configuration.api_key = {"BearerToken": token}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
    else:
        files = kubeconfig or os.environ.get("KUBECONFIG") or None
        try:
            for each in (files or str(Path("~/.kube/config").expanduser())).split(os.pathsep):
                refuse_special(each)  # the client would wait on a FIFO for ever
            # $KUBECONFIG as it is now: the client reads it once, when first imported, and a notebook
            # may set it later (a colon-separated list is merged, as kubectl does).
            config.load_kube_config(config_file=files, context=context, client_configuration=configuration)
        except (ConfigException, OSError, TypeError, ValueError) as exc:  # ValueError: bad base64 data
            files_named = kubeconfig or "~/.kube/config (or $KUBECONFIG)"
            raise UsageError(f"cannot load kubeconfig {files_named}: {exc}; " + word(
                flags, "pass --kubeconfig/--context, or --token and --server",
                "pass kubeconfig= and context=, or token= and server=")) from None
    if any(CONTROL.search(str(key)) for key in (configuration.api_key or {}).values()):
        raise UsageError("the bearer token holds a control character (a line break?), which no HTTP header may "
                         "carry: " + word(flags, "check --token, $FLEETGEN_TOKEN or the kubeconfig's token",
                                          "check token= or the kubeconfig's token"))
    if certificate_authority:
        if not Path(certificate_authority).is_file():
            raise UsageError(word(flags, "--certificate-authority", "certificate_authority=")
                             + f" {certificate_authority}: no such file")
        configuration.ssl_ca_cert = certificate_authority
    if insecure_skip_tls_verify:
        configuration.verify_ssl = False
    configuration.retries = 1
    named = _context_name(kubeconfig, context) if not (in_cluster or token or server) else None
    seconds = None
    if request_timeout is not None:
        if not 0 < request_timeout <= threading.TIMEOUT_MAX:  # nan too; a timer waits at most that
            raise UsageError(word(flags, "--request-timeout", "request_timeout=")
                             + f" must be positive seconds, not {request_timeout}")
        seconds = (min(TIMEOUT[0], request_timeout), float(request_timeout))
    api = _bounded_client()(configuration, where(configuration.host, named), seconds or TIMEOUT)
    return Connection(api, seconds, flags, named)


def _context_name(kubeconfig: str | None, context: str | None) -> str | None:
    """The kubeconfig context a connection uses: the one asked for, else the current one."""
    if context:
        return context
    from kubernetes import config
    from kubernetes.config.config_exception import ConfigException

    try:  # the file was judged by load_kube_config already: this only names it in messages
        return str(config.list_kube_config_contexts(kubeconfig or os.environ.get("KUBECONFIG") or None)[1]["name"])
    except (ConfigException, OSError, TypeError, KeyError, IndexError):
        return None


@functools.cache
def _bounded_client() -> type:
    """The official ApiClient, with a total deadline per request (kubetransport.py) and every answer
    read as JSON within bounds, or a ClusterError naming the cluster (never a traceback).

    Every generated API method calls `_call_with_legacy_options` (kubernetes 37.0.2
    client/api_client.py:160), a private method: the trickle tests in tests/test_api_faults.py fail
    if a client release routes around it."""
    from kubernetes import client

    from generator.kubetransport import ASKED, asked_for, read_answer, watch_connections, within

    class BoundedApiClient(client.ApiClient):  # type: ignore[misc]
        def __init__(self, configuration: Any, place: str, seconds: tuple[float, float]) -> None:
            super().__init__(configuration)
            self.place = place
            """The cluster as messages name it (`where`)."""
            self.seconds = seconds
            """Its Connection's (connect, read) timeout, for a call made without `_request_timeout`."""
            watch_connections(self.rest_client.pool_manager)

        def _call_with_legacy_options(self, request: Any, response_types_map: Any, async_req: Any,
                                      preload_content: bool, request_timeout: Any,
                                      return_http_data_only: bool) -> Any:
            def call() -> Any:
                return super(BoundedApiClient, self)._call_with_legacy_options(
                    request, response_types_map, async_req, preload_content, request_timeout, return_http_data_only)

            if async_req or not preload_content:  # a stream (logs --follow) lasts as long as the job
                return call()
            asked = ASKED.set(asked_for(request[0], request[1]))
            try:
                return within(total(self.seconds, request_timeout), request[1], call)
            finally:
                ASKED.reset(asked)

        def deserialize(self, response_text: str, response_type: str, content_type: str | None) -> Any:
            return read_answer(self.place, response_text, response_type, content_type, super().deserialize,
                               ASKED.get())

    return BoundedApiClient


def total(seconds: tuple[float, float], request_timeout: Any = None) -> float:
    """The whole time one request may take: its `_request_timeout`'s longest part, else the longest of
    the connection's (connect, read) `seconds` (`connect(request_timeout=)`)."""
    if isinstance(request_timeout, (int, float)):
        return float(request_timeout)
    return float(max(request_timeout or seconds))


def logout(api: Connection) -> None:
    """Forget the credentials of a connection from `connect()` and drop its open connections: a later
    call with it reaches the cluster as nobody and is refused (401), never acts as you. Files are left
    alone (a kubeconfig, a CA bundle); connect again to log back in."""
    from kubernetes.client import rest

    configuration = api.client.configuration
    configuration.api_key, configuration.api_key_prefix = {}, {}
    configuration.username = configuration.password = None
    configuration.cert_file = configuration.key_file = None
    configuration.refresh_api_key_hook = None
    api.client.rest_client.pool_manager.clear()
    api.client.rest_client = rest.RESTClientObject(configuration)  # its TLS context holds no client key now
    from generator.kubetransport import watch_connections

    watch_connections(api.client.rest_client.pool_manager)


def get_json(api: Connection, path: str) -> Any:
    """GET an API path no generated client method covers (discovery, subresources of aggregated APIs),
    with the client's own authentication, TLS and error handling (ApiException on failure)."""
    from generator.kubetransport import within

    params = api.client.param_serialize("GET", path, header_params={"Accept": "application/json"},
                                        auth_settings=["BearerToken"])

    def call() -> Any:
        response = api.client.call_api(*params, _request_timeout=timeout(api))
        response.read()
        return api.client.response_deserialize(response, {"200": "object"}).data
    return within(total(timeout(api)), params[1], call)


def _status_message(exc: Any) -> str:
    try:
        return str(json.loads(exc.body).get("message") or exc.reason)
    except (TypeError, ValueError, AttributeError, RecursionError):  # not a Status: a page, a list, too deep
        return str(exc.reason or exc)


HINTS: dict[int, tuple[str, str]] = {
    401: ("your credentials were rejected: log in again, or check --token",
          "your credentials were rejected: log in again, or check connect(token=...)"),
    403: ("you lack the rights for this: ask the team's owners to add you to its members (teams/<team>.yaml) or a "
          "platform engineer",) * 2,
    404: ("it does not exist (check the name and --namespace)", "it does not exist (check the name and namespace)"),
    409: ("it already exists: choose another --name, or cancel the old job first",
          "it already exists: choose another name=, or cancel() the old one first"),
    429: ("the API server is shedding load (too many requests): retry in a minute",) * 2,
}
"""Advice per HTTP status: (for the command line, for Python)."""


def explain(exc: BaseException, host: str, what: str, flags: bool = False) -> ClusterError:
    """A ClusterError for any failure of the client while doing `what`; `flags`: advise command-line flags."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError, MaxRetryError
    from urllib3.exceptions import ReadTimeoutError as TimedOut

    from generator.kubetransport import NotTheApi

    if isinstance(exc, MaxRetryError) and isinstance(exc.reason, TimedOut):
        exc = exc.reason
    if isinstance(exc, TimedOut):
        return ClusterError(f"the cluster at {host} did not answer in time while trying to {what}: retry, or "
                            + word(flags, "allow longer with --request-timeout SECONDS",
                                   "allow longer with connect(..., request_timeout=SECONDS)"))
    if isinstance(exc, NotTheApi):
        return ClusterError(f"{exc.where} answered with {exc.said} while trying to {what}, not with the "
                            "Kubernetes API's JSON: " + word(
                                flags, "check that --server or the --context's server is the API server (and log in "
                                "to a proxy in front of it first, if there is one)", "check that connect(server=...) "
                                "or the context's server is the API server (and log in to a proxy in front of it "
                                "first, if there is one)"))
    if isinstance(exc, ApiException):
        message = _status_message(exc)
        status = exc.status or 0
        default = "the API server failed: retry, and tell a platform engineer if it persists" \
            if status >= 500 else "see the message above"
        hint = HINTS[status][0 if flags else 1] if status in HINTS else default
        return ClusterError(f"{what} failed: {exc.status} {message}; {hint}")
    if isinstance(exc, (HTTPError, OSError)):
        return ClusterError(f"cannot reach the cluster at {host} while trying to {what}: {type(exc).__name__}; "
                            + word(flags, "check --server or --context", "check connect(server=...) or context=")
                            + " and your network or VPN")
    raise exc


def guarded(what: str) -> Callable[[Callable[Concatenate[S, P], T]], Callable[Concatenate[S, P], T]]:
    """Decorate a method of an object with an `api` attribute (a Connection): client failures become
    ClusterError, those of a generator's (a log stream's) included, which arrive while it is iterated."""
    def wrap(fn: Callable[Concatenate[S, P], T]) -> Callable[Concatenate[S, P], T]:
        import inspect

        def failed(self: Any, exc: BaseException) -> ClusterError:
            return explain(exc, self.api.client.configuration.host, what.format(self=self), flags_of(self.api))

        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def stream(self: S, *args: P.args, **kwargs: P.kwargs) -> Any:
                from kubernetes.client.exceptions import ApiException
                from urllib3.exceptions import HTTPError

                try:
                    yield from fn(self, *args, **kwargs)  # type: ignore[misc]
                except (ApiException, HTTPError, OSError) as exc:
                    raise failed(self, exc) from None
            return stream  # type: ignore[return-value]

        @functools.wraps(fn)
        def inner(self: S, *args: P.args, **kwargs: P.kwargs) -> T:
            from kubernetes.client.exceptions import ApiException
            from urllib3.exceptions import HTTPError

            try:
                return fn(self, *args, **kwargs)
            except (ApiException, HTTPError, OSError) as exc:
                raise failed(self, exc) from None
        return inner
    return wrap
