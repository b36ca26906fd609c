"""Blocks the docs show for users to copy, read from the pages as the tests run them."""

from __future__ import annotations

from tests.conftest import REPO

REVIEWS = REPO / "docs/how-to/reviews.md"


def reviews_yaml_block(after: str) -> str:
    """The first YAML block after `after` in the reviews page (where the pre-commit config is shown)."""
    readme = REVIEWS.read_text()
    start = readme.index("```yaml\n", readme.index(after)) + len("```yaml\n")
    return readme[start:readme.index("```\n", start)]
