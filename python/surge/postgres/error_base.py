"""`PostgresError`, the base of the server's errors (the generated SQLSTATE
classes in `_sqlstate` derive from it; `errors` gathers them all)."""

from __future__ import annotations

from surge.errors import SurgeError


class PostgresError(SurgeError):
    """An error reported by the server (an ErrorResponse), with its fields."""

    sqlstate: str = ""

    def __init__(self, message: str = "", fields: dict[str, str] | None = None) -> None:
        super().__init__(message)
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
        """The raw ErrorResponse fields, keyed by their one-letter codes."""
        return dict(self.fields)
