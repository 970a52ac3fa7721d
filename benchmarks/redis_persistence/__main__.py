"""``python -m benchmarks.redis_persistence [--quick]``."""

from benchmarks.redis_persistence.run import main

main()
