"""The roots of the server's messages, in asyncpg's shape: `PostgresMessage`
carries an ErrorResponse's or NoticeResponse's fields; `PostgresError` (an
exception) and `PostgresLogMessage` (the base of the warning classes, which are
`Warning`s) derive from it. The generated SQLSTATE classes in `_sqlstate`
derive from these; `errors` gathers them all."""

from __future__ import annotations

from surge.errors import SurgeError


class PostgresMessage:
    """A message from the server (an error or a notice), with its fields."""

    sqlstate: str = ""

    def __init__(self, message: str = "", fields: dict[str, str] | None = None) -> None:
        # A mixin: the next class in the MRO is Exception or Warning.
        super().__init__(message)  # type: ignore[call-arg]
        f = fields or {}
        self.fields = f
        self.message = message
        self.severity = f.get("S", "")
        self.detail = f.get("D")
        self.hint = f.get("H")
        self.position = f.get("P")
        self.where = f.get("W")
        self.schema_name = f.get("s")
        self.table_name = f.get("t")
        self.column_name = f.get("c")
        self.data_type_name = f.get("d")
        self.constraint_name = f.get("n")
        if f.get("C"):
            self.sqlstate = f["C"]

    def as_dict(self) -> dict[str, str]:
        """The raw message fields, keyed by their one-letter codes."""
        return dict(self.fields)


class PostgresError(PostgresMessage, SurgeError):
    """An error reported by the server (an ErrorResponse), with its fields."""


class PostgresLogMessage(PostgresMessage):
    """A notice or warning from the server (the base of the warning classes)."""


class FatalPostgresError(PostgresError):
    """An error after which the server closes the connection."""


class UnknownPostgresError(FatalPostgresError):
    """An error whose SQLSTATE class is not known here."""
