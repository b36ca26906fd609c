"""The rendered Prometheus rules, read by hand from a cluster's rendered PrometheusRules: as one rule file
for the real Prometheus tools (tests/upstream/prometheus_server.py), and what promtool's unit tests expect
each alert to say.

The fleet twin (tests/test_twin_gitops.py) loads the rules as production does, through the real
Prometheus operator, for prod-east and prod-west, and fires one alert from a scraped series. These
helpers serve what it cannot: every alert firing, and staying silent, on chosen series (promtool's
unit tests), `for:` timing on a server scraping a controlled endpoint, the dashboards' queries, and
the clusters no twin bootstraps (dev, hub)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import REPO


def rendered_groups(cluster: str = "prod-east", root: Path = REPO) -> list[dict[str, Any]]:
    """Rule groups of every rendered PrometheusRule of a cluster."""
    groups = []
    rendered = root / "rendered" / cluster
    for path in sorted([*(rendered / "monitoring").glob("prometheusrule-*.yaml"),
                        *(rendered / "health").glob("prometheusrule-*.yaml")]):
        groups.extend(yaml.safe_load(path.read_text())["spec"]["groups"])
    assert groups, f"no PrometheusRule rendered for {cluster}"
    return groups


def write_rules(folder: Path, cluster: str = "prod-east") -> Path:
    """The cluster's rules as one Prometheus rule file."""
    path = folder / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rendered_groups(cluster)}, sort_keys=False))
    return path


def alert_rule(name: str, cluster: str = "prod-east") -> dict[str, Any]:
    """The rendered rule of one alert."""
    for group in rendered_groups(cluster):
        for rule in group["rules"]:
            if rule.get("alert") == name:
                return rule
    raise KeyError(name)


def expand(template: str, labels: dict[str, str], value: str = "") -> str:
    """Expand the `{{ $labels.x }}` and `{{ $value }}` placeholders the rules use, as Prometheus does."""
    text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), "<no value>"), template)
    return text.replace("{{ $value }}", value)


def expected(name: str, labels: dict[str, str], value: str = "") -> dict[str, Any]:
    """promtool's exp_alerts entry for `name` with the given series labels."""
    rule = alert_rule(name)
    all_labels = {**labels, **rule["labels"]}
    return {"exp_labels": all_labels,
            "exp_annotations": {k: expand(v, all_labels, value) for k, v in rule["annotations"].items()}}
