"""How many examples a costly property runs.

A property whose example costs tens of milliseconds (solver calls, a workspace compiled
several times) runs fewer examples under the `fast` profile, so that `make test` stays
under five minutes on two cores; under any other profile (`make fuzz`: `long`, 20,000;
`custom`: HYPOTHESIS_EXAMPLES) it runs the profile's own count, as every property does.
"""

from __future__ import annotations

import os

from hypothesis import settings


def examples(fast: int) -> int:
    """`fast` under the `fast` profile, the loaded profile's count under any other."""
    if os.environ.get("HYPOTHESIS_PROFILE", "fast") == "fast":
        return fast
    return settings().max_examples
