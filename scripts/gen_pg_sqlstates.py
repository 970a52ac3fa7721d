"""Generate ``python/surge/postgres/_sqlstate.py``: one exception class per
SQLSTATE, from PostgreSQL's own ``errcodes.txt`` (shipped with the server).

    python scripts/gen_pg_sqlstates.py [/usr/share/postgresql/15/errcodes.txt]

Names follow asyncpg's: the condition name in CamelCase plus ``Error``
(``unique_violation`` -> ``UniqueViolationError``), ``Warning`` for warnings,
a ``Postgres`` prefix where the name would shadow a Python builtin, and a few
class-level names asyncpg chose by hand (``SyntaxOrAccessError``, ``DataError``).
Each code's class derives from its SQLSTATE class's (the ``XX000`` entry), which
derives from ``PostgresError``; warnings (class 01, and 02 "no data") derive from
``PostgresLogMessage`` and ``Warning`` instead, as in asyncpg (the server sends
them as notices, never as errors). Where asyncpg's name differs from the rule,
asyncpg's is the class and the rule's an alias; codes newer than the local
errcodes.txt that asyncpg knows are added from ``EXTRA``.
"""

from __future__ import annotations

import builtins
import glob
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "python/surge/postgres/_sqlstate.py"

#: asyncpg's hand-picked names for some classes.
RENAMES = {
    "syntax_error_or_access_rule_violation": "SyntaxOrAccessError",
    "data_exception": "DataError",
    "integrity_constraint_violation": "IntegrityConstraintViolationError",
    "warning": "PostgresWarning",
    "syntax_error": "PostgresSyntaxError",
    "connection_exception": "PostgresConnectionError",
    "io_error": "PostgresIOError",
    "system_error": "PostgresSystemError",
}


#: asyncpg's class name for each SQLSTATE whose name differs from the rule above
#: (asyncpg names them by hand: ``SQL`` and ``FDW`` in capitals, ``RaiseError``,
#: warnings without the suffix). The rule's name stays as an alias, so code
#: written against either name works.
ASYNCPG_NAMES = {
    "01003": "NullValueEliminatedInSetFunction",
    "01004": "StringDataRightTruncation",
    "01006": "PrivilegeNotRevoked",
    "01007": "PrivilegeNotGranted",
    "01008": "ImplicitZeroBitPadding",
    "0100C": "DynamicResultSetsReturned",
    "01P01": "DeprecatedFeature",
    "02000": "NoData",
    "02001": "NoAdditionalDynamicResultSetsReturned",
    "03000": "SQLStatementNotYetCompleteError",
    "08001": "ClientCannotConnectError",
    "08004": "ConnectionRejectionError",
    "09000": "TriggeredActionError",
    "0F000": "LocatorError",
    "0Z000": "DiagnosticsError",
    "22031": "InvalidArgumentForSQLJsonDatetimeFunctionError",
    "22033": "InvalidSQLJsonSubscriptError",
    "22034": "MoreThanOneSQLJsonItemError",
    "22035": "NoSQLJsonItemError",
    "22036": "NonNumericSQLJsonItemError",
    "22038": "SingletonSQLJsonItemRequiredError",
    "22039": "SQLJsonArrayNotFoundError",
    "2203A": "SQLJsonMemberNotFoundError",
    "2203B": "SQLJsonNumberNotFoundError",
    "2203C": "SQLJsonObjectNotFoundError",
    "2203F": "SQLJsonScalarRequiredError",
    "2203G": "SQLJsonItemCannotBeCastToTargetTypeError",
    "22P01": "PostgresFloatingPointError",
    "25001": "ActiveSQLTransactionError",
    "25005": "NoActiveSQLTransactionForBranchTransactionError",
    "25006": "ReadOnlySQLTransactionError",
    "25P01": "NoActiveSQLTransactionError",
    "25P02": "InFailedSQLTransactionError",
    "26000": "InvalidSQLStatementNameError",
    "2F000": "SQLRoutineError",
    "2F002": "ModifyingSQLDataNotPermittedError",
    "2F003": "ProhibitedSQLStatementAttemptedError",
    "2F004": "ReadingSQLDataNotPermittedError",
    "38000": "ExternalRoutineError",
    "38001": "ContainingSQLNotPermittedError",
    "38002": "ModifyingExternalRoutineSQLDataNotPermittedError",
    "38003": "ProhibitedExternalRoutineSQLStatementAttemptedError",
    "38004": "ReadingExternalRoutineSQLDataNotPermittedError",
    "39000": "ExternalRoutineInvocationError",
    "39004": "NullValueInExternalRoutineNotAllowedError",
    "3B000": "SavepointError",
    "40001": "SerializationError",
    "HV000": "FDWError",
    "HV001": "FDWOutOfMemoryError",
    "HV002": "FDWDynamicParameterValueNeededError",
    "HV004": "FDWInvalidDataTypeError",
    "HV005": "FDWColumnNameNotFoundError",
    "HV006": "FDWInvalidDataTypeDescriptorsError",
    "HV007": "FDWInvalidColumnNameError",
    "HV008": "FDWInvalidColumnNumberError",
    "HV009": "FDWInvalidUseOfNullPointerError",
    "HV00A": "FDWInvalidStringFormatError",
    "HV00B": "FDWInvalidHandleError",
    "HV00C": "FDWInvalidOptionIndexError",
    "HV00D": "FDWInvalidOptionNameError",
    "HV00J": "FDWOptionNameNotFoundError",
    "HV00K": "FDWReplyHandleError",
    "HV00L": "FDWUnableToCreateExecutionError",
    "HV00M": "FDWUnableToCreateReplyError",
    "HV00N": "FDWUnableToEstablishConnectionError",
    "HV00P": "FDWNoSchemasError",
    "HV00Q": "FDWSchemaNotFoundError",
    "HV00R": "FDWTableNotFoundError",
    "HV010": "FDWFunctionSequenceError",
    "HV014": "FDWTooManyHandlesError",
    "HV021": "FDWInconsistentDescriptorInformationError",
    "HV024": "FDWInvalidAttributeValueError",
    "HV090": "FDWInvalidStringLengthOrBufferLengthError",
    "HV091": "FDWInvalidDescriptorFieldIdentifierError",
    "P0000": "PLPGSQLError",
    "P0001": "RaiseError",
    "P0004": "AssertError",
    "XX000": "InternalServerError",
}

