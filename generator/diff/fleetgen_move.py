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


def fleetgen_lines(old: Pin | None, new: Pin | None, by_pins: bool, changes: list[Change],
                   broken: str = "") -> list[Risk]:
    """The line of a pin that moved, came, went or does not read (`broken`: why the change's own does not);
    none where it stayed, or neither side has one."""
    if broken:
        return [Risk("high", "fleetgen-upgraded", f"{PIN_FILE} in this change does not read ({broken}): "
                     "`./fleetgen` refuses to run it, so nothing renders this fleet until it is one release again")]
    if old == new:
        return []
    if new is None:
        assert old is not None
        return [Risk("high", "fleetgen-upgraded", f"{PIN_FILE} is removed (it pinned fleetgen {old.label}): the fleet "
                     "would run whatever generator/ the repository then holds, code no release vouches for, or no "
                     "fleetgen at all; keep the pin")]
    if old is None:
        return [Risk("medium", "fleetgen-upgraded", f"the fleet takes fleetgen from {PIN_FILE} now ({new.label} "
                     f"from {new.source}) instead of the generator/ it carried: check that release renders what "
                     "the copy did (`./fleetgen render --check` on the branch)")]
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
