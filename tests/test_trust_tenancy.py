"""Issue 28: team namespaces bounded without Kueue's help, and the namespaces teams may claim.

The bounds are judged by the real kube-apiserver (Pod Security admission, the ValidatingAdmissionPolicy
on tolerations, LimitRanger, ResourceQuota admission with the real quota controller) acting on the
rendered objects, with a team member's own identity. NetworkPolicy enforcement needs a CNI, which
no test here runs: the API server only accepts the object.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO, add_tenancy, edit, run

# --- which namespaces a team may claim ---------------------------------------------------------

def tenancy(root: Path, cluster: str, body: str) -> None:
    """Add one line, `body`, to a cluster file's `tenancy:` block."""
    add_tenancy(root, cluster, f"  {body}\n")


ADD_ONS = ["gatekeeper-system", "kyverno", "calico-system", "calico-apiserver", "tigera-operator", "cilium",
           "external-secrets", "karpenter", "keda", "istio-system", "linkerd", "ingress-nginx", "cert-manager",
           "metallb-system", "longhorn-system", "rook-ceph", "velero", "vault", "crossplane-system",
           "kubernetes-dashboard", "argo-events", "kuberay-operator", "kubeflow", "cattle-system"]


@pytest.mark.parametrize("namespace", ADD_ONS)
def test_add_on_namespaces_cannot_be_claimed(fleet_root: Path, namespace: str) -> None:
    """Even where the cluster's policy would admit any name, the built-in list holds."""
    tenancy(fleet_root, "prod-east", "namespaces: {pattern: '.*'}")
    edit(fleet_root, "teams/vision.yaml", "namespaces: [vision, vision-eval]", f"namespaces: [vision, {namespace}]")
    result = run(fleet_root, "render")
    assert result.code == 2
    assert f"teams/vision.yaml:6: namespaces[1]: namespace '{namespace}' is reserved for the platform" in result.err


def test_a_name_outside_the_clusters_policy_is_refused_not_guessed(fleet_root: Path) -> None:
    edit(fleet_root, "teams/vision.yaml", "namespaces: [vision, vision-eval]", "namespaces: [vision, shared-data]")
    result = run(fleet_root, "render")
    assert result.code == 2
    assert ("teams/vision.yaml:6: namespaces[1]: namespace 'shared-data' is not one team 'vision' may claim in "
            "cluster 'dev'") in result.err
    assert "use 'vision' or 'vision-<purpose>'" in result.err


def test_the_cluster_allows_named_namespaces_and_its_own_pattern(fleet_root: Path) -> None:
    edit(fleet_root, "teams/vision.yaml", "namespaces: [vision, vision-eval]", "namespaces: [vision, shared-data]")
    for cluster in ("dev", "prod-east", "prod-west", "hub"):
        tenancy(fleet_root, cluster, "namespaces: {allowed: [shared-data]}")
    assert run(fleet_root, "render").code == 0
    edit(fleet_root, "clusters/dev.yaml", "  namespaces: {allowed: [shared-data]}\n",
         "  namespaces: {pattern: 'ml-{team}'}\n")
    result = run(fleet_root, "render")
    assert result.code == 2 and "namespace 'vision' is not one team 'vision' may claim in cluster 'dev'" in result.err


def test_a_looser_pod_security_level_is_only_a_cluster_exception(fleet_root: Path) -> None:
    tenancy(fleet_root, "prod-east", "podSecurityExceptions: {visoin: privileged}")
    result = run(fleet_root, "render")
    assert result.code == 2 and "tenancy.podSecurityExceptions.visoin: team 'visoin' has no quota" in result.err
    edit(fleet_root, "clusters/prod-east.yaml", "{visoin: privileged}", "{vision: privileged}")
    assert run(fleet_root, "render").code == 0
    ns = yaml.safe_load((fleet_root / "rendered/prod-east/teams/vision/vision/namespace-vision.yaml").read_text())
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    other = fleet_root / "rendered/prod-east/teams/ml-research/ml-research/namespace-ml-research.yaml"
    assert yaml.safe_load(other.read_text())["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"


def test_the_gpu_quota_is_what_the_teams_queues_could_hold() -> None:
    """vision in prod-east: 32 H100 guaranteed with borrowingLimit 64 -> 96 (no more exist to borrow)."""
    quota = yaml.safe_load((REPO / "rendered/prod-east/teams/vision/vision/resourcequota-fleetgen-gpus.yaml")
                           .read_text())
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "96"}


