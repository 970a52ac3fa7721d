"""Every PostgreSQL exception class under asyncpg's module name, so
``asyncpg.exceptions.UniqueViolationError`` ports as
``surge.postgres.exceptions.UniqueViolationError`` (the same classes as at the
package top)."""

from surge.postgres._sqlstate import *  # noqa: F403
from surge.postgres._sqlstate import __all__ as _sqlstate_names
from surge.postgres.errors import *  # noqa: F403
from surge.postgres.errors import __all__ as _error_names

__all__ = [*_sqlstate_names, *_error_names]