#: Codes from PostgreSQL releases newer than the errcodes.txt this may run on:
#: code -> (severity, condition).
EXTRA = {
    "10608": ("E", "invalid_argument_for_xquery"),
    "25P04": ("E", "transaction_timeout"),
    "58P03": ("E", "file_name_too_long"),
}


def camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def class_name(condition: str, severity: str) -> str:
    if condition in RENAMES:
        return RENAMES[condition]
    base = camel(condition)
    suffix = "Warning" if severity == "W" else "Error"
    if not base.endswith(suffix):
        base += suffix
    if hasattr(builtins, base):
        base = "Postgres" + base
    return base


def main(path: str) -> None:
    rows = []
    for line in Path(path).read_text().splitlines():
        parts = line.split()
        if len(parts) != 4 or len(parts[0]) != 5 or parts[1] not in "EWS":
            continue
        code, severity, _macro, condition = parts
        if code.startswith("00"):
            continue  # successful completion is no error
        rows.append((code, severity, condition))
    known = {r[0] for r in rows}
    rows += [(c, sev, cond) for c, (sev, cond) in EXTRA.items() if c not in known]
    names: dict[str, str] = {}
    aliases: dict[str, str] = {}
    used: set[str] = set()
    out = [
        '"""One exception class per SQLSTATE. GENERATED by scripts/gen_pg_sqlstates.py',
        'from PostgreSQL\'s errcodes.txt: do not edit by hand."""',
        "",
        "from __future__ import annotations",
        "",
        "from surge.postgres.error_base import PostgresError, PostgresLogMessage, PostgresMessage",
        "",
    ]
    for code, severity, condition in rows:
        rule = class_name(condition, severity)
        if rule in used:
            rule = class_name(condition + "_" + code[:2].lower(), severity)
        name = ASYNCPG_NAMES.get(code, rule)
        if rule != name:
            aliases[rule] = name
        used.add(rule)
        used.add(name)
        names[code] = name
        cls = code[:2] + "000"
        if code == "01000":
            base = "PostgresLogMessage, Warning"
        elif code == "02000":
            base = names["01000"]
        elif code == cls:
            base = "PostgresError"
        else:
            base = names.get(cls, "PostgresError")
        doc = condition.replace("_", " ")
        out += [
            "",
            f"class {name}({base}):",
            f'    """SQLSTATE {code}: {doc}."""',
            "",
            f'    sqlstate = "{code}"',
            "",
        ]
    out += [
        "",
        "class InvalidCachedStatementError(FeatureNotSupportedError):",
        '    """A cached prepared statement no longer fits its tables (asyncpg\'s name)."""',
        "",
        "",
        "#: The names before asyncpg's were adopted, kept working.",
    ]
    out += [f"{old} = {new}" for old, new in aliases.items()]
    out += [
        "",
        "#: SQLSTATE -> exception class.",
        "BY_SQLSTATE: dict[str, type[PostgresMessage]] = {",
    ]
    out += [f'    "{code}": {name},' for code, name in names.items()]
    out += ["}", ""]
    everything = sorted([*names.values(), *aliases, "InvalidCachedStatementError"])
    out += ["__all__ = [", '    "BY_SQLSTATE",'] + [f'    "{n}",' for n in everything] + ["]", ""]
    OUT.write_text("\n".join(out))
    print(f"{len(names)} classes, {len(aliases)} aliases -> {OUT}")


if __name__ == "__main__":
    found = sorted(glob.glob("/usr/share/postgresql/*/errcodes.txt"))
    main(sys.argv[1] if len(sys.argv) > 1 else found[-1])
