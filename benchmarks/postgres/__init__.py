"""PostgreSQL benchmark suite: surge.postgres vs asyncpg and psycopg 3."""
