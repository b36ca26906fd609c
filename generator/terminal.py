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
BLANK_CODE_POINTS = frozenset(
    [0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F, 0x2800, 0x3164, 0xFFA0]
    + list(range(0xFE00, 0xFE10)) + list(range(0xE0100, 0xE01F0)))
"""Unicode's default-ignorable and blank characters outside those categories: variation selectors
(U+FE0F), the combining grapheme joiner, Hangul fillers, the braille blank (U+2800). They render as
nothing or as a space, so they hide what a name says just as a zero-width space does."""
# GitHub Actions runs `::cmd` only at the start of a line, but finds `##[cmd]` (and Azure
# Pipelines `##vso[`) anywhere in it.
COMMAND_START = re.compile(r"^(\s*)(::)")
COMMAND_ANYWHERE = re.compile(r"##(vso)?\[")
SGR = re.compile(r"\x1b\[[0-9;]*m")
"""The colour sequences fleetgen itself writes with --color (only those are kept)."""


def _escape_char(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else (f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")


def is_hidden(ch: str) -> bool:
    """Is `ch` a character that does not show as what it is (HIDDEN_CATEGORIES)?"""
    return unicodedata.category(ch) in HIDDEN_CATEGORIES or ord(ch) in BLANK_CODE_POINTS


_ASCII_HIDDEN = re.compile(r"[\x00-\x1f\x7f]")
"""The hidden characters of ASCII: its controls (no ASCII character is of another hidden category,
and every blank code point is beyond it)."""


def first_hidden(value: str, allowed: str = "") -> str | None:
    """The first hidden character of `value` that is not in `allowed`, if any (in ASCII text, most
    values, looked for by one regular expression instead of character by character)."""
    if value.isascii():
        return next((m.group() for m in _ASCII_HIDDEN.finditer(value) if m.group() not in allowed), None)
    return next((ch for ch in value if ch not in allowed and is_hidden(ch)), None)


def escape(value: str) -> str:
    """One value for one line: every control or formatting character (newlines too) escaped."""
    return "".join(_escape_char(ch) if is_hidden(ch) else ch for ch in value)


def _chars(text: str) -> str:
    return "".join(_escape_char(ch) if ch != "\t" and is_hidden(ch) else ch for ch in text)


def _defuse_anywhere(text: str) -> str:
    """`a ##[error]b` -> `a # #[error]b` (and `##vso[`): what a runner finds anywhere in a line."""
    return COMMAND_ANYWHERE.sub(lambda m: f"# #{m.group(1) or ''}[", text)


def _defuse_start(text: str) -> str:
    """`::error::x` -> `: :error::x`: what a runner finds at the start of a line."""
    return COMMAND_START.sub(lambda m: f"{m.group(1)}: :", text, count=1)


def safe_text(text: str, color: bool = False) -> str:
    """Text for a terminal or a log: our own newlines and tabs kept, everything else escaped; with
    `color`, fleetgen's SGR colour sequences are kept too."""
    out = []
    for line in text.split("\n"):
        if not color:
            out.append(_defuse_start(_defuse_anywhere(_chars(line))))
            continue
        codes = SGR.findall(line)
        parts = [_defuse_anywhere(_chars(p)) for p in SGR.split(line)]
        first = next((i for i, p in enumerate(parts) if p.strip()), None)
        if first is not None:
            parts[first] = _defuse_start(parts[first])
        out.append("".join(p + (codes[i] if i < len(codes) else "") for i, p in enumerate(parts)))
    return "\n".join(out)


def table(header: list[str], rows: list[list[str]]) -> str:
    """A left-aligned text table (numbers right-aligned)."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if c[:1].isdigit() or c[:1] == "-" and c[1:2].isdigit() else c.ljust(w)
                         for c, w in zip(cells, widths, strict=True)).rstrip()
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])
