"""Issue 52: pods and isolation objects a team member cannot step around.

A member holds `edit` in the team's namespaces. The real kube-apiserver judges the rendered
ValidatingAdmissionPolicies (and RBAC) against the member's own identity, and the real kube-scheduler
shows what each refusal prevents: the same pod, let through in a namespace without the policies, is
bound to the cordoned, tainted node. No CNI runs here: what a NetworkPolicy allows is judged by the
API server's admission of the policy, not by traffic.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.reconciler.model import TAINT_KEY
from generator.reconciler.nodes import taint_value
from tests.conftest import REPO, add_tenancy, run
from tests.upstream.twin import MANAGED

pytestmark = pytest.mark.upstream

CLUSTER, TEAM = "prod-east", "vision"
MEMBER = ("dana@acme.com", ("vision",))
OUTSIDE = "platform-probe"
"""A namespace no team owns (no team-namespace label): the policies do not apply there."""
SICK = "sick-gpu-0"
UNHEALTHY = {"key": TAINT_KEY, "value": taint_value("xid-79"), "effect": "NoSchedule"}
"""The taint the health reconciler puts on a node with a faulty GPU (reconciler/nodes.py), beside its cordon."""
FORBIDDEN = [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"},
             {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "registry.example/train:1"}],
                     **spec}}


def _sick_node() -> dict[str, Any]:
    """One GPU node the health reconciler holds: cordoned and tainted, as reconciler/nodes.py patches it."""
    capacity = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": SICK, "labels": {"kubernetes.io/hostname": SICK, MANAGED: "h100"}},
            "spec": {"taints": []},
            "status": {"capacity": capacity, "allocatable": capacity,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "fake node for tests"}]}}


@pytest.fixture(scope="module")
def cluster(upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A control plane with kube-scheduler (pods are bound, none runs), one cordoned and tainted GPU
    node, and prod-east's rendered team policies and `vision` namespace."""
    from kubernetes import client

    from tests.upstream.cluster import Stack
    from tests.upstream.fleet import apply_team_namespace, create_nodes
    from tests.upstream.processes import wait_for
    from tests.upstream.twin import Twin

    stack = Stack.start(tmp_path_factory.mktemp("isolation"), upstream_etcd, platform=False)
    try:
        create_nodes(stack, [_sick_node()])
        admin = client.CoreV1Api(stack.client())
        admin.patch_node(SICK, {"spec": {"unschedulable": True, "taints": [UNHEALTHY]}})
        _namespace(admin, OUTSIDE)
        apply_team_namespace(stack, REPO / "rendered" / CLUSTER / "teams", TEAM, TEAM)
        wait_for(lambda: (admin.read_namespaced_resource_quota("fleetgen-gpus", TEAM).status.hard or None), 60)
        twin = Twin.start(stack, kubelets=False)
        try:
            yield stack
        finally:
            twin.stop()
    finally:
        stack.stop()


def _namespace(core: Any, name: str, labels: dict[str, str] | None = None) -> None:
    """A namespace with its `default` ServiceAccount (made by the controller; pods need it)."""
    from tests.upstream.processes import wait_for

    core.create_namespace({"metadata": {"name": name, "labels": labels or {}}})
    assert wait_for(lambda: any(sa.metadata.name == "default"
                                for sa in core.list_namespaced_service_account(name).items), 30)


def _refused(call: Any) -> str:
    """'' when the call succeeds, else the status and body of the API server's answer."""
    from kubernetes.client.exceptions import ApiException

    try:
        call()
    except ApiException as exc:
        return f"{exc.status} {exc.body}"
    return ""


def _bound_to(core: Any, namespace: str, name: str, seconds: float) -> str:
    from tests.upstream.processes import wait_for

    return str(wait_for(lambda: core.read_namespaced_pod(name, namespace).spec.node_name or "", seconds) or "")


def _unschedulable(core: Any, namespace: str, name: str) -> bool:
    """kube-scheduler tried the pod and found no node (its PodScheduled condition says so)."""
    from tests.upstream.processes import wait_for

    def said() -> bool:
        conditions = core.read_namespaced_pod(name, namespace).status.conditions or []
        return any(c.type == "PodScheduled" and c.reason == "Unschedulable" for c in conditions)
    return bool(wait_for(said, 30))


