"""Prometheus-style durations (`30s`, `15m`, `1h30m`) as seconds."""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def seconds(text: str) -> float:
    """`1h30m` -> 5400.0."""
    parts = re.findall(r"([0-9]+)(ms|s|m|h|d|w|y)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"{text!r} is not a duration such as 30s, 15m or 1h30m")
    return float(sum(int(n) * _UNITS[u] for n, u in parts))
