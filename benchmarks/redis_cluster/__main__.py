"""``python -m benchmarks.redis_cluster [--quick] [--rounds R]``."""

from benchmarks.redis_cluster.run import main

main()