def test_a_member_cannot_tolerate_a_held_node_by_updating_a_pending_pod(cluster: Any) -> None:
    """The finding: the policy matched creation only, a pod update adding the tolerations was accepted,
    and kube-scheduler bound the pod to the cordoned, tainted node."""
    from kubernetes import client

    from tests.upstream.processes import wait_for

    admin, member = client.CoreV1Api(cluster.client()), client.CoreV1Api(cluster.client(*MEMBER))
    # What the refusal prevents: outside the team namespaces, the same update gets the pod bound there.
    admin.create_namespaced_pod(OUTSIDE, _pod("probe"))
    assert _unschedulable(admin, OUTSIDE, "probe")
    admin.patch_namespaced_pod("probe", OUTSIDE, {"spec": {"tolerations": FORBIDDEN}})
    assert _bound_to(admin, OUTSIDE, "probe", 30) == SICK

    member.create_namespaced_pod(TEAM, _pod("waiting"))
    assert _unschedulable(member, TEAM, "waiting")
    add = lambda *tolerations: [{"op": "add", "path": "/spec/tolerations/-", "value": t}  # noqa: E731
                                for t in tolerations]  # a JSON patch: tolerations may only be added to
    # The API server compiles a new policy asynchronously: wait until it answers, asking with dry runs
    # (admission judges them too), since a patch accepted before would give the pod the tolerations.
    assert wait_for(lambda: _refused(lambda: member.patch_namespaced_pod("waiting", TEAM, add(*FORBIDDEN),
                                                                         dry_run="All")), 30)
    refused = _refused(lambda: member.patch_namespaced_pod("waiting", TEAM, add(*FORBIDDEN)))
    assert refused.startswith("403") and "team pods may not tolerate fleetgen.io/gpu-unhealthy" in refused, refused
    for one in [*FORBIDDEN, {"operator": "Exists"}]:
        refused = _refused(lambda t=one: member.patch_namespaced_pod("waiting", TEAM, add(t)))
        assert "team pods may not tolerate" in refused, (one, refused)
    # An update adding an ordinary toleration, or changing anything else, passes.
    gpu = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    assert _refused(lambda: member.patch_namespaced_pod("waiting", TEAM, add(gpu))) == ""
    assert _refused(lambda: member.patch_namespaced_pod("waiting", TEAM, {"metadata": {"labels": {"x": "y"}}})) == ""
    assert _bound_to(admin, TEAM, "waiting", 5) == "", "the pod reached the held node"
    assert "team pods may not tolerate" in _refused(lambda: member.create_namespaced_pod(
        TEAM, _pod("born-tolerating", tolerations=FORBIDDEN)))


def test_a_pod_that_tolerated_before_the_policy_can_still_be_updated(cluster: Any) -> None:
    """Tolerations a pod already had pass an update (its controller must still be able to finish it);
    only added ones are judged."""
    from kubernetes import client

    admin = client.CoreV1Api(cluster.client())
    _namespace(admin, "joins-later")
    admin.create_namespaced_pod("joins-later", _pod("old", tolerations=FORBIDDEN[:1]))
    admin.patch_namespace("joins-later", {"metadata": {"labels": {"fleetgen.io/team-namespace": "true"}}})
    from tests.upstream.processes import wait_for

    more = [{"op": "add", "path": "/spec/tolerations/-", "value": FORBIDDEN[1]}]
    assert wait_for(lambda: _refused(lambda: admin.patch_namespaced_pod("old", "joins-later", more, dry_run="All")),
                    30)
    refused = _refused(lambda: admin.patch_namespaced_pod("old", "joins-later", more))
    assert "team pods may not tolerate" in refused, refused
    relabel = {"metadata": {"labels": {"a": "b"}}}
    assert _refused(lambda: admin.patch_namespaced_pod("old", "joins-later", relabel)) == ""


def test_a_member_cannot_put_a_pod_on_a_node_past_the_scheduler(cluster: Any) -> None:
    """`spec.nodeName` skips kube-scheduler, and with it every taint and cordon; binding a pod and
    ephemeral containers are subresources `edit` does not grant."""
    from kubernetes import client

    admin, member = client.CoreV1Api(cluster.client()), client.CoreV1Api(cluster.client(*MEMBER))
    admin.create_namespaced_pod(OUTSIDE, _pod("placed", nodeName=SICK))
    assert admin.read_namespaced_pod("placed", OUTSIDE).spec.node_name == SICK  # no scheduler asked

    refused = _refused(lambda: member.create_namespaced_pod(TEAM, _pod("placed", nodeName=SICK)))
    assert refused.startswith("403") and "team pods may not set spec.nodeName" in refused, refused
    member.create_namespaced_pod(TEAM, _pod("unplaced"))
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "unplaced"},
               "target": {"apiVersion": "v1", "kind": "Node", "name": SICK}}
    refused = _refused(lambda: member.create_namespaced_pod_binding("unplaced", TEAM, binding))
    assert refused.startswith("403") and 'cannot create resource \\"pods/binding\\"' in refused, refused
    refused = _refused(lambda: member.create_namespaced_binding(TEAM, binding))
    assert refused.startswith("403") and 'cannot create resource \\"bindings\\"' in refused, refused
    debug = {"spec": {"ephemeralContainers": [{"name": "dbg", "image": "registry.example/debug:1"}]}}
    refused = _refused(lambda: member.patch_namespaced_pod_ephemeralcontainers("unplaced", TEAM, debug))
    assert refused.startswith("403") and "pods/ephemeralcontainers" in refused, refused
    assert _bound_to(admin, TEAM, "unplaced", 5) == ""


