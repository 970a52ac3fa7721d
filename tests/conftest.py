"""Settings shared by every test directory."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

from tests.loops import arun_fixture

# Property tests here talk to real servers: no per-example deadline (timing varies
# on a loaded 2-core machine), and fixtures that start servers are shared across
# examples on purpose. SURGE_HYPOTHESIS_PROFILE=thorough runs ten times more examples.
_common = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
}
settings.register_profile("default", **_common)
settings.register_profile("thorough", max_examples=1000, **_common)
settings.load_profile(os.environ.get("SURGE_HYPOTHESIS_PROFILE", "default"))

#: The one ``arun`` fixture of every test directory (tests/loops.py).
arun = arun_fixture()