def test_the_isolation_policy_allows_no_address_of_the_deny_list() -> None:
    """Each rendered ipBlock minus its `except` ranges shares no address with any `deny` CIDR, for any
    allow and deny lists (an allow CIDR inside a deny one used to be rendered whole)."""
    import ipaddress

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from generator.compile.namespace_policies import egress_blocks
    from generator.config.cluster import Egress

    cidrs = st.sampled_from(["0.0.0.0/0", "10.0.0.0/8", "10.1.0.0/16", "169.254.0.0/16", "169.254.169.254/32",
                             "192.168.0.0/24", "::/0", "fd00::/8", "fd00:ec2::254/128"])

    @settings(max_examples=300, deadline=None)
    @given(st.lists(cidrs, max_size=4, unique=True), st.lists(cidrs, max_size=4, unique=True))
    def check(allow: list[str], deny: list[str]) -> None:
        for block in egress_blocks(Egress(allow=allow, deny=deny)):
            net = ipaddress.ip_network(block["ipBlock"]["cidr"])
            carved = [ipaddress.ip_network(e) for e in block["ipBlock"].get("except", [])]
            assert all(e != net and e.subnet_of(net) for e in carved), block  # type: ignore[arg-type]
            for d in map(ipaddress.ip_network, deny):
                if d.version == net.version and net.overlaps(d):
                    assert any(d.subnet_of(e) for e in carved if e.version == d.version), (block, d)  # type: ignore[arg-type]

    check()


# --- the real API server --------------------------------------------------------------------------

TEAM, CLUSTER = "vision", "prod-east"
MEMBER = ("carol@acme.com", ("vision",))


@pytest.fixture(scope="module")
def quota_stack(upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """An API server of this file's own (its controller manager runs the quota controller, which
    fills a ResourceQuota's status; until then admission refuses every pod: "status unknown for quota")."""
    from tests.upstream.cluster import Stack

    stack = Stack.start(tmp_path_factory.mktemp("quota"), upstream_etcd)
    yield stack
    stack.stop()


def _rendered(*parts: str) -> dict[str, Any]:
    return dict(yaml.safe_load((REPO / "rendered" / CLUSTER / Path(*parts)).read_text()))


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "registry.example/train:1"}
    container.update(spec.pop("container", {}))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "containers": [container], **spec}}


@pytest.fixture(scope="module")
def team_namespace(quota_stack: Any) -> Any:
    """The team's rendered tenancy objects applied as the fleet's GitOps engine would; a member's client."""
    from tests.upstream.fleet import apply_team_namespace
    from tests.upstream.processes import wait_for

    apply_team_namespace(quota_stack, REPO / "rendered" / CLUSTER / "teams", TEAM, TEAM)
    from kubernetes import client

    admin = client.CoreV1Api(quota_stack.client())
    wait_for(lambda: (admin.read_namespaced_resource_quota("fleetgen-gpus", TEAM).status.hard or None), 60)
    return client.CoreV1Api(quota_stack.client(*MEMBER))


def _refusal(api: Any, pod: dict[str, Any], namespace: str = TEAM) -> str:
    from kubernetes.client.exceptions import ApiException

    try:
        api.create_namespaced_pod(namespace, pod)
    except ApiException as exc:
        return f"{exc.status} {exc.body}"
    api.delete_namespaced_pod(pod["metadata"]["name"], namespace)
    return ""


def test_a_member_cannot_create_a_privileged_host_pod(team_namespace: Any) -> None:
    host = _pod("host-root", hostPID=True, hostNetwork=True,
                volumes=[{"name": "root", "hostPath": {"path": "/"}}],
                container={"securityContext": {"privileged": True},
                           "volumeMounts": [{"name": "root", "mountPath": "/host"}]})
    refused = _refusal(team_namespace, host)
    assert refused.startswith("403") and 'violates PodSecurity \\"baseline:v1.' in refused, refused
    for field in ("host namespaces", "privileged", "hostPath volumes"):
        assert field in refused


