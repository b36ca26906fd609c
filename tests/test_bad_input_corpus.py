"""The bad-input corpus (tests/bad_inputs.py): every case exits 2 with its exact first error line,
says nothing was written, and leaves rendered/ byte-identical."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bad_inputs import CASES, TEAM
from tests.conftest import run, snapshot

EXPECTED: dict[str, str] = {
    'unclosed-bracket': "teams/corpus.yaml:3: invalid YAML: did not find expected ',' or ']'",
    'tab-indent': 'teams/corpus.yaml:3: invalid YAML: found character that cannot start any token',
    'two-documents': 'teams/corpus.yaml:2: invalid YAML: but found another document',
    'unterminated-quote': 'teams/corpus.yaml:3: invalid YAML: found unexpected end of stream',
    'scalar-file': 'teams/corpus.yaml:1: the file must be a mapping of keys to values',
    'list-file': 'teams/corpus.yaml:1: the file must be a mapping of keys to values',
    'empty-file': 'teams/corpus.yaml:1: file is empty',
    'alias-bomb': 'teams/corpus.yaml:1: a4[0][6][8][8][8]: document expands to more than 20000 nodes (an alias bomb?)',
    'deep-nesting': 'teams/corpus.yaml:2: owners[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]: nesting deeper than 32 levels',
    'deep-alias-chain': 'teams/corpus.yaml:1: l30[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0].gpus: nesting deeper than 32 levels',
    'merge-key': 'teams/corpus.yaml:3: YAML merge keys (<<) are not supported',
    'python-tag': "teams/corpus.yaml:1: name: unsupported YAML tag 'tag:yaml.org,2002:python/object/apply:os.system'",
    'huge-file': 'teams/corpus.yaml: file is 2097188 bytes, more than the 1048576 allowed',
    'huge-value': "teams/corpus.yaml:2: owners[0]: string should have at most 320 characters (got '@xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...)",
    'not-utf8': 'teams/corpus.yaml:2: file is not valid UTF-8',
    'gpus-string': "teams/corpus.yaml:5: quotas.dev.l4.gpus: expected a whole number, got text '1'",
    'gpus-float': 'teams/corpus.yaml:5: quotas.dev.l4.gpus: expected a whole number, got float 1.5',
    'gpus-bool': "teams/corpus.yaml:5: quotas.dev.l4.gpus: unquoted 'yes' is a boolean in YAML 1.1 and text in YAML 1.2",
    'namespaces-string': "teams/corpus.yaml:3: namespaces: expected a list, got text 'corpus'",
    'quotas-list': "teams/corpus.yaml:3: quotas: expected a mapping, got list ['dev']",
    'owners-string': "teams/corpus.yaml:2: owners: expected a list, got text '@acme/x'",
    'groups-mapping': "teams/corpus.yaml:3: members.groups: expected a list, got dict {'a': 'b'}",
    'weight-string': "teams/corpus.yaml:3: fairSharingWeight: expected a number, got text 'heavy'",
    'weight-tiny': "teams/corpus.yaml:3: fairSharingWeight: 7.1e-78 is between 0 and 0.001: use 0 (no fair share) or at least 0.001",
    'duplicate-top-key': "teams/corpus.yaml:3: name: duplicate key 'name' (first defined on line 1)",
    'duplicate-nested-key': "teams/corpus.yaml:6: quotas.dev.l4: duplicate key 'l4' (first defined on line 5)",
    'cyrillic-name': "teams/corpus-а.yaml:1: name: must be a DNS-1123 label: at most 63 lower-case letters, digits or '-', starting and ending with a letter or digit (got 'corpus-а')",
    'fullwidth-namespace': "teams/corpus.yaml:3: namespaces[0]: must be a DNS-1123 label: at most 63 lower-case letters, digits or '-', starting and ending with a letter or digit (got 'ｃｏｒｐｕｓ')",
    'zero-width-name': 'teams/corpus.yaml:1: name: contains the control or invisible character U+200B (ZERO WIDTH SPACE), which terminals, logs and reviewers do not show as it is',
    'dotdot-name': "teams/corpus.yaml:1: name: must be a DNS-1123 label: at most 63 lower-case letters, digits or '-', starting and ending with a letter or digit (got '../etc')",
    'slash-namespace': "teams/corpus.yaml:3: namespaces[0]: must be a DNS-1123 label: at most 63 lower-case letters, digits or '-', starting and ending with a letter or digit (got 'a/b')",
    'dotdot-cluster-key': "teams/corpus.yaml:4: quotas.../x: must be a DNS-1123 label: at most 63 lower-case letters, digits or '-', starting and ending with a letter or digit (got '../x')",
    'slash-profile': "teams/corpus.yaml:7: jobProfiles[0].name: must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter and ending with a letter or digit (got 'a/b')",
    'name-64': "teams/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.yaml:1: name: string should have at most 63 characters (got 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...)",
    'namespace-64': "teams/corpus.yaml:3: namespaces[0]: string should have at most 63 characters (got 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...)",
    'priority-254': "clusters/dev.yaml:16: priorities[0].name: string should have at most 253 characters (got 'pppppppppppppppppppppppppppppppppppppppppppppppppppppppp...)",
    'label-value-64': "clusters/dev.yaml:14: nodePools[0].nodeLabels.nvidia.com/gpu.product: string should have at most 63 characters (got 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...)",
    'profile-name-past-budget': "teams/corpus.yaml:7: jobProfiles[0].name: name 'pppppppppppppppppppppppppppppppppppppppppppppppppp' has 50 characters but at most 45 fit: its longest pod name would be 'pppppppppppppppppppppppppppppppppppppppppppppppppp-workers-0-0-xxxxx' (68 > 63); shorten it by 5",
    'over-capacity': "clusters/dev.yaml:11: nodePools[0]: pool 'l4' has 8 GPUs x overcommit 2 = 16, but teams hold 23 (corpus 9, speech 6, ml-research 4, platform-ci 2, vision 2)",
    'lend-more-than-held': 'teams/corpus.yaml:5: quotas.dev.l4: lendingLimit (2) is more than gpus (1); a team can only lend GPUs it has',
    'negative-gpus': 'teams/corpus.yaml:5: quotas.dev.l4.gpus: input should be greater than or equal to 0 (got -1)',
    'million-gpus': 'teams/corpus.yaml:5: quotas.dev.l4.gpus: input should be less than or equal to 1000000 (got 1000001)',
    'unknown-cluster': "teams/corpus.yaml:4: quotas.nowhere: unknown cluster 'nowhere'",
    'unknown-pool': "teams/corpus.yaml:5: quotas.dev.h100: cluster 'dev' has no node pool 'h100'",
    'unknown-priority': "teams/corpus.yaml:3: defaultPriority: priority 'urgent' is not defined in cluster 'dev'",
    'undeclared-cohort': "teams/corpus.yaml:3: cohort: cohort 'nowhere' is not declared in cluster 'prod-east'",
    'profile-unknown-pool': "teams/corpus.yaml:7: jobProfiles[0].pool: team 'corpus' has no quota in pool 't4' of 'dev'",
    'namespace-of-another-team': "teams/corpus.yaml:3: namespaces[0]: namespace 'speech' already belongs to team 'speech'",
    'reserved-namespace': "teams/corpus.yaml:3: namespaces[0]: namespace 'kube-system' is reserved for the platform or a cluster add-on",
    'name-not-file-name': "teams/corpus.yaml:1: name: name 'other' does not match the file name 'corpus.yaml'",
    'unknown-key': "teams/corpus.yaml:3: quota: unknown key 'quota'",
    'system-authenticated': "teams/corpus.yaml:3: members.groups[0]: 'system:authenticated' is everyone who can log in to the cluster: a team file may not grant it rights (not allowed in dev)",
    'system-unauthenticated': "teams/corpus.yaml:3: members.groups[0]: 'system:unauthenticated' is every anonymous request: a team file may not grant it rights (not allowed in dev)",
    'system-serviceaccounts': "teams/corpus.yaml:3: members.groups[0]: 'system:serviceaccounts' is every ServiceAccount of every namespace: a team file may not grant it rights (not allowed in dev)",
    'system-nodes': "teams/corpus.yaml:3: members.groups[0]: 'system:nodes' is every kubelet: a team file may not grant it rights (not allowed in dev)",
    'system-anonymous': "teams/corpus.yaml:3: members.users[0]: 'system:anonymous' is every anonymous request: a team file may not grant it rights (not allowed in dev)",
    'system-serviceaccount-user': "teams/corpus.yaml:3: members.users[0]: 'system:serviceaccount:kube-system:default' is the ServiceAccount kube-system:default, a workload's identity: a team file may not grant it rights (not allowed in dev)",
    'zero-width-subject': 'teams/corpus.yaml:3: members.groups[0]: contains the control or invisible character U+200B (ZERO WIDTH SPACE), which terminals, logs and reviewers do not show as it is',
    'bidi-subject': 'teams/corpus.yaml:3: members.users[0]: contains the control or invisible character U+202E (RIGHT-TO-LEFT OVERRIDE), which terminals, logs and reviewers do not show as it is',
    'lookalike-subject': "teams/corpus.yaml:3: members.groups[0]: contains 'а' (U+0430 CYRILLIC), which looks like 'a': a look-alike of another name",
    'fullwidth-subject': "teams/corpus.yaml:3: members.groups[0]: contains compatibility characters (full-width, ligatures, ...) that display like 'ml'",
    'duplicate-subject': "teams/corpus.yaml:3: members.groups[1]: 'ml' is listed twice",
    'padded-system-subject': "teams/corpus.yaml:3: members.groups[0]: starts or ends with a space, which RBAC keeps (' system:masters' is another group than 'system:masters'); remove the spaces",
    'platform-namespace': "teams/corpus.yaml:3: namespaces[0]: namespace 'fleetgen-system' belongs to the platform: health (ConfigMap fleetgen-health) in cluster 'dev', from clusters/dev.yaml:1",
    'gitops-namespace': "teams/corpus.yaml:3: namespaces[0]: namespace 'flux-system' belongs to the platform: platform (HelmRelease gpu-operator) in cluster 'dev', from clusters/dev.yaml:18",
    'leading-zero-gpus': "teams/corpus.yaml:5: quotas.dev.l4.gpus: unquoted '010' has a leading zero: YAML 1.1 reads it as octal (010 is 8), YAML 1.2 as decimal (10)",
    'underscore-gpus': "teams/corpus.yaml:5: quotas.dev.l4.gpus: unquoted '1_0' uses '_' between digits, a number in YAML 1.1 only (1_0 is 10)",
    'hex-gpus': "teams/corpus.yaml:5: quotas.dev.l4.gpus: unquoted '0x2' is a binary, octal or hex number, read differently by YAML 1.1 and 1.2 readers (0o17 is text to one, 15 to the other)",
    'octal-gpus': "teams/corpus.yaml:5: quotas.dev.l4.gpus: unquoted '0o17' is a binary, octal or hex number, read differently by YAML 1.1 and 1.2 readers (0o17 is text to one, 15 to the other)",
    'sexagesimal-gpus': "teams/corpus.yaml:5: quotas.dev.l4.gpus: unquoted '1:00' is a base-60 number in YAML 1.1 (1:00 is 60) and text in YAML 1.2",
    'exponent-gpus': "teams/corpus.yaml:5: quotas.dev.l4.gpus: unquoted '1e3' is a number in YAML 1.2 (Kubernetes reads 1e3 as 1000) but text in YAML 1.1",
    'yes-namespace': "teams/corpus.yaml:3: namespaces[0]: unquoted 'on' is a boolean in YAML 1.1 and text in YAML 1.2",
    'snake-case-key': "teams/corpus.yaml:5: quotas.dev.l4.borrowing_limit: unknown key 'borrowing_limit': keys are camelCase",
    'huge-exponent': "teams/corpus.yaml:7: jobProfiles[0].sharedMemory: '1e999999999': exponent 999999999 is out of range (a Kubernetes quantity holds at most 2^63-1, i.e. about 9.2e18)",
    'workflow-command-key': "teams/corpus.yaml:4: quotas.dev\\x0a::error file=x::pwned: must be a DNS-1123 label: at most 63 lower-case letters, digits or '-', starting and ending with a letter or digit (got 'dev\\n::error file=x::pwned')",
}


def _write(root: Path, rel: str, text: str, case: str) -> None:
    path = root / rel
    if text.startswith("PATCH:"):
        old, new = text[6:].split("|")
        current = path.read_text()
        assert old in current, case
        path.write_text(current.replace(old, new, 1))
    elif case == "not-utf8":
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
    else:
        path.write_text(text)


def test_corpus_is_large_and_every_case_is_pinned() -> None:
    assert len(CASES) >= 40
    assert [c[0] for c in CASES] == list(EXPECTED)


@pytest.mark.parametrize("case,rel,text", CASES, ids=[c[0] for c in CASES])
def test_bad_input(fleet_root: Path, case: str, rel: str, text: str) -> None:
    before = snapshot(fleet_root / "rendered")
    _write(fleet_root, rel, text, case)
    result = run(fleet_root, "render")
    assert result.code == 2, result.out
    assert result.err.splitlines()[0] == EXPECTED[case]
    assert "nothing was written" in result.err and "Traceback" not in result.err
    assert snapshot(fleet_root / "rendered") == before


def test_names_exactly_at_their_limits_are_accepted(fleet_root: Path) -> None:
    name = "a" * 63
    (fleet_root / f"teams/{name}.yaml").write_text(TEAM.format(name=name))
    (fleet_root / "teams/corpus.yaml").write_text(
        f'name: corpus\nowners: ["@acme/x"]\ndefaultPriority: standard\nnamespaces: [{"corpus-" + "b" * 56}]\nquotas:\n  dev:\n    l4: {{gpus: 1}}\n'
        f'jobProfiles:\n  - {{name: {"p" * 45}, cluster: dev, pool: l4, nodes: 1, image: x, command: [x]}}\n')
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    assert (fleet_root / f"rendered/dev/teams/{name}/clusterqueue-{name}.yaml").is_file()
    assert (fleet_root / f"rendered/dev/templates/corpus/{'p' * 45}.jobset.yaml").is_file()
