"""Exposition: the Prometheus text format, and the flat dotted names Graphite and StatsD take."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

#: Prometheus text format content type.
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class Family:
    """One metric with its samples, ready to export: (suffix, labels, value) each."""

    name: str
    kind: str  # counter | gauge | summary
    help: str
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(v: float) -> str:
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def render_prometheus(families: Iterable[Family]) -> str:
    """Families as Prometheus text; families with one name are merged."""
    merged: dict[str, Family] = {}
    for f in families:
        m = merged.get(f.name)
        if m is None:
            merged[f.name] = Family(f.name, f.kind, f.help, list(f.samples))
        else:
            m.samples.extend(f.samples)
    lines = []
    for f in merged.values():
        if f.help:
            lines.append(f"# HELP {f.name} {_escape_help(f.help)}")
        lines.append(f"# TYPE {f.name} {f.kind}")
        for suffix, labels, value in f.samples:
            if labels:
                inner = ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items())
                lines.append(f"{f.name}{suffix}{{{inner}}} {_number(value)}")
            else:
                lines.append(f"{f.name}{suffix} {_number(value)}")
    return "\n".join(lines) + "\n"


_GRAPHITE_UNSAFE = re.compile(r"[^A-Za-z0-9_\-]")


def _graphite_part(text: str) -> str:
    return _GRAPHITE_UNSAFE.sub("_", text) or "_"


def flatten(families: Iterable[Family]) -> list[tuple[str, float]]:
    """Dotted names: ``name[.suffix].labelvalue...`` (quantile 0.99 becomes ``p99``)."""
    out = []
    for f in families:
        for suffix, labels, value in f.samples:
            parts = [f.name]
            for k, v in labels.items():
                if k == "quantile":
                    parts.append("p" + _graphite_part(f"{float(v) * 100:g}"))
                else:
                    parts.append(_graphite_part(str(v)))
            if suffix:
                parts.append(suffix.lstrip("_"))
            if isinstance(value, float) and math.isnan(value):
                continue
            out.append((".".join(parts), value))
    return out


def graphite_lines(pairs: Iterable[tuple[str, float]], prefix: str, ts: int) -> bytes:
    """Graphite plaintext protocol: ``prefix.name value timestamp\\n`` per metric."""
    pre = f"{prefix}." if prefix else ""
    return "".join(f"{pre}{name} {_number(v)} {ts}\n" for name, v in pairs).encode()
