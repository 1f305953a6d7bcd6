"""Finding the kvconform binary: an explicit path, $KVCONFORM_BIN, the wheel's own (kvconform/bin/ inside
this package), PATH, then a checkout's build."""
from __future__ import annotations

import os
import shutil
from typing import Iterator, Optional

CHECKOUT_BUILD = os.path.join("build", "cli", "kvconform")
# Where a checkout built before the CLI became the top-level cli/ folder keeps its binary; still found
# for one release.
OLD_CHECKOUT_BUILD = os.path.join("build", "harness", "cli", "kvconform")


# Where the wheel (the repository's pyproject.toml) installs the binary: inside this package, beside
# share/kvconform/ with the data it reads. Absent from the pure-Python package (pip install ./python).
PACKAGED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "kvconform")


class NotFound(Exception):
    """No kvconform binary (or checkout) where one was looked for; the message names every place."""


def ancestors(path: str) -> Iterator[str]:
    """path (made absolute) and each folder above it, up to the root."""
    path = os.path.abspath(path)
    while True:
        yield path
        parent = os.path.dirname(path)
        if parent == path:
            return
        path = parent


def packaged() -> bool:
    """Whether this package is the wheel's, with its binary inside."""
    return os.path.isfile(PACKAGED) and os.access(PACKAGED, os.X_OK)


def find(explicit: Optional[str] = None, start: Optional[str] = None) -> str:
    """The path of the kvconform binary, or NotFound naming every place looked at."""
    looked = []
    for how, candidate in (("--kvconform-bin", explicit), ("KVCONFORM_BIN", os.environ.get("KVCONFORM_BIN"))):
        if candidate:
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return os.path.abspath(candidate)
            raise NotFound(f"{how} {candidate}: not an executable file")
        looked.append(f"{how} (not given)")
    # The wheel's own binary before PATH: it is the one built with this package, and the `kvconform`
    # on PATH may be another install's (or this wheel's entry point, which runs this same binary).
    if packaged():
        return PACKAGED
    looked.append(f"{PACKAGED} (not a wheel install)")
    on_path = shutil.which("kvconform")
    if on_path:
        return on_path
    looked.append("kvconform on PATH (none)")
    for root in (start or os.getcwd(), os.path.dirname(__file__)):
        for folder in ancestors(root):
            for build in (CHECKOUT_BUILD, OLD_CHECKOUT_BUILD):
                candidate = os.path.join(folder, build)
                if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                    return candidate
        looked.append(f"{CHECKOUT_BUILD} in {os.path.abspath(root)} and its parents (none)")
    raise NotFound("no kvconform binary: looked at " + "; ".join(looked) +
                   ". Install the wheel (bash scripts/wheel.sh in a kvconform checkout, docs/install.md), build it "
                   "(bash scripts/setup.sh in a kvconform checkout), install it "
                   "(cmake --install build --prefix P; P/bin on PATH), or pass --kvconform-bin PATH / set KVCONFORM_BIN.")
