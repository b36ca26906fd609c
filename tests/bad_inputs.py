"""The bad-input corpus: (case id, file written into a copy of the example fleet, its text).

Each case is a whole file, so line numbers are stable; `test_bad_input_corpus.py` pins the exact
first error line fleetgen must print for it.
"""

from __future__ import annotations

TEAM = 'name: {name}\nowners: ["@acme/x"]\nquotas:\n  dev:\n    l4: {{gpus: 1}}\n'


def team(name: str = "corpus", body: str | None = None) -> str:
    return body if body is not None else TEAM.format(name=name)


MEMBERS = 'name: corpus\nowners: ["@acme/x"]\nmembers: {members}\nquotas:\n  dev:\n    l4: {{gpus: 1}}\n'
QUOTA = 'name: corpus\nowners: ["@acme/x"]\nquotas:\n  dev:\n    l4: {{gpus: {gpus}}}\n'

ALIAS_BOMB = "\n".join(["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"] + [
    f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 8)]) + "\n"
DEEP = "name: corpus\nowners: " + "[" * 40 + "]" * 40 + "\n"
DEEP_ALIASES = "base: &b {gpus: 1}\n" + "\n".join(f"l{i}: &l{i} [*{'b' if i == 0 else 'l' + str(i - 1)}]"
                                                  for i in range(40)) + "\n"
LONG = "a" * 64
CYRILLIC = "corpus-\u0430"  # Cyrillic а, looks like Latin a

