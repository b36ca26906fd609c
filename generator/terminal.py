"""Everything fleetgen prints passes through `safe_text`: team text can never drive a terminal or a CI log.

Values come from team files written by many hands. Printed raw, `\\x1b]52;...` writes the
reader's clipboard (OSC 52), `\\r` overwrites a line, U+202E reverses what follows, and a line
starting with `::error` or `::add-mask` is a GitHub Actions workflow command. So control and
formatting characters are shown as escapes, and a line that a CI runner would take for a
command gets a visible space in its prefix.
"""

from __future__ import annotations

import re
import unicodedata

# Characters that hide what a text says: controls (escape sequences, \r), formatting (bidi
# overrides, zero-width), private use, unassigned, surrogates, line and paragraph separators.
# The reader refuses them in config values, and everything printed shows them as escapes.
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cn", "Cs", "Zl", "Zp"})
# Line prefixes CI runners execute (GitHub Actions `::cmd`, Azure Pipelines `##vso[`, `##[group]`).
COMMAND_PREFIXES = re.compile(r"^(\s*)(::|##\[|##vso\[)")
SGR = re.compile(r"\x1b\[[0-9;]*m")
"""The colour sequences fleetgen itself writes with --color (only those are kept)."""


def _escape_char(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else (f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")


def is_hidden(ch: str) -> bool:
    """Is `ch` a character that does not show as what it is (HIDDEN_CATEGORIES)?"""
    return unicodedata.category(ch) in HIDDEN_CATEGORIES


def first_hidden(value: str, allowed: str = "") -> str | None:
    """The first hidden character of `value` that is not in `allowed`, if any."""
    return next((ch for ch in value if ch not in allowed and is_hidden(ch)), None)


def escape(value: str) -> str:
    """One value for one line: every control or formatting character (newlines too) escaped."""
    return "".join(_escape_char(ch) if is_hidden(ch) else ch for ch in value)


def _chars(text: str) -> str:
    return "".join(_escape_char(ch) if ch != "\t" and is_hidden(ch) else ch for ch in text)


def _defuse(text: str) -> str:
    """`::error::x` -> `: :error::x`: still readable, no longer a command."""
    return COMMAND_PREFIXES.sub(lambda m: f"{m.group(1)}{m.group(2)[0]} {m.group(2)[1:]}", text, count=1)


def safe_text(text: str, color: bool = False) -> str:
    """Text for a terminal or a log: our own newlines and tabs kept, everything else escaped; with
    `color`, fleetgen's SGR colour sequences are kept too."""
    out = []
    for line in text.split("\n"):
        if not color:
            out.append(_defuse(_chars(line)))
            continue
        codes = SGR.findall(line)
        parts = [_chars(p) for p in SGR.split(line)]
        first = next((i for i, p in enumerate(parts) if p.strip()), None)
        if first is not None:
            parts[first] = _defuse(parts[first])
        out.append("".join(p + (codes[i] if i < len(codes) else "") for i, p in enumerate(parts)))
    return "\n".join(out)
