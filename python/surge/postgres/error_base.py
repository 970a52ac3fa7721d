"""The roots of the server's messages, in asyncpg's shape: `PostgresMessage`
carries an ErrorResponse's or NoticeResponse's fields; `PostgresError` (an
exception) and `PostgresLogMessage` (the base of the warning classes, which are
`Warning`s) derive from it. The generated SQLSTATE classes in `_sqlstate`
derive from these; `errors` gathers them all."""

from __future__ import annotations

from surge.errors import SurgeError

#: The message fields by their one-letter protocol codes, under asyncpg's
#: attribute names (the keys of `PostgresMessage.as_dict`).
FIELD_NAMES = {
    "S": "severity",
    "V": "severity_en",
    "C": "sqlstate",
    "M": "message",
    "D": "detail",
    "H": "hint",
    "P": "position",
    "p": "internal_position",
    "q": "internal_query",
    "W": "context",
    "s": "schema_name",
    "t": "table_name",
    "c": "column_name",
    "d": "data_type_name",
    "n": "constraint_name",
    "F": "server_source_filename",
    "L": "server_source_line",
    "R": "server_source_function",
}


class PostgresMessage:
    """A message from the server (an error or a notice), with its fields as
    attributes under asyncpg's names (None when the server did not send one)."""

    sqlstate: str = ""
    severity: str | None = None
    severity_en: str | None = None
    detail: str | None = None
    hint: str | None = None
    position: str | None = None
    internal_position: str | None = None
    internal_query: str | None = None
    context: str | None = None
    schema_name: str | None = None
    table_name: str | None = None
    column_name: str | None = None
    data_type_name: str | None = None
    constraint_name: str | None = None
    server_source_filename: str | None = None
    server_source_line: str | None = None
    server_source_function: str | None = None

    def __init__(self, message: str = "", fields: dict[str, str] | None = None) -> None:
        # A mixin: the next class in the MRO is Exception or Warning, or object
        # for a plain `PostgresLogMessage` (not an exception, as in asyncpg).
        if isinstance(self, BaseException):
            super().__init__(message)  # type: ignore[call-arg]
        f = fields or {}
        #: The raw fields, keyed by their one-letter codes.
        self.fields = f
        for code, value in f.items():
            name = FIELD_NAMES.get(code)
            if name is not None:
                setattr(self, name, value)
        self.message = message
        if self.severity is None:
            self.severity = ""
        #: surge's older name for `context`.
        self.where = self.context

    def as_dict(self) -> dict[str, str]:
        """The fields the server sent, by asyncpg's names (``detail``, ``hint``,
        ``constraint_name``, ``server_source_line`` ...), as asyncpg's ``as_dict``."""
        out = {}
        for name in FIELD_NAMES.values():
            value = getattr(self, name)
            if value is not None and (value != "" or name != "severity"):
                out[name] = value
        return out


class PostgresError(PostgresMessage, SurgeError):
    """An error reported by the server (an ErrorResponse), with its fields."""

    def __str__(self) -> str:
        # As asyncpg (and psql): the detail and the hint follow the message, so a
        # logged exception says which key or row was at fault.
        text = str(self.args[0]) if self.args else self.message
        if self.detail:
            text += f"\nDETAIL:  {self.detail}"
        if self.hint:
            text += f"\nHINT:  {self.hint}"
        return text


class PostgresLogMessage(PostgresMessage):
    """A notice or warning from the server (the base of the warning classes);
    what `Connection.add_log_listener` callbacks get, as in asyncpg."""

    def __str__(self) -> str:
        return f"{type(self).__name__}: {self.message}"


class FatalPostgresError(PostgresError):
    """An error after which the server closes the connection."""


class UnknownPostgresError(FatalPostgresError):
    """An error whose SQLSTATE class is not known here."""