CASES: list[tuple[str, str, str]] = [
    # malformed YAML
    ("unclosed-bracket", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"\nquotas: {}\n'),
    ("tab-indent", "teams/corpus.yaml", "name: corpus\nquotas:\n\tdev: {}\n"),
    ("two-documents", "teams/corpus.yaml", "name: corpus\n---\nname: other\n"),
    ("unterminated-quote", "teams/corpus.yaml", 'name: "corpus\nowners: []\n'),
    ("scalar-file", "teams/corpus.yaml", "just some text\n"),
    ("list-file", "teams/corpus.yaml", "- name: corpus\n"),
    ("empty-file", "teams/corpus.yaml", ""),
    # YAML bombs, deep nesting, aliases, tags
    ("alias-bomb", "teams/corpus.yaml", ALIAS_BOMB),
    ("deep-nesting", "teams/corpus.yaml", DEEP),
    ("deep-alias-chain", "teams/corpus.yaml", DEEP_ALIASES),
    ("merge-key", "teams/corpus.yaml", "x: &x {a: 1}\nname: corpus\n<<: *x\n"),
    ("python-tag", "teams/corpus.yaml", "name: !!python/object/apply:os.system [id]\n"),
    ("huge-file", "teams/corpus.yaml", "name: corpus\nowners: [\"@acme/x\"]\n# " + "x" * (2 << 20) + "\n"),
    ("huge-value", "teams/corpus.yaml", f"name: corpus\nowners: [\"@{'x' * 100_000}\"]\n"),
    ("not-utf8", "teams/corpus.yaml", "name: corpus\nowners: [\"@acme/\udcff\"]\n"),
    # wrong types
    ("gpus-string", "teams/corpus.yaml", team(body='name: corpus\nowners: ["@acme/x"]\nquotas:\n  dev:\n'
                                                  '    l4: {gpus: "1"}\n')),
    ("gpus-float", "teams/corpus.yaml", team(body='name: corpus\nowners: ["@acme/x"]\nquotas:\n  dev:\n'
                                                 '    l4: {gpus: 1.5}\n')),
    ("gpus-bool", "teams/corpus.yaml", team(body='name: corpus\nowners: ["@acme/x"]\nquotas:\n  dev:\n'
                                                '    l4: {gpus: yes}\n')),
    ("namespaces-string", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nnamespaces: corpus\n'),
    ("quotas-list", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nquotas: [dev]\n'),
    ("owners-string", "teams/corpus.yaml", 'name: corpus\nowners: "@acme/x"\n'),
    ("groups-mapping", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nmembers: {groups: {a: b}}\n'),
    ("weight-string", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nfairSharingWeight: heavy\n'),
    ("weight-tiny", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nfairSharingWeight: 7.1e-78\n'),
    # duplicate keys
    ("duplicate-top-key", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nname: corpus\n'),
    ("duplicate-nested-key", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nquotas:\n  dev:\n'
                                                  '    l4: {gpus: 1}\n    l4: {gpus: 2}\n'),
    # Unicode look-alikes
    ("cyrillic-name", f"teams/{CYRILLIC}.yaml", TEAM.format(name=CYRILLIC)),
    ("fullwidth-namespace", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nnamespaces: [ｃｏｒｐｕｓ]\n'),
    ("zero-width-name", "teams/corpus.yaml", TEAM.format(name="corp\u200bus")),
    # path separators and ..
    ("dotdot-name", "teams/corpus.yaml", TEAM.format(name="../etc")),
    ("slash-namespace", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nnamespaces: [a/b]\n'),
    ("dotdot-cluster-key", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nquotas:\n  ../x:\n'
                                                '    l4: {gpus: 1}\n'),
    ("slash-profile", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nquotas:\n  dev:\n    l4: {gpus: 1}\n'
                                           'jobProfiles:\n  - {name: a/b, cluster: dev, pool: l4, nodes: 1, '
                                           'image: x, command: [x]}\n'),
    # names past their length limits
    ("name-64", f"teams/{LONG}.yaml", TEAM.format(name=LONG)),
    ("namespace-64", "teams/corpus.yaml", f'name: corpus\nowners: ["@acme/x"]\nnamespaces: [{LONG}]\n'),
    ("priority-254", "clusters/dev.yaml", "PATCH:  - {name: standard, value: 100}|  - {name: " + "p" * 254
     + ", value: 100}"),
    ("label-value-64", "clusters/dev.yaml", "PATCH:{nvidia.com/gpu.product: NVIDIA-L4}|{nvidia.com/gpu.product: "
     + LONG + "}"),
    ("profile-name-past-budget", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nquotas:\n  dev:\n'
                                                      '    l4: {gpus: 2}\njobProfiles:\n  - {name: ' + "p" * 50
     + ', cluster: dev, pool: l4, nodes: 1, image: x, command: [x]}\n'),
    # capacity and limits
    ("over-capacity", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nquotas:\n  dev:\n    l4: {gpus: 9}\n'),
    ("lend-more-than-held", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nquotas:\n  dev:\n'
                                                 '    l4: {gpus: 1, lendingLimit: 2}\n'),
    ("negative-gpus", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nquotas:\n  dev:\n    l4: {gpus: -1}\n'),
    ("million-gpus", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nquotas:\n  dev:\n'
                                          '    l4: {gpus: 1000001}\n'),
    # references to missing things
    ("unknown-cluster", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nquotas:\n  nowhere:\n'
                                             '    l4: {gpus: 1}\n'),
    ("unknown-pool", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nquotas:\n  dev:\n    h100: {gpus: 1}\n'),
    ("unknown-priority", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\ndefaultPriority: urgent\n'
                                              'quotas:\n  dev:\n    l4: {gpus: 1}\n'),
    ("undeclared-cohort", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\ncohort: nowhere\nquotas:\n'
                                               '  prod-east:\n    h100: {gpus: 0}\n'),
    ("profile-unknown-pool", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nquotas:\n  dev:\n'
                                                  '    l4: {gpus: 1}\njobProfiles:\n  - {name: p, cluster: dev, '
                                                  'pool: t4, nodes: 1, image: x, command: [x]}\n'),
    # conflicting and reserved namespaces and names
    ("namespace-of-another-team", "teams/corpus.yaml",
     'name: corpus\nowners: ["@acme/x"]\nnamespaces: [speech]\nquotas: {dev: {}}\n'),
    ("reserved-namespace", "teams/corpus.yaml",
     'name: corpus\nowners: ["@acme/x"]\nnamespaces: [kube-system]\nquotas: {dev: {}}\n'),
    ("name-not-file-name", "teams/corpus.yaml", TEAM.format(name="other")),
    ("unknown-key", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nquota: {}\n'),
    # issue 11: subjects a team file may not grant, or that are not what they look like
    ("system-authenticated", "teams/corpus.yaml", MEMBERS.format(members='{groups: ["system:authenticated"]}')),
    ("system-unauthenticated", "teams/corpus.yaml", MEMBERS.format(members='{groups: ["system:unauthenticated"]}')),
    ("system-serviceaccounts", "teams/corpus.yaml", MEMBERS.format(members='{groups: ["system:serviceaccounts"]}')),
    ("system-nodes", "teams/corpus.yaml", MEMBERS.format(members='{groups: ["system:nodes"]}')),
    ("system-anonymous", "teams/corpus.yaml", MEMBERS.format(members='{users: ["system:anonymous"]}')),
    ("system-serviceaccount-user", "teams/corpus.yaml",
     MEMBERS.format(members='{users: ["system:serviceaccount:kube-system:default"]}')),
    ("zero-width-subject", "teams/corpus.yaml", MEMBERS.format(members='{groups: ["ml\\u200bteam"]}')),
    ("bidi-subject", "teams/corpus.yaml", MEMBERS.format(members='{users: ["alice\\u202egpj.exe"]}')),
    ("lookalike-subject", "teams/corpus.yaml", MEMBERS.format(members='{groups: ["\u0430dmins"]}')),
    ("fullwidth-subject", "teams/corpus.yaml", MEMBERS.format(members='{groups: ["ｍｌ"]}')),
    ("duplicate-subject", "teams/corpus.yaml", MEMBERS.format(members="{groups: [ml, ml]}")),
    ("padded-system-subject", "teams/corpus.yaml", MEMBERS.format(members='{groups: [" system:authenticated"]}')),
    # issue 11: platform namespaces (derived from what the clusters render) and YAML 1.1-only forms
    ("platform-namespace", "teams/corpus.yaml",
     'name: corpus\nowners: ["@acme/x"]\nnamespaces: [fleetgen-system]\nquotas: {dev: {}}\n'),
    ("gitops-namespace", "teams/corpus.yaml",
     'name: corpus\nowners: ["@acme/x"]\nnamespaces: [flux-system]\nquotas: {dev: {}}\n'),
    ("leading-zero-gpus", "teams/corpus.yaml", QUOTA.format(gpus="010")),
    ("underscore-gpus", "teams/corpus.yaml", QUOTA.format(gpus="1_0")),
    ("hex-gpus", "teams/corpus.yaml", QUOTA.format(gpus="0x2")),
    ("octal-gpus", "teams/corpus.yaml", QUOTA.format(gpus="0o17")),
    ("sexagesimal-gpus", "teams/corpus.yaml", QUOTA.format(gpus="1:00")),
    ("exponent-gpus", "teams/corpus.yaml", QUOTA.format(gpus="1e3")),
    ("yes-namespace", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nnamespaces: [on]\n'),
    ("snake-case-key", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nquotas:\n  dev:\n'
                                            '    l4: {gpus: 1, borrowing_limit: 2}\n'),
    ("huge-exponent", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nquotas:\n  dev:\n    l4: {gpus: 1}\n'
                                           'jobProfiles:\n  - {name: p, cluster: dev, pool: l4, nodes: 1, image: x, '
                                           'command: [x], sharedMemory: "1e999999999"}\n'),
    ("workflow-command-key", "teams/corpus.yaml", 'name: corpus\nowners: ["@acme/x"]\nquotas:\n'
                                                  '  "dev\\n::error file=x::pwned":\n    l4: {gpus: 1}\n'),
]
