"""Hello world through three middlewares: surge with them against surge without
them, and against Starlette with the same three on uvicorn (issue 14's targets:
>= 0.7x and >= 2x).

    python -m benchmarks.middleware [--quick] [--seconds 5] [--rounds 3]

Workloads (benchmarks/middleware/apps.py): ``user``, three ``@app.middleware
("http")`` functions adding a header each; ``builtin``, the frameworks' own CORS,
GZip and session middleware (requests carry ``Origin`` and ``Accept-Encoding:
gzip``; the body is under GZip's minimum size). One worker each, the server
pinned to core 1 and ``wrk -t1 -c100`` to core 0; the servers alternate round by
round and the medians are compared.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys

from surge.services import free_port

from benchmarks.websocket.run import wait_port

APPS = "benchmarks.middleware.apps"
HEADERS = {
    "user": [],
    "builtin": ["-H", "Origin: https://a.example", "-H", "Accept-Encoding: gzip"],
}
DESCRIBE = {
    "user": "three `@app.middleware('http')` adding a header each",
    "builtin": "CORS + GZip + sessions, each framework's own",
}
TARGETS = [("surge with / without", 0.7), ("surge / Starlette+uvicorn", 2.0)]


def servers(kind: str) -> dict[str, list[str]]:
    uvicorn = [
        "--loop",
        "uvloop",
        "--http",
        "httptools",
        "--no-access-log",
        "--log-level",
        "warning",
    ]
    return {
        "surge, no middleware": ["-m", "surge", "serve", f"{APPS}:surge_none"],
        "surge, 3 middlewares": ["-m", "surge", "serve", f"{APPS}:surge_{kind}"],
        "Starlette+uvicorn, 3 middlewares": ["-m", "uvicorn", f"{APPS}:starlette_{kind}", *uvicorn],
    }


def wrk(port: int, seconds: float, headers: list[str]) -> float:
    out = subprocess.run(
        ["taskset", "-c", "0", "wrk", "-t1", "-c100", f"-d{seconds:g}s", *headers,
         f"http://127.0.0.1:{port}/"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    if "Non-2xx" in out:
        raise RuntimeError(f"error responses during the run:\n{out}")
    if "Socket errors" in out:  # timeouts on a loaded machine: shown, not fatal
        print(out, file=sys.stderr)
    match = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if match is None:
        raise RuntimeError(f"no rate in wrk's output:\n{out}")
    return float(match.group(1))


def run_one(cmd: list[str], seconds: float, headers: list[str]) -> float:
    port = free_port()
    proc = subprocess.Popen(
        ["taskset", "-c", "1", sys.executable, *cmd, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port)
        wrk(port, 1.0, headers)  # warm up
        return wrk(port, seconds, headers)
    finally:
        proc.terminate()
        proc.wait(10)


def main(argv: list[str] | None = None) -> dict:
    """Runs the suite; returns its markdown and setup lines (see benchmarks.run)."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.middleware")
    ap.add_argument("--quick", action="store_true", help="1 round of 2 s")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if args.quick:
        args.seconds, args.rounds = 2.0, 1
    if shutil.which("wrk") is None or shutil.which("taskset") is None:
        raise SystemExit("benchmarks.middleware needs wrk and taskset")
    lines = [
        f"**Hello through 3 middlewares: 1 worker, wrk -t1 -c100, {args.seconds:g} s runs, "
        f"median of {args.rounds} interleaved rounds**",
        "",
    ]
    for kind in ("user", "builtin"):
        rates: dict[str, list[float]] = {name: [] for name in servers(kind)}
        for _ in range(args.rounds):
            for name, cmd in servers(kind).items():
                rates[name].append(run_one(cmd, args.seconds, HEADERS[kind]))
                print(f"{kind}: {name}: {rates[name][-1]:,.0f} req/s", file=sys.stderr)
        median = {name: statistics.median(v) for name, v in rates.items()}
        mw = median["surge, 3 middlewares"]
        ratios = [
            mw / median["surge, no middleware"],
            mw / median["Starlette+uvicorn, 3 middlewares"],
        ]
        lines += [
            f"`{kind}`: {DESCRIBE[kind]}",
            "",
            "| server | req/s (median) | rounds |",
            "|---|---:|---|",
        ]
        for name, values in rates.items():
            shown = ", ".join(f"{v:,.0f}" for v in values)
            lines.append(f"| {name} | {median[name]:,.0f} | {shown} |")
        lines += ["", "| target | measured | met |", "|---|---:|:---:|"]
        for (what, goal), got in zip(TARGETS, ratios, strict=True):
            lines.append(f"| {what} >= {goal}x | {got:.2f}x | {'yes' if got >= goal else 'no'} |")
        lines.append("")
    markdown = "\n".join(lines)
    print(markdown)
    setup = (
        "middleware: hello world, 1 worker, server pinned to core 1, wrk -t1 -c100 on core 0, "
        f"{args.rounds} rounds of {args.seconds:g} s alternating the servers; uvicorn with "
        "uvloop and httptools; `builtin` requests carry Origin and Accept-Encoding: gzip"
    )
    return {"markdown": markdown, "setup_lines": [setup]}


if __name__ == "__main__":
    main()
