"""Findings and the exceptions that carry them to the CLI.

Every problem fleetgen reports is a `Finding`: it names the file, the line, the field and how
to fix it, so a reviewer never has to read a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from generator.terminal import escape


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
        # Every part may hold team text (a key, a file name, a value): escaped, so it stays on its line.
        file, field, message, hint = (escape(s) for s in (self.file, self.field, self.message, self.hint))
        where = file if self.line is None else f"{file}:{self.line}"
        text = f"{where}: {field}: {message}" if field else f"{where}: {message}"
        if self.check != "config":
            text = f"{text} [{self.check}]"
        return f"{text}\n    fix: {hint}" if hint else text


@dataclass
class InputError(Exception):
    """Raised when the inputs cannot be compiled; the CLI prints the findings and exits 2."""

    findings: list[Finding] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(str(f) for f in self.findings)


class UsageError(Exception):
    """A bad command line or a missing directory: exit code 2 with one sentence."""

    def __reduce__(self) -> tuple[object, ...]:
        """Rebuilt as it is, whatever a subclass's __init__ takes: a helper process
        (processes.helper) sends its error to the parent pickled, and pickle's default calls
        `cls(*args)` with the finished message alone."""
        return (_rebuilt, (type(self), self.args, self.__dict__))


def _rebuilt(cls: type[UsageError], args: tuple[object, ...], state: dict[str, object]) -> UsageError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error