def _policy(name: str, egress: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"podSelector": {}, **spec}
    if egress is not None:
        body |= {"policyTypes": ["Egress"], "egress": egress}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": name}, "spec": body}


def test_a_member_cannot_remove_or_loosen_fleetgens_objects(cluster: Any) -> None:
    """The finding: `edit` let a member delete fleetgen-team-isolation, voiding its deny list."""
    from kubernetes import client

    from tests.upstream.processes import wait_for

    net = client.NetworkingV1Api(cluster.client(*MEMBER))
    delete = lambda: net.delete_namespaced_network_policy("fleetgen-team-isolation", TEAM)  # noqa: E731
    refused = wait_for(lambda: _refused(lambda: net.delete_namespaced_network_policy(
        "fleetgen-team-isolation", TEAM, dry_run="All")), 30)
    assert refused.startswith("403") and "fleetgen keeps networkpolicies fleetgen-team-isolation" in refused, refused
    assert "fleetgen keeps" in _refused(delete)
    selects_nothing = {"spec": {"podSelector": {"matchLabels": {"nobody": "here"}}}}
    assert "fleetgen keeps" in _refused(lambda: net.patch_namespaced_network_policy(
        "fleetgen-team-isolation", TEAM, selects_nothing))
    lookalike = _policy("fleetgen-extra", [{"to": [{"podSelector": {}}]}])  # passes the egress rule
    assert "fleetgen keeps networkpolicies fleetgen-extra" in _refused(
        lambda: net.create_namespaced_network_policy(TEAM, lookalike))
    unlabelled = {"metadata": {"labels": {"app.kubernetes.io/managed-by": None}}}
    assert "fleetgen keeps" in _refused(lambda: net.patch_namespaced_network_policy(
        "fleetgen-team-isolation", TEAM, unlabelled))
    # The namespace's own ServiceAccounts are the members' (edit may impersonate them): refused too.
    admin_rbac = client.RbacAuthorizationV1Api(cluster.client())
    admin_rbac.create_namespaced_role_binding(TEAM, {
        "metadata": {"name": "default-edit"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                          "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": TEAM}]})
    as_sa = client.NetworkingV1Api(cluster.client(*MEMBER))
    as_sa.api_client.default_headers["Impersonate-User"] = f"system:serviceaccount:{TEAM}:default"
    refused = _refused(lambda: as_sa.delete_namespaced_network_policy("fleetgen-team-isolation", TEAM,
                                                                      dry_run="All"))
    assert "fleetgen keeps" in refused, refused
    # Neither ResourceQuota nor LimitRange: `edit` only reads them, and the policy holds beyond it.
    core = client.CoreV1Api(cluster.client(*MEMBER))
    assert _refused(lambda: core.delete_namespaced_resource_quota("fleetgen-gpus", TEAM)).startswith("403")
    assert _refused(lambda: core.delete_namespaced_limit_range("fleetgen-defaults", TEAM)).startswith("403")
    # The GitOps engine (a ServiceAccount of its own namespace, here with cluster-admin) still applies them.
    gitops = _gitops_identity(cluster)
    gitops_net = client.NetworkingV1Api(gitops)
    assert _refused(lambda: gitops_net.patch_namespaced_network_policy(
        "fleetgen-team-isolation", TEAM, {"metadata": {"annotations": {"synced": "yes"}}})) == ""
    assert _refused(lambda: client.CoreV1Api(gitops).delete_namespaced_limit_range(
        "fleetgen-defaults", TEAM, dry_run="All")) == ""


