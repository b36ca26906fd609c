"""The result table every benchmark prints."""

from __future__ import annotations


def print_table(rows: list[tuple[str, str]]) -> None:
    """Two left-aligned columns."""
    width = max(len(key) for key, _ in rows)
    for key, value in rows:
        print(f"{key.ljust(width)}  {value}")
