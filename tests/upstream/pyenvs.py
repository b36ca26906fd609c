"""Python programs the tests run as they run for users, each in its own virtual environment.

    python3 tests/upstream/pyenvs.py build        # create what is missing; seconds when nothing changed
    python3 tests/upstream/pyenvs.py list         # each environment: requirement, built or not
    python3 tests/upstream/pyenvs.py path NAME    # its python (exit 2 when not built)

torch (its torchrun and gloo), SkyPilot and the ML teams' Kubernetes clients (the Kubeflow and CodeFlare
SDKs) are far too large, and too tied to their own dependency pins, to share fleetgen's environment; each gets
a venv under `$FLEETGEN_TOOLS_DIR` (default `~/.cache/fleetgen/tools`), beside the Go tools, stamped with its
requirements so a warm machine reuses it whichever Python 3.11+ runs the tests (a venv keeps the interpreter it
was made with). Installed from the package index by name and pinned version, like the rest.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import venv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.upstream.tools import tools_dir  # noqa: E402


@dataclass(frozen=True)
class PyEnv:
    """One virtual environment: a name and the exact requirements installed into it."""

    name: str
    requirements: tuple[str, ...]
    why: str


PYENVS: tuple[PyEnv, ...] = (
    PyEnv("torch", ("torch==2.15.0",), "torchrun and gloo: the rendered command runs on two local nodes"),
    PyEnv("skypilot", ("skypilot[kubernetes]==0.14.1",),
          "SkyPilot's own schema, config resolution and GPU names, and its Kubernetes provisioner"),
    # The newest Kubeflow SDK for Trainer v2.2 (0.5.0 requires kubeflow-trainer-api 2.3, Trainer v2.3's
    # API); 0.4.1 accepts any trainer-api from 2.2.0, so the models of the pinned Trainer are pinned too.
    PyEnv("kubeflow", ("kubeflow==0.4.1", "kubeflow-trainer-api==2.2.1"),
          "the Kubeflow SDK's TrainerClient run as a team member against the real Trainer"),
    PyEnv("codeflare", ("codeflare-sdk==0.40.1",),
          "the CodeFlare SDK's Cluster run as a team member against the real KubeRay"),
)


def _find(name: str) -> PyEnv:
    found = next((e for e in PYENVS if e.name == name), None)
    if found is None:
        raise KeyError(f"no Python environment {name!r}; known: {', '.join(e.name for e in PYENVS)}")
    return found


def _stamp(env: PyEnv) -> str:
    """The requirements only: the environment runs on the interpreter it was made with, so the one
    running this script (the checkout's .venv, pyenv's or Debian's) does not matter."""
    return hashlib.sha256("\n".join(env.requirements).encode()).hexdigest()


def folder(env: PyEnv) -> Path:
    return tools_dir() / f"py-{env.name}"


def python(name: str) -> Path:
    """The interpreter of environment `name` (which may not be built yet)."""
    return folder(_find(name)) / "bin" / "python"


def current(name: str) -> bool:
    env = _find(name)
    stamp = folder(env) / "fleetgen.stamp"
    if not (python(name).is_file() and stamp.is_file() and stamp.read_text() == _stamp(env)):
        return False
    # its base interpreter may be gone (a removed pyenv version): then it is rebuilt
    return subprocess.run([str(python(name)), "-c", ""], capture_output=True, check=False).returncode == 0


def required(name: str, title: str) -> Path:
    """The interpreter of environment `name`, for a test: the test is skipped where it is not built, and fails
    under CI (which always builds it)."""
    from tests.upstream.absent import skip_or_fail

    if not current(name):
        skip_or_fail(f"{title} is not installed: python3 tests/upstream/pyenvs.py build")
    return python(name)


def missing() -> list[str]:
    return [e.name for e in PYENVS if not current(e.name)]


def build(names: list[str] | None = None, log: bool = True) -> None:
    """Create every environment that is missing or stale. A venv's scripts name their folder, so it is
    built in place; the stamp, written last, marks it complete (an interrupted build is redone)."""
    for env in PYENVS:
        if names and env.name not in names or current(env.name):
            continue
        start = time.monotonic()
        if log:
            print(f"pyenv {env.name}: installing {' '.join(env.requirements)} ({env.why})", flush=True)
        target = folder(env)
        shutil.rmtree(target, ignore_errors=True)
        venv.EnvBuilder(with_pip=True).create(target)
        subprocess.run([str(target / "bin" / "python"), "-m", "pip", "install", "--quiet",
                        "--disable-pip-version-check", *env.requirements], check=True)
        (target / "fleetgen.stamp").write_text(_stamp(env))
        if log:
            print(f"pyenv {env.name}: ready in {time.monotonic() - start:.0f} s", flush=True)


RECORDER = '''
import urllib.parse
from kubernetes.client import rest

CALLS = []
_request = rest.RESTClientObject.request


def _recorded(self, method, url, *args, **kwargs):
    path = urllib.parse.urlsplit(url).path
    try:
        answer = _request(self, method, url, *args, **kwargs)
    except rest.ApiException as exc:
        CALLS.append([method, path, exc.status])
        raise
    CALLS.append([method, path, answer.status])
    return answer


rest.RESTClientObject.request = _recorded
'''
"""Put before a client's script: CALLS gets [method, path, HTTP status] of every request the official
Kubernetes client sends (both ML clients use it), so a test can say which calls, and so which rights, each
of their actions needs."""


def run_client(name: str, script: str, request: Any, kubeconfig: Path, home: Path, timeout: float = 300) -> Any:
    """`script` (RECORDER first) run by environment `name` as a user runs it: KUBECONFIG `kubeconfig`, HOME and
    TMPDIR `home` (no kubeconfig, discovery cache or certificate of this machine read or left behind),
    `request` as JSON on stdin; what it writes as JSON to the file named by its first argument (clients
    print to stdout). The script is a file: an SDK may read its functions' source (inspect.getsource)."""
    home.mkdir(parents=True, exist_ok=True)
    program, answer = home / f"{name}-client.py", home / f"{name}-answer.json"
    program.write_text(RECORDER + script)
    answer.unlink(missing_ok=True)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "TMPDIR": str(home), "KUBECONFIG": str(kubeconfig)}
    done = subprocess.run([str(python(name)), str(program), str(answer)], input=json.dumps(request),
                          capture_output=True, text=True, env=env, timeout=timeout, check=False)
    assert done.returncode == 0 and answer.is_file(), done.stdout + done.stderr
    return json.loads(answer.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="verb", required=True)
    sub.add_parser("build")
    sub.add_parser("list")
    path = sub.add_parser("path")
    path.add_argument("name")
    args = parser.parse_args(argv)
    if args.verb == "build":
        build()
    elif args.verb == "list":
        for env in PYENVS:
            print(f"{env.name:10} {' '.join(env.requirements):20} {'built' if current(env.name) else 'missing'}")
    else:
        if not current(args.name):
            print(f"{args.name} is not built: python3 tests/upstream/pyenvs.py build", file=sys.stderr)
            return 2
        print(python(args.name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
