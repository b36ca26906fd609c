"""How fleetgen's batch work runs: how a helper process starts (the one choice every process
pool here shares), and the cycle collector held off while a batch builds its data."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.context import ForkContext, SpawnContext

A = TypeVar("A")
R = TypeVar("R")


def pool_context() -> ForkContext | SpawnContext:
    """fork where it is safe and cheap (Linux, no other thread whose locks a child could inherit):
    a spawned interpreter costs a tenth of a second before it does anything, and must be sent
    its work; else spawn, the same result on every OS."""
    import multiprocessing

    if sys.platform.startswith("linux") and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


PR_SET_PDEATHSIG = 1
"""prctl(2): the signal the kernel sends this process when the thread that made it ends."""


@contextlib.contextmanager
def helper(work: Callable[[A], R], arg: A, context: ForkContext | SpawnContext) -> Iterator[Callable[[], R]]:
    """`work(arg)` in one child process while this one goes on; yields the call that waits for its
    result (or raises its error). The child never outlives this block: leaving it on an error,
    Ctrl-C or the SIGTERM handler's KeyboardInterrupt kills it at once (a process pool's exit
    would wait for it), and on Linux the kernel kills it when this process dies of anything,
    SIGKILL included (PR_SET_PDEATHSIG)."""
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_serve, args=(send, work, arg, os.getpid()), daemon=True)
    child.start()
    send.close()

    def result() -> R:
        try:
            ok, value = receive.recv()
        except EOFError:
            child.join()
            raise RuntimeError(f"the helper process ended without a result (exit {child.exitcode})") from None
        if ok:
            return value  # type: ignore[no-any-return]
        raise value
    try:
        yield result
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receive.close()


def die_with_parent(parent: int) -> None:
    """Make this child process end when `parent` does, however it ends (SIGKILL included): on Linux the
    kernel kills it (PR_SET_PDEATHSIG), and a parent already gone ends it at once. A process pool's
    workers call it first (the pool's `initializer`): a worker otherwise waits on its task queue for
    ever once the parent is killed, every worker holding the queue's write end open too. Elsewhere a
    pool's own shutdown is the only guard."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler, inherited by a fork
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the kernel was told
            os._exit(1)


def _serve(send: Connection, work: Callable[[A], R], arg: A, parent: int) -> None:
    """The child's side of `helper`: die with the parent, run, send (ok, result or error)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it ends this
    die_with_parent(parent)
    try:
        reply: tuple[bool, object] = (True, work(arg))
    except Exception as exc:  # noqa: BLE001 - carried to the parent, which raises it
        reply = (False, exc)
    try:
        send.send(reply)
    except Exception as exc:  # noqa: BLE001 - an error that does not pickle: its text then
        send.send((False, RuntimeError(f"{type(exc).__name__} in the helper process: {reply[1]!r}")))
    send.close()


LARGE_BATCH = 1_000_000
"""Objects made by a batch (less those freed) above which its survivors are frozen on the way out."""


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Hold off Python's cycle collector while a batch builds large acyclic data (a fleet, its
    objects, their text), then restore it. Each full collection walks every live object, and
    they come at every quarter of growth: at 10,000 teams in one pool that was 11 of 35 s, for 27
    MiB of cycles (measured with the collector off). Reference counting frees everything else."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            if gc.get_count()[0] > LARGE_BATCH:
                gc.freeze()
            gc.enable()
