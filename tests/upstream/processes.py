"""Child processes of the test control plane: started on free loopback ports, never outliving us.

Each process gets its own session and, on Linux, a parent-death signal, so a test run that is
killed (even with SIGKILL) takes etcd, the API server and the managers with it. A process that
dies while starting (a port taken between choosing and binding it, say) is started again on new
ports by `start_with_retry`.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
PR_SET_PDEATHSIG = 1


class StartError(Exception):
    """A component did not come up; the message quotes the end of its log."""


def _die_with_parent() -> None:
    with contextlib.suppress(OSError):  # not Linux: the session cleanup in `stop` still applies
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Process:
    """A running program, its log file and its ports."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(text[-lines:])

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds; the whole process group, including members
        that ignore SIGTERM and would outlive the leader (SkyPilot's executors do)."""
        if self.popen.poll() is not None and not self.group():
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=grace)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=10)

    def group(self) -> list[int]:
        """Live processes of this process's group (it leads one: `spawn` starts a session)."""
        found = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == self.popen.pid and fields[0] != "Z":  # pgrp; a zombie is already dead
                found.append(int(proc.name))
        return found


def spawn(name: str, argv: Sequence[str], log: Path, env: dict[str, str] | None = None,
          cwd: Path | None = None) -> Process:
    handle = log.open("ab")
    try:
        popen = subprocess.Popen(list(argv), stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 env={**os.environ, **(env or {})}, cwd=cwd, start_new_session=True,
                                 preexec_fn=_die_with_parent)
    finally:
        handle.close()
    return Process(name, popen, log)


def wait_for(condition: Callable[[], Any], seconds: float, step: float = 0.25) -> Any:
    """Poll until `condition()` is truthy and return it; the last value (falsy) after `seconds`."""
    deadline = time.monotonic() + seconds
    value = condition()
    while not value and time.monotonic() < deadline:
        time.sleep(step)
        value = condition()
    return value


def wait_or_fail(condition: Callable[[], Any], seconds: float, what: str) -> Any:
    """Poll every 0.5 s until `condition()` is truthy and return it; AssertionError saying `what` was not
    seen after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"{what} within {seconds:.0f} s")


def wait_until(proc: Process, ready: Callable[[], bool], seconds: float, what: str) -> None:
    """Poll `ready` until it holds; StartError if the process exits or time runs out."""
    deadline = time.monotonic() + seconds
    last = ""
    while True:
        if not proc.alive():
            raise StartError(f"{proc.name} exited ({proc.popen.returncode}) before {what}:\n{proc.tail()}")
        try:
            if ready():
                return
        except Exception as exc:  # noqa: BLE001 - anything short of ready means "not yet"
            last = f"{type(exc).__name__}: {getattr(exc, 'body', None) or exc}"[:1500]
        if time.monotonic() >= deadline:
            raise StartError(f"{proc.name} not {what} after {seconds:.0f} s (last: {last or 'not ready'}):\n"
                             f"{proc.tail()}")
        time.sleep(0.2)


def start_with_retry(start: Callable[[], T], attempts: int = 3) -> T:
    """`start()` (which picks fresh ports each call) until a process comes up."""
    last: StartError | None = None
    for _ in range(attempts):
        try:
            return start()
        except StartError as exc:
            last = exc
            if "address already in use" not in str(exc):
                raise
    assert last is not None
    raise last
