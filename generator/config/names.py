"""Names given on a command line (team, cluster, pool, profile, job, namespace), held to their rule
before a command reads, writes or connects with them: names become paths (`teams/<team>.yaml`, URLs)."""

from __future__ import annotations

import re

from generator.config.jobs import PROFILE_NAME
from generator.config.types import DNS_LABEL, DNS_SUBDOMAIN, PATTERN_HELP
from generator.terminal import escape

RULES: dict[str, tuple[str, str]] = {"team": (DNS_LABEL, "research"), "cluster": (DNS_LABEL, "prod"),
                                     "pool": (DNS_LABEL, "h100"), "profile": (PROFILE_NAME, "pretrain"),
                                     "job": (DNS_SUBDOMAIN, "pretrain"), "namespace": (DNS_LABEL, "research")}
"""Each kind of name: the pattern its model field applies (`TeamConfig.name`, `ClusterConfig.name`,
`NodePool.name`, `JobProfile.name`), and a valid example for the error message. A job (of any kind
`fleetgen job` follows) is at most a DNS-1123 subdomain and a namespace a DNS-1123 label, as the API
server holds them (apimachinery's ValidateNamespaceName is NameIsDNSLabel): `.` or `..` there would
become a dot segment of the request URL, which the HTTP client resolves (`namespaces/ns/jobsets/..`
is sent as `namespaces/ns/`)."""
SHOWN = 80
"""At most this much of a refused value is quoted in the message."""


def name_problem(kind: str, value: str) -> str | None:
    """Why `value` cannot name a `kind` (a key of RULES), with how to fix it; None when it can."""
    pattern, example = RULES[kind]
    if re.fullmatch(pattern, value):
        return None
    shown = escape(value if len(value) <= SHOWN else value[:SHOWN - 3] + "...")
    return f"'{shown}' {PATTERN_HELP[pattern]}; give a {kind} name such as {example}"
