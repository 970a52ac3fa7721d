"""``python -m benchmarks.redis [--quick] [--n N]``."""

from benchmarks.redis.run import main

main()
