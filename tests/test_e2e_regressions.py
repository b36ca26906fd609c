"""Output fleetgen once shipped, which passed every check we had written ourselves and still failed
in a real cluster: each test here shows the real component refusing the old shape and accepting
what is rendered now, so the end-to-end suite provably catches both defects."""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

import pytest
import yaml
from kubernetes import dynamic
from kubernetes.client.exceptions import ApiException

from tests.conftest import REPO
from tests.upstream.cluster import Stack
from tests.upstream.fleet import apply

TEMPLATE = REPO / "rendered/prod-west/templates/ml-research/pretrain-4node.jobset.yaml"
TEAM_FOLDER = REPO / "rendered/prod-west/teams/vision/vision"
OLD_RULE_NAME = "fail-fast-on-program-errors"


def message(exc: ApiException) -> str:
    return str(json.loads(exc.body)["message"])


def load(path: Any) -> dict[str, Any]:
    return dict(yaml.safe_load(path.read_text()))


def fresh_namespace(stack: Stack) -> str:
    name = f"regress-{uuid.uuid4().hex[:6]}"
    stack.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def jobset_in(namespace: str, rule_name: str | None = None) -> dict[str, Any]:
    body = copy.deepcopy(load(TEMPLATE))
    body["metadata"]["namespace"] = namespace
    if rule_name is not None:
        body["spec"]["failurePolicy"]["rules"][0]["name"] = rule_name
    return body


def test_the_jobset_webhook_refuses_the_old_hyphenated_failure_policy_rule_name(kube_stack: Stack) -> None:
    """jobset v0.12.0 pkg/webhooks/jobset_webhook.go:418 (ruleNameFmt, checked at :465) requires rule names to match
    ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$; a DNS-style name with hyphens is refused."""
    namespace = fresh_namespace(kube_stack)
    with pytest.raises(ApiException) as refused:
        kube_stack.create(jobset_in(namespace, OLD_RULE_NAME), dry_run=True)
    assert refused.value.status == 422 and OLD_RULE_NAME in message(refused.value), message(refused.value)
    assert kube_stack.create(jobset_in(namespace), dry_run=True)["metadata"]["name"]


def _as_member(stack: Stack, namespace: str) -> Any:
    team = load(TEAM_FOLDER / "rolebinding-vision-members.yaml")
    group = team["subjects"][0]["name"]
    return dynamic.DynamicClient(stack.client(f"member-{namespace}", (group,))).resources.get(
        api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet")


def _bind(stack: Stack, namespace: str, filename: str) -> None:
    binding = load(TEAM_FOLDER / filename)
    binding["metadata"]["namespace"] = namespace
    apply(stack, binding)


def test_members_with_only_the_old_edit_binding_get_403_on_jobsets(kube_stack: Stack) -> None:
    """Kubernetes' `edit` role aggregates no JobSet rights (JobSet ships no aggregate-to-edit role):
    the old output, one RoleBinding to `edit`, left members unable to submit."""
    namespace = fresh_namespace(kube_stack)
    _bind(kube_stack, namespace, "rolebinding-vision-members.yaml")  # the old output: edit only
    jobsets = _as_member(kube_stack, namespace)
    with pytest.raises(ApiException) as forbidden:
        jobsets.create(body=jobset_in(namespace), namespace=namespace, dry_run="All")
    assert forbidden.value.status == 403 and 'cannot create resource "jobsets"' in message(forbidden.value)
    apply(kube_stack, load(REPO / "rendered/prod-west/teams/clusterrole-fleetgen-team-member.yaml"))
    _bind(kube_stack, namespace, "rolebinding-vision-members-jobs.yaml")  # what is rendered now
    accepted = jobsets.create(body=jobset_in(namespace), namespace=namespace, dry_run="All")
    assert accepted.metadata.namespace == namespace
