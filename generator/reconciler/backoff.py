"""How long the node watch waits before it lists or watches again after a failure: client-go's
reflector backoff, so a misbehaving API server gets a few requests a minute, not hundreds.

The numbers and the arithmetic are client-go v0.36.3's: `tools/cache/reflector.go:62-67` (800 ms
initial, 30 s cap, factor 2, jitter 1.0, reset after 2 min), built at `reflector.go:317-326` into
a `wait.Backoff` and wrapped by `DelayWithReset` (`reflector.go:336`); each step is
k8s.io/apimachinery v0.36.3 `pkg/util/wait/backoff.go:98-126` (`delay`: this step's wait is the
current duration plus up to `jitter` times itself, `wait.go:92-98`, the next is `factor` times it, at the cap the
steps end and every wait is the cap jittered, 30 to 60 s) and the reset is `backoff.go:292-304`
(`backoffManager.Step`: once more than the reset interval has passed since the last reset, start
over from 800 ms). The reflector waits one step before every list after the first
(`reflector.go:428`, `delayHandler.Until`) and before a watch retried after a refused connection
or a 429 (`reflector.go:612`, `657`).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable

INITIAL_SECONDS = 0.8
CAP_SECONDS = 30.0
FACTOR = 2.0
JITTER = 1.0
RESET_SECONDS = 120.0


class Backoff:
    """The next wait, one step at a time (one thread: the node watch's)."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic,
                 rand: Callable[[], float] = random.random) -> None:
        self.monotonic = monotonic
        self.rand = rand
        self._last_reset = monotonic()
        self._start()

    def _start(self) -> None:
        self._duration = INITIAL_SECONDS
        self._steps = math.ceil(CAP_SECONDS / INITIAL_SECONDS)

    def next(self) -> float:
        """Seconds to wait now (and move on to the next step)."""
        now = self.monotonic()
        if now - self._last_reset > RESET_SECONDS:
            self._start()
            self._last_reset = now
        duration = self._duration
        if self._steps >= 1:
            self._steps -= 1
            grown = duration * FACTOR
            if grown > CAP_SECONDS:
                grown, self._steps = CAP_SECONDS, 0
            self._duration = grown
        return duration + self.rand() * JITTER * duration