def _gitops_identity(cluster: Any) -> Any:
    """A ServiceAccount in `argocd` bound to cluster-admin, as Argo CD's application controller is."""
    from kubernetes import client

    from tests.upstream.processes import wait_for

    core, rbac = client.CoreV1Api(cluster.client()), client.RbacAuthorizationV1Api(cluster.client())
    _namespace(core, "argocd")
    core.create_namespaced_service_account("argocd", {"metadata": {"name": "argocd-application-controller"}})
    rbac.create_cluster_role_binding({
        "metadata": {"name": "argocd-application-controller"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "argocd-application-controller", "namespace": "argocd"}]})
    identity = cluster.token_identity("argocd", "argocd-application-controller")
    from kubernetes import config

    api = config.new_client_from_config(config_file=str(identity.kubeconfig))
    wait_for(lambda: _refused(lambda: client.CoreV1Api(api).list_namespaced_pod(TEAM)) == "", 30)
    return api


WIDENING = {
    "allow-all": [{}],
    "every-destination": [{"ports": [{"port": 443, "protocol": "TCP"}]}],
    "metadata-endpoint": [{"to": [{"ipBlock": {"cidr": "169.254.169.254/32"}}]}],
    "link-local": [{"to": [{"ipBlock": {"cidr": "169.254.0.0/16"}}]}],
    "anywhere-v4": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}],
    "anywhere-v6": [{"to": [{"ipBlock": {"cidr": "::/0"}}]}],
    "other-namespaces": [{"to": [{"namespaceSelector": {}}]}],
    "dns-every-port": [{"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}]}],
}
NARROWING = {
    "own-namespace": [{"to": [{"podSelector": {"matchLabels": {"app": "train"}}}]}],
    "a-registry": [{"to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}], "ports": [{"port": 443, "protocol": "TCP"}]}],
    "internet-but-metadata": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["169.254.169.254/32"]}}]}],
    "dns": [{"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                     "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
             "ports": [{"port": 53, "protocol": "UDP"}]}],
}


def test_a_members_own_network_policy_cannot_reopen_the_deny_list(cluster: Any) -> None:
    """NetworkPolicies add up: a member's allow-all would union with fleetgen's and void its deny list.
    Every egress peer in a team namespace must be one fleetgen's own policy allows."""
    from kubernetes import client

    from tests.upstream.processes import wait_for

    net = client.NetworkingV1Api(cluster.client(*MEMBER))
    create = lambda body: _refused(lambda: net.create_namespaced_network_policy(TEAM, body))  # noqa: E731
    first = wait_for(lambda: create(_policy("allow-all", WIDENING["allow-all"])), 30)
    assert first.startswith("403") and "egress in a team namespace is what the cluster file allows" in first, first
    for name, egress in WIDENING.items():
        assert "egress in a team namespace" in create(_policy(name, egress)), name
    for name, egress in NARROWING.items():
        assert create(_policy(name, egress)) == "", name
    # Ingress is the team's own to open (it exposes only its pods).
    assert create(_policy("from-gateway", ingress=[{"from": [{"namespaceSelector": {}}]}],
                          policyTypes=["Ingress"])) == ""
    # fleetgen's own policy passes the rule it sets for others.
    assert _refused(lambda: client.NetworkingV1Api(cluster.client()).patch_namespaced_network_policy(
        "fleetgen-team-isolation", TEAM, {"metadata": {"annotations": {"checked": "yes"}}})) == ""


@contextmanager
def _variant_policy(cluster: Any, root: Path, policy_name: str, name: str) -> Iterator[None]:
    """`root`'s rendered policy `policy_name`, bound under another name beside the repository's, for the block."""
    from tests.upstream.fleet import apply

    teams = root / "rendered" / CLUSTER / "teams"
    policy = yaml.safe_load((teams / f"validatingadmissionpolicy-{policy_name}.yaml").read_text())
    binding = yaml.safe_load((teams / f"validatingadmissionpolicybinding-{policy_name}.yaml").read_text())
    policy["metadata"]["name"] = binding["metadata"]["name"] = binding["spec"]["policyName"] = name
    apply(cluster, policy)
    apply(cluster, binding)
    try:
        yield
    finally:
        cluster.dynamic().resources.get(api_version=binding["apiVersion"], kind=binding["kind"]).delete(name=name)


def _dry_run(cluster: Any, policy: dict[str, Any]) -> str:
    """'' when the API server would admit the NetworkPolicy in the team namespace (as admin), else why not."""
    from tests.upstream.fleet import ApplyError, apply

    try:
        apply(cluster, {**policy, "metadata": {**policy["metadata"], "namespace": TEAM}}, dry_run=True)
    except ApplyError as exc:
        return str(exc)
    return ""


