"""The incremental driver's seam with CodeGraphContext: which versions of
CGC the driver was proven against, and what it does with any other.

The driver patches CGC's private functions and recognises the Cypher CGC
writes (`incremental.py`). `probe_api` only checks that the names it uses
exist; a release that keeps the names but changes what they do would pass
it and could write a wrong graph — a graph the service would then call
fresh. So the driver patches nothing on a CGC it was not proven against
(an exactness trial equal to a from-scratch index, end to end, on every
proven backend) unless the person opts in (`cgc.allowUnprovenVersion`,
passed to the driver as `ALLOW_UNPROVEN_FLAG`): without the opt-in the
probe, every apply and every prepare answer "unsupported", and the
service takes CGC's own reconcile, with a notice that says why.

Proven against (each added by a trial of the driver's own test suite, the
real-CLI exactness tests on Kùzu, FalkorDB Lite and a FalkorDB server):
- 0.6.13 (the version the test suite pins: `tests/support/python/requirements-cgc*.txt`).

Pure: the installed version is an input (`incremental.cgc_version`).
"""

PROVEN_CGC_VERSIONS = ("0.6.13",)

# The driver's root option that carries the person's opt-in.
ALLOW_UNPROVEN_FLAG = "--allow-unproven-cgc"

# The configuration key the person sets to opt in (named in the notices).
ALLOW_UNPROVEN_KEY = "cgc.allowUnprovenVersion"


class VersionGate:
    """What the driver may do with the installed CGC.

    `allowed`: whether it may patch and write; `note`: what to tell the
    person (why not, or that it runs on an unproven version at their
    request), None on a proven version."""

    def __init__(self, allowed, note):
        self.allowed = allowed
        self.note = note

    def __repr__(self):
        return f"VersionGate(allowed={self.allowed!r}, note={self.note!r})"


def version_gate(installed, allow_unproven, proven=PROVEN_CGC_VERSIONS):
    """The gate for CGC version `installed` (a string, or None when it
    cannot be read) with the person's opt-in `allow_unproven`."""
    if installed is not None and installed in proven:
        return VersionGate(True, None)
    named = f"CodeGraphContext {installed}" if installed else "a CodeGraphContext whose version cannot be read"
    proven_list = ", ".join(proven)
    if allow_unproven:
        return VersionGate(True, (
            f"the incremental sync runs on {named}, which it was not proven exact against "
            f"(proven: {proven_list}), because {ALLOW_UNPROVEN_KEY} is set"))
    return VersionGate(False, (
        f"{named} is not a version the incremental sync was proven exact against "
        f"(proven: {proven_list}), so it patches nothing and CGC's own reconcile runs instead; "
        f"set {ALLOW_UNPROVEN_KEY} = true to run the incremental sync anyway"))
