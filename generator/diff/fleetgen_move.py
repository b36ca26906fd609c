"""A change that moves the fleet's own fleetgen pin (`fleetgen.txt`): one `fleetgen-upgraded` line.

Where both sides were rendered by their pinned releases (`fleetgen diff --base` in the fleet, the
`preview` job), every object the diff shows beyond the change's own edits is the new release's doing,
and the line says so. Where one fleetgen rendered both (the preview comment, which never installs a
pull request's pin: it runs the base repository's code only), the line says the diff cannot show what
the new release changes, and where to see it."""

from __future__ import annotations

from generator import releases
from generator.diff.objects import Change
from generator.diff.risks import Risk
from generator.pinfile import PIN_FILE, Pin


def fleetgen_lines(old: Pin | None, new: Pin | None, by_pins: bool, changes: list[Change]) -> list[Risk]:
    """The line of a pin that moved (none where it did not, or a side has no pin)."""
    if old is None or new is None or old == new:
        return []
    what = [f"fleetgen moves from {old.label} to {new.label} ({PIN_FILE})"]
    severity = "medium"
    if old.source != new.source:
        severity = "high"
        what.append(f"from another source ({old.source} -> {new.source}): the fleet would run code from another "
                    "repository; check it is fleetgen's")
    if releases.numeric(old.ref) and releases.numeric(new.ref) and releases.key(new.ref) < releases.key(old.ref):
        severity = "high"
        what.append("a downgrade: read the newer release's CHANGELOG for what it changed that the older one "
                    "does not take back")
    clusters = sorted({c.obj.cluster for c in changes})
    if by_pins:
        what.append(f"each side was rendered by its own pin, so this diff holds everything {new.label} changes "
                    f"in rendered/ ({len(changes)} object(s) in {', '.join(clusters) or 'no cluster'}) beside the "
                    "change's own edits; read its CHANGELOG, and move the pin in a pull request of its own")
    else:
        what.append(f"both sides here were rendered by one fleetgen, so this diff does not show what {new.label} "
                    "changes: the pull request's `preview` run renders each side with its pin (artifact "
                    "fleetgen-diff), as does `./fleetgen diff --base <base>` on the branch")
    return [Risk(severity, "fleetgen-upgraded", "; ".join(what))]
