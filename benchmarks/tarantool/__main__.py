"""``python -m benchmarks.tarantool [--quick] [--n N]``."""

from benchmarks.tarantool.run import main

main()
