"""Findings and the exceptions that carry them to the CLI.

Every problem fleetgen reports is a `Finding`: it names the file, the line, the field and how
to fix it, so a reviewer never has to read a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, order=True)
class Finding:
    """One problem, located in an input file (or in a rendered object traced back to one)."""

    file: str
    line: int | None
    field: str
    message: str
    hint: str = ""
    check: str = "config"

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        text = f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        if self.check != "config":
            text = f"{text} [{self.check}]"
        return f"{text}\n    fix: {self.hint}" if self.hint else text


@dataclass
class InputError(Exception):
    """Raised when the inputs cannot be compiled; the CLI prints the findings and exits 2."""

    findings: list[Finding] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(str(f) for f in self.findings)


class UsageError(Exception):
    """A bad command line or a missing directory: exit code 2 with one sentence."""
