"""Names given on a command line (team, cluster, pool, profile), held to their model field's rule
before a command reads or writes anything with them: names become paths (`teams/<team>.yaml`)."""

from __future__ import annotations

import re

from generator.config.jobs import PROFILE_NAME
from generator.config.types import DNS_LABEL, PATTERN_HELP
from generator.terminal import escape

RULES: dict[str, tuple[str, str]] = {"team": (DNS_LABEL, "research"), "cluster": (DNS_LABEL, "prod"),
                                     "pool": (DNS_LABEL, "h100"), "profile": (PROFILE_NAME, "pretrain")}
"""Each kind of name: the pattern its model field applies (`TeamConfig.name`, `ClusterConfig.name`,
`NodePool.name`, `JobProfile.name`), and a valid example for the error message."""
SHOWN = 80
"""At most this much of a refused value is quoted in the message."""


def name_problem(kind: str, value: str) -> str | None:
    """Why `value` cannot name a `kind` (a key of RULES), with how to fix it; None when it can."""
    pattern, example = RULES[kind]
    if re.fullmatch(pattern, value):
        return None
    shown = escape(value if len(value) <= SHOWN else value[:SHOWN - 3] + "...")
    return f"'{shown}' {PATTERN_HELP[pattern]}; give a {kind} name such as {example}"
