"""Hypothesis settings of the property tests, passed to each test as a parent (never loaded globally, so that other
suites using hypothesis, schemathesis among them, keep their own settings).

- `baton-ci` (when the `CI` environment variable is set): derandomized, so a CI run tries the same examples every time
  and a failure reproduces; no deadline, because a shared runner's timing says nothing about the code.
- `baton-dev` (otherwise): random examples, so local runs keep exploring; no deadline either.
- `BATON_HYPOTHESIS_PROFILE=baton-ci|baton-dev` chooses explicitly; `BATON_PROPERTY_SCALE` (default 1) multiplies
  every test's number of examples, for a longer exploration than `make test` affords.

Both skip hypothesis' `explain` phase, which reruns a failure many times to comment on which parts mattered, so a
failing run stays close to a passing one's time. Neither keeps an example database: `derandomize` makes one pointless
in CI, and locally it would leave a `.hypothesis/` folder in the checkout.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, Phase, settings

_COMMON: dict[str, Any] = {
    "deadline": None,
    "database": None,
    "print_blob": True,
    "phases": [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}
settings.register_profile("baton-ci", derandomize=True, **_COMMON)
settings.register_profile("baton-dev", **_COMMON)


def active_profile() -> settings:
    """The profile this run uses: `BATON_HYPOTHESIS_PROFILE` if set, else `baton-ci` on CI, else `baton-dev`."""
    name = os.environ.get("BATON_HYPOTHESIS_PROFILE") or ("baton-ci" if os.environ.get("CI") else "baton-dev")
    return settings.get_profile(name)


def examples(count: int) -> int:
    """`count` examples, scaled by `BATON_PROPERTY_SCALE` for a longer run."""
    return max(1, int(count * float(os.environ.get("BATON_PROPERTY_SCALE", "1"))))