def test_a_member_cannot_tolerate_the_health_taint_or_a_cordon(team_namespace: Any) -> None:
    from tests.upstream.processes import wait_for

    health = _pod("sneaky", tolerations=[{"key": "fleetgen.io/gpu-unhealthy", "operator": "Exists",
                                          "effect": "NoSchedule"}])
    # The API server compiles a new policy asynchronously: wait until it answers.
    refused = wait_for(lambda: _refusal(team_namespace, health), 30)
    assert refused.startswith("403") and "team pods may not tolerate fleetgen.io/gpu-unhealthy" in refused
    cordon = _pod("cordon", tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])
    assert "team pods may not tolerate" in _refusal(team_namespace, cordon)
    everything = _pod("everything", tolerations=[{"operator": "Exists"}])
    assert "team pods may not tolerate" in _refusal(team_namespace, everything)
    gpu = _pod("gpu-ok", tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
    assert _refusal(team_namespace, gpu) == ""


def test_a_pod_without_requests_gets_the_default_ones(team_namespace: Any) -> None:
    created = team_namespace.create_namespaced_pod(TEAM, _pod("plain"))
    try:
        assert created.spec.containers[0].resources.requests == {"cpu": "100m", "memory": "256Mi"}
    finally:
        team_namespace.delete_namespaced_pod("plain", TEAM)


def test_pods_outside_kueue_cannot_exceed_what_the_team_could_be_admitted(team_namespace: Any) -> None:
    gpus = lambda n: {"resources": {"requests": {"nvidia.com/gpu": str(n)}, "limits": {"nvidia.com/gpu": str(n)}}}  # noqa: E731
    refused = _refusal(team_namespace, _pod("too-many", container=gpus(97)))
    assert refused.startswith("403") and "exceeded quota: fleetgen-gpus" in refused, refused
    assert _refusal(team_namespace, _pod("eight", container=gpus(8))) == ""


def test_the_network_policy_is_accepted_as_rendered(team_namespace: Any, quota_stack: Any) -> None:
    """No CNI runs here: the API server's validation is the only judge of the NetworkPolicy."""
    from kubernetes import client

    policy = client.NetworkingV1Api(quota_stack.client()).read_namespaced_network_policy(
        "fleetgen-team-isolation", TEAM)
    assert policy.spec.policy_types == ["Ingress", "Egress"]
    assert policy.spec.egress[2].to[0].ip_block._except == ["169.254.169.254/32"]


def test_a_restricted_cluster_gets_job_templates_that_meet_restricted(fleet_root: Path, quota_stack: Any) -> None:
    """`tenancy.podSecurity: restricted` must not lock out fleetgen's own job templates: their pods
    are admitted by the real API server in a namespace enforcing `restricted`, and the templates
    of a baseline cluster (no securityContext) are refused there."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from tests.upstream.fleet import apply

    template = "rendered/prod-east/templates/ml-research/finetune-1node.jobset.yaml"
    baseline = yaml.safe_load((fleet_root / template).read_text())
    tenancy(fleet_root, "prod-east", "podSecurity: restricted")
    assert run(fleet_root, "render").code == 0
    restricted = yaml.safe_load((fleet_root / template).read_text())
    ns = yaml.safe_load((fleet_root / "rendered/prod-east/teams/ml-research/ml-research/namespace-ml-research.yaml")
                        .read_text())
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    apply(quota_stack, ns)
    api = client.CoreV1Api(quota_stack.client())

    def admitted(jobset: dict[str, Any]) -> str:
        spec = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"}, "spec": spec}
        try:
            api.create_namespaced_pod("ml-research", pod, dry_run="All")
        except ApiException as exc:
            return f"{exc.status} {exc.body}"
        return ""

    assert admitted(restricted) == ""
    refused = admitted(baseline)
    assert refused.startswith("403") and 'violates PodSecurity \\"restricted:v1.' in refused, refused


def test_the_default_namespace_pattern_admits_exactly_what_its_regular_expression_does() -> None:
    """`admits` checks the default pattern without compiling it per team (one compile per team was
    2.5 s at 10,000 teams); for any team name and namespace it answers as the pattern itself."""
    import re

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from generator.config.cluster import DEFAULT_NAMESPACE_PATTERN, TEAM_PLACEHOLDER, NamespacePolicy

    policy = NamespacePolicy()
    assert policy.pattern == DEFAULT_NAMESPACE_PATTERN
    names = st.text(alphabet="ab-1.*+?()[]\\|^$", max_size=8)

    @settings(max_examples=300, deadline=None)
    @given(names, names, st.sampled_from(["", "-", "-x", "-x-", "--x", "-a1", ".x"]))
    def check(team: str, namespace: str, tail: str) -> None:
        for ns in (namespace, team + tail, team):
            expected = re.fullmatch(DEFAULT_NAMESPACE_PATTERN.replace(TEAM_PLACEHOLDER, re.escape(team)), ns)
            assert policy.admits(team, ns) is (expected is not None), (team, ns)

    check()


@pytest.mark.parametrize(("change", "said"), [
    ({}, None),
    ({"rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]},
     "ClusterRole 'fleetgen-members-vision' grants other than the cluster's member rights"),
    ({"name": "fleetgen-team-member"}, "ClusterRole 'fleetgen-team-member' is not team 'vision''s"),
    ({"kind": "ClusterRoleBinding", "roleRef": "cluster-admin"}, "binds another role"),
])
def test_a_teams_cluster_wide_role_is_exactly_the_clusters_member_reads(change: dict[str, Any],
                                                                       said: str | None) -> None:
    """The last line after the checks: a team's folder may hold one ClusterRole and its binding, holding exactly
    the cluster-wide member rights of compile/member_rights.py; anything else there is a finding."""
    from generator.checks import load_fleet
    from generator.compile.manifest import Manifest
    from generator.compile.member_rights import rules
    from generator.validate.tenancy_rules import validate_tenancy

    fleet = load_fleet(REPO)
    cluster = fleet.clusters["prod-east"].config
    team = fleet.teams["vision"].config
    name = change.get("name", "fleetgen-members-vision")
    body: dict[str, Any] = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": change.get("kind", "ClusterRole"),
                            "metadata": {"name": name}}
    if body["kind"] == "ClusterRole":
        body["rules"] = change.get("rules", rules(cluster, "cluster", team))
    else:
        body |= {"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": change["roleRef"]},
                 "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "vision"}]}
    findings = validate_tenancy(cluster, {"vision": team}, [Manifest(("teams", "vision"), body,
                                                                     ("teams/vision.yaml", 1))], {})
    if said is None:
        assert findings == []
    else:
        assert any(said in f.message for f in findings), findings
