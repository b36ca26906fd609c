"""What a test does when something it needs is not on this machine: skip, saying what to install, except
under CI, which always installs everything, so there the test fails instead."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def skip_or_fail(message: str) -> NoReturn:
    """Skip the test with `message`, or fail it where `CI` is set."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
