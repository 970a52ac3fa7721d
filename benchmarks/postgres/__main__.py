"""``python -m benchmarks.postgres [--quick] [--seconds S] [--repeats N]``."""

from benchmarks.postgres.run import main

main()
