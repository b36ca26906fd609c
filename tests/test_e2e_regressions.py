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
    return stack.dynamic(stack.client(f"member-{namespace}", (group,))).resources.get(
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


# Strings YAML readers disagree on (issue 11). Kubernetes decodes YAML with sigs.k8s.io/yaml
# (go-yaml v2: `1e3`, `y`, `0b11` are not strings); kustomize with kyaml (go-yaml v3, YAML 1.2).
NUMBER_LIKE = ["1e3", "6e1", "0o17", "3e-4", "-.5", ".5e3", "1E10", "1e999", "y", "n", "Y", "N", "yes", "off",
               "010", "1_0", "0x2", "0b11", "1:00", "12:30:00", "2001-12-14", "~", "null", "Null", "true", "False",
               ".inf", "-.Inf", ".nan", "+1", "1.", "-0", "<<", "=", "", " ", "1.2.3", "1e", "a b", "0.5"]


def _post_yaml(stack: Stack, text: str) -> dict[str, Any]:
    """POST YAML text as it is (Content-Type application/yaml): the API server's own decoder reads it."""
    import urllib.request

    request = urllib.request.Request(f"{stack.server}/api/v1/namespaces/default/configmaps?dryRun=All",
                                     data=text.encode(), method="POST",
                                     headers={"Content-Type": "application/yaml", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, context=stack._admin_tls(), timeout=30) as response:
            return dict(json.loads(response.read()))
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"the API server refused the YAML: {exc.read().decode()}") from None


def _config_map(values: list[str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "quoting", "namespace": "default"},
            "data": {f"k{i:02d}": value for i, value in enumerate(values)}}


def test_the_api_server_reads_every_number_like_string_back_as_that_string(kube_stack: Stack) -> None:
    from generator.yamltext import to_yaml

    wanted = _config_map(NUMBER_LIKE)
    assert _post_yaml(kube_stack, to_yaml(wanted))["data"] == wanted["data"]


def test_the_old_plain_form_is_refused_by_the_api_server(kube_stack: Stack) -> None:
    """What the emitter wrote before: `k00: 1e3`, a number where ConfigMap data must be text."""
    with pytest.raises(AssertionError, match="cannot unmarshal number|expected string"):
        _post_yaml(kube_stack, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: quoting, namespace: default}\n"
                               "data:\n  k00: 1e3\n")


def test_kustomize_keeps_every_number_like_string_a_string(kube_stack: Stack, tmp_path: Any) -> None:
    import subprocess

    from generator.yamltext import to_yaml
    from tests.upstream import tools

    wanted = _config_map(NUMBER_LIKE)
    (tmp_path / "cm.yaml").write_text(to_yaml(wanted))
    (tmp_path / "kustomization.yaml").write_text("resources: [cm.yaml]\n")
    built = subprocess.run([str(tools.binary("kustomize")), "build", str(tmp_path)], capture_output=True, text=True,
                           check=True, timeout=120).stdout
    assert _post_yaml(kube_stack, built)["data"] == wanted["data"]


@pytest.mark.parametrize("verb", ["logs", "status", "cancel"])
def test_job_verbs_on_an_unknown_job_are_one_clear_line(kube_stack: Stack, verb: str) -> None:
    """Used to be a 100-line traceback from the client (issue 11)."""
    from tests.conftest import run_process

    kubeconfig = str(kube_stack.identity().kubeconfig)
    proc = run_process(REPO, "job", verb, "no-such-job", "-n", "default", "--kubeconfig", kubeconfig)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) <= 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "404" in lines[0] and "it does not exist" in lines[0], lines
