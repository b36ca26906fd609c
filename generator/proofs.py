"""What fleetgen keeps outside a repository to know that a record about it is its own.

A pull request controls every file in the repository, `.fleetgen/` included; it does not control
the user's cache folder. So fleetgen trusts its own records only by something kept there:

- a stage of `.fleetgen/` (the staging folder a render switches in) is acted on only when the
  cache folder holds the random token fleetgen wrote for it before the journal's commit point,
  and the journal repeats that token: a commit cannot know it;
- the render index is sealed with a key kept there (keyed BLAKE2b): a record that this key did
  not seal (forged, edited, copied from elsewhere) is not used.

A cache folder inside the repository whose files git tracks is a commit, not the user's: none of
its records is trusted, and no stage can be proven.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from generator import repofiles
from generator.cachedir import cache_dir
from generator.errors import UsageError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
KEY_BYTES = 32
CACHE_FIX = "set FLEETGEN_CACHE_DIR to a writable folder of your own outside the repository"


def root_key(root: Path) -> str:
    """The name of a repository's records in the cache folder (from its real path)."""
    return hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:32]


def cache_trusted(root: Path) -> bool:
    """False when the cache folder lies inside the repository and git tracks files in it (git
    judges): then its records came with a commit. Outside the repository it is the user's."""
    cache, top = cache_dir().resolve(), root.resolve()
    if not cache.is_relative_to(top):
        return True
    return not repofiles.tracked(top, cache.relative_to(top).as_posix() or ".")


def _read_private(path: Path) -> bytes | None:
    """A record's content, never through a link; None if absent or not a regular file."""
    try:
        got = repofiles.read_regular(path)
    except OSError:
        return None
    return None if got is None else got[1]


def _create_private(path: Path, data: bytes) -> None:
    """A new record readable by its owner only; FileExistsError if there is one."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


# --- stages of .fleetgen/ ----------------------------------------------------------------------

def _stage_file(root: Path, stage: str) -> Path:
    return cache_dir() / "stages" / root_key(root) / stage


def issue_stage(root: Path, stage: str) -> str:
    """Record a new stage of `root` as fleetgen's own, before it is made; its token, which the
    journal repeats. No writable, trusted cache folder: a UsageError (nothing is staged)."""
    path = _stage_file(root, stage)
    if not cache_trusted(root):
        raise UsageError(f"the cache folder {cache_dir()} is inside the repository and tracked by git, so it "
                         f"cannot prove which stages of .fleetgen/ are fleetgen's own: {CACHE_FIX}")
    token = secrets.token_hex(16)
    try:
        _create_private(path, token.encode())
    except OSError as exc:
        raise UsageError(f"cannot record the render's stage in {path.parent} ({exc.strerror}); fleetgen keeps "
                         f"there the proof that a stage of .fleetgen/ is its own: {CACHE_FIX}") from None
    return token


def stage_proven(root: Path, stage: str, token: str | None = None) -> bool:
    """Whether fleetgen issued `stage` for this repository (and with this `token`, if given)."""
    if not cache_trusted(root):
        return False
    held = _read_private(_stage_file(root, stage))
    if held is None:
        return False
    return token is None or hmac.compare_digest(held, token.encode())


def issued_stages(root: Path) -> list[str]:
    """The stages issued for this repository and not yet withdrawn (killed renders leave them)."""
    if not cache_trusted(root):
        return []
    try:
        return sorted(os.listdir(_stage_file(root, "x").parent))
    except OSError:
        return []


def withdraw_stage(root: Path, stage: str) -> None:
    """Forget a stage once it is gone from `.fleetgen/`."""
    _stage_file(root, stage).unlink(missing_ok=True)


# --- the render index's seal -------------------------------------------------------------------

def _key(create: bool) -> bytes | None:
    path = cache_dir() / "renders" / "seal.key"
    key = _read_private(path)
    if key is None and create:
        try:
            _create_private(path, secrets.token_bytes(KEY_BYTES))
        except FileExistsError:
            pass  # another render made it meanwhile
        except OSError:
            return None
        key = _read_private(path)
    return key if key is not None and len(key) == KEY_BYTES else None


def _mac(key: bytes, root: Path, part: str, payload: bytes) -> str:
    digest = hashlib.blake2b(key=key, digest_size=32)
    for piece in (root_key(root).encode(), part.encode("utf-8", "surrogateescape"), payload):
        digest.update(len(piece).to_bytes(8, "big"))
        digest.update(piece)
    return digest.hexdigest()


def seal(root: Path, part: str, payload: bytes) -> str | None:
    """The seal of one record (`part` names it) of `root`; None when no key can be kept (then
    nothing is recorded)."""
    key = _key(create=True) if cache_trusted(root) else None
    return None if key is None else _mac(key, root, part, payload)


def sealed(root: Path, part: str, payload: bytes, mac: str) -> bool:
    """Whether `mac` is this cache's seal of the record: written by this user's fleetgen."""
    key = _key(create=False) if cache_trusted(root) else None
    return key is not None and hmac.compare_digest(_mac(key, root, part, payload), mac)
