"""The seed-000 Tarantool workload: surge vs asynctnt, tarantool-python and net.box."""
