"""surge's side-by-side benchmark suites (run with ``make bench``)."""
