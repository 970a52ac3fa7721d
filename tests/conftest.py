"""Settings shared by every test directory."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# Property tests talk to real servers: no per-example deadline (timing varies on
# a loaded 2-core machine), and a bounded number of examples so the suite stays
# quick. SURGE_HYPOTHESIS_PROFILE=thorough runs many more.
settings.register_profile(
    "default",
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "thorough",
    deadline=None,
    max_examples=1000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("SURGE_HYPOTHESIS_PROFILE", "default"))
