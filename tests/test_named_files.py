"""Files a user names outside the repository, which fleetgen reads itself or hands to a library:
the health reconciler's policy (`--config`, a ConfigMap in the pod) and kubeconfigs. A FIFO in a
file's place is refused, never waited on; a document of the wrong shape, nested too deep or not
JSON is an error naming the file and the field, exit 2, never a traceback (issue 52's hostile pass
found each: a hang, RecursionError, TypeError, KeyError, binascii.Error)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from generator.reconciler.app import load_policy
from tests.conftest import REPO, run

OFFLINE = ("--dry-run", "--server", "http://127.0.0.1:9", "--token", "t")  # never dialled: the file fails first


def _bad_pools() -> str:
    document = load_policy(None, REPO, "dev")
    return json.dumps({**document, "pools": [{"name": "l4", "labels": ["nvidia.com/gpu.product"]}]})


@pytest.mark.parametrize("text,said", [
    ("[" * 100_000, "nesting deeper than 32 levels"),
    ("[1, 2]", "(the document): Input should be a valid dictionary"),
    ("{}", "namespace: Field required"),
    (None, "pools.0.labels: Input should be a valid dictionary"),
    ('{"namespace": NaN}', "NaN is not a JSON number"),
    ("\xff", "not UTF-8 text"),
], ids=["too-deep", "a-list", "empty", "labels-a-list", "nan", "not-utf-8"])
def test_a_health_policy_of_the_wrong_shape_is_named(tmp_path: Path, text: str | None, said: str) -> None:
    path = tmp_path / "policy.json"
    if text == "\xff":
        path.write_bytes(b"\xff{}")
    else:
        path.write_text(_bad_pools() if text is None else text)
    res = run(REPO, "health", "once", "--config", str(path), *OFFLINE)
    assert res.code == 2 and str(path) in res.err and said in res.err, res.err
    assert "internal error" not in res.err and "Traceback" not in res.err


def test_the_rendered_policy_passes_its_own_check() -> None:
    """Every example cluster's compiled policy has every field the reconciler reads."""
    for cluster in ("dev", "prod-east", "prod-west"):
        assert load_policy(None, REPO, cluster)["namespace"]


def _fleetgen(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A fresh process with a time limit: a read that waits on a FIFO shows as TimeoutExpired."""
    return subprocess.run([sys.executable, "-m", "generator", "--root", str(REPO), *args], capture_output=True,
                          text=True, timeout=30, env={**os.environ, **(env or {})}, check=False)


@pytest.mark.parametrize("how", ["policy", "kubeconfig", "KUBECONFIG-list"])
def test_a_fifo_in_a_named_files_place_is_refused_not_waited_on(tmp_path: Path, how: str) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    good = tmp_path / "kubeconfig"
    good.write_text("apiVersion: v1\nkind: Config\n")
    if how == "policy":
        res = _fleetgen("health", "once", "--config", str(fifo), *OFFLINE)
    elif how == "kubeconfig":
        res = _fleetgen("job", "list", "--team", "vision", "--kubeconfig", str(fifo))
    else:
        res = _fleetgen("job", "list", "--team", "vision", env={"KUBECONFIG": f"{good}{os.pathsep}{fifo}"})
    assert res.returncode == 2 and f"{fifo}" in res.stderr and "not a regular file" in res.stderr, res.stderr


def test_a_kubeconfig_whose_certificate_is_not_base64_is_named(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:9\n"
        "    certificate-authority-data: '!!notbase64'\nusers:\n- name: u\n  user: {token: t}\n"
        "contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n")
    res = run(REPO, "job", "list", "--team", "vision", "--kubeconfig", str(kubeconfig))
    assert res.code == 2 and f"cannot load kubeconfig {kubeconfig}: Invalid base64" in res.err, res.err