def _isolation(root: Path) -> dict[str, Any]:
    path = root / "rendered" / CLUSTER / "teams" / TEAM / TEAM / "networkpolicy-fleetgen-team-isolation.yaml"
    return dict(yaml.safe_load(path.read_text()))


def test_allow_cidrs_inside_the_deny_list_render_no_ip_block(fleet_root: Path, cluster: Any) -> None:
    """An `allow` CIDR wholly inside `deny` rendered an ipBlock that allowed the denied range; now it
    renders nothing, and the real API server admits the rendered policy under the egress rule."""
    from tests.upstream.processes import wait_for

    add_tenancy(fleet_root, CLUSTER, "  network:\n    egress:\n"
                "      allow: [169.254.169.254/32, 10.0.0.0/8]\n      deny: [169.254.0.0/16]\n")
    assert run(fleet_root, "render").code == 0
    policy = _isolation(fleet_root)
    assert policy["spec"]["egress"][2] == {"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}
    with _variant_policy(cluster, fleet_root, "fleetgen-team-egress", "fleetgen-team-egress-narrow"):
        # Admitted by the repository's own policy (inside 0.0.0.0/0, apart from its deny list): only this
        # cluster file's refuses it.
        outside = _policy("probe-outside-allow", [{"to": [{"ipBlock": {"cidr": "169.254.1.0/24"}}]}])
        refused = wait_for(lambda: _dry_run(cluster, outside), 30)
        assert "inside 169.254.169.254/32, 10.0.0.0/8 that carve out (except) 169.254.0.0/16" in refused, refused
        assert _dry_run(cluster, policy) == ""


def test_a_cluster_before_kubernetes_1_31_allows_exactly_fleetgens_ip_blocks(fleet_root: Path, cluster: Any) -> None:
    """CEL's cidr() reaches new admission expressions in 1.31 (a 1.30 API server compiles them against
    1.29's environment): before that, an ipBlock passes only as fleetgen's own policy writes it."""
    from tests.upstream.processes import wait_for

    path = fleet_root / "clusters" / f"{CLUSTER}.yaml"
    path.write_text(path.read_text().replace('kubernetesVersion: "1.36"', 'kubernetesVersion: "1.30"'))
    assert run(fleet_root, "render").code == 0
    egress = (fleet_root / "rendered" / CLUSTER / "teams" / "validatingadmissionpolicy-fleetgen-team-egress.yaml")
    assert "cidr(" not in egress.read_text()
    with _variant_policy(cluster, fleet_root, "fleetgen-team-egress", "fleetgen-team-egress-1-30"):
        registry = _policy("a-registry-1-30", NARROWING["a-registry"])
        refused = wait_for(lambda: _dry_run(cluster, registry), 30)
        assert "the ipBlocks of fleetgen-team-isolation" in refused, refused
        assert _dry_run(cluster, _isolation(fleet_root)) == ""
        assert _dry_run(cluster, _policy("own-namespace-1-30", NARROWING["own-namespace"])) == ""


def test_an_allowed_system_subject_is_a_member_to_the_objects_policy(fleet_root: Path, cluster: Any) -> None:
    """A ServiceAccount the cluster file lets team files list (`allowedSystemSubjects`) may be a member:
    it gets no pass a platform ServiceAccount gets."""
    from kubernetes import client, config

    from tests.upstream.processes import wait_for

    add_tenancy(fleet_root, CLUSTER, "  allowedSystemSubjects: [system:serviceaccount:ci:runner]\n")
    assert run(fleet_root, "render").code == 0
    admin = client.CoreV1Api(cluster.client())
    _namespace(admin, "ci")
    admin.create_namespaced_service_account("ci", {"metadata": {"name": "runner"}})
    client.RbacAuthorizationV1Api(cluster.client()).create_cluster_role_binding({
        "metadata": {"name": "ci-runner"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": "ci"}]})
    runner = client.NetworkingV1Api(config.new_client_from_config(
        config_file=str(cluster.token_identity("ci", "runner").kubeconfig)))
    delete = lambda: runner.delete_namespaced_network_policy(  # noqa: E731
        "fleetgen-team-isolation", TEAM, dry_run="All")
    assert wait_for(lambda: _refused(delete) == "", 30), _refused(delete)  # the repository's policy: a platform SA
    with _variant_policy(cluster, fleet_root, "fleetgen-team-objects", "fleetgen-team-objects-ci"):
        refused = wait_for(lambda: _refused(delete), 30)
        assert refused.startswith("403") and "fleetgen keeps networkpolicies" in refused, refused
