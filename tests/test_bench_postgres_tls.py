"""The PostgreSQL TLS suite's table builder (`benchmarks.postgres_tls`): the figures
it reports come from the runs it was given, paired round by round."""

from __future__ import annotations

import pytest

pgtls = pytest.importorskip("benchmarks.postgres_tls")


def _result(queries: int, secs: float, cpu: float, server: float | None) -> dict:
    return {
        "queries": queries,
        "secs": secs,
        "cpu": cpu,
        "server_cpu": server,
        "other_cores": 0.05,
        "rows_per_query": 1,
    }


def _run(plain_q: int, tls_q: int, with_tls_info: bool = True) -> dict:
    out = {
        "select1": _result(plain_q, 1.0, 0.5, 0.25),
        "select1+tls": _result(tls_q, 1.0, 0.6, None),
    }
    if with_tls_info:
        out["_tls"] = {
            "stack": "rustls (native)",
            "version": "TLSv1.3",
            "cipher": "TLS_AES_256_GCM_SHA384",
            "bits": 256,
        }
    return out


CFG = {"shape": "1000 coros", "driver": "surge", "loop": "uvloop", "conc": 1000, "conns": 1}


def test_ratio_is_the_median_of_per_round_ratios():
    # round ratios 0.5, 0.9, 0.95: their median is 0.9; the ratio of the medians
    # (950 / 1000) would pair one round's TLS run with another round's plaintext
    runs = [_run(1000, 500), _run(2000, 1800), _run(1000, 950)]
    row = pgtls.summarize(CFG, runs, ["select1"])
    v = row["workloads"]["select1"]
    assert v["ratio"] == pytest.approx(0.9)
    assert v["plain_qps"] == 1000 and v["tls_qps"] == 950
    # CPU per query in microseconds: 0.5 s over 1000 queries is 500 us
    assert v["client_us"] == pytest.approx(500)
    assert v["client_tls_us"] == pytest.approx(0.6 / 950 * 1e6)
    assert v["server_us"] == pytest.approx(250)
    assert v["server_tls_us"] is None  # no server figure in any TLS run
    assert row["tls"]["cipher"] == "TLS_AES_256_GCM_SHA384"


def test_markdown_has_a_row_per_workload_and_client():
    rows = [
        pgtls.summarize(CFG, [_run(1000, 700)], ["select1"]),
        pgtls.summarize({**CFG, "loop": "asyncio"}, [_run(1000, 900, False)], ["select1"]),
    ]
    md = pgtls.markdown(rows, ["select1"], 2.0, 1)
    lines = [line for line in md.splitlines() if line.startswith("| select1 ")]
    assert len(lines) == 2
    uv, aio = (line.split(" | ") for line in lines)
    assert uv[1] == "surge/uvloop" and uv[5] == "0.70 *"  # under the 0.8 target
    assert aio[1] == "surge/asyncio" and aio[5] == "0.90"
    assert aio[-1] == "- |"  # server CPU missing: a dash, not a zero
    assert "rustls (native), TLSv1.3 TLS_AES_256_GCM_SHA384" in md


def test_only_read_workloads():
    assert set(pgtls.WORKLOADS) <= set(pgtls.pgrun.WORKLOADS)
    assert not set(pgtls.WORKLOADS) & set(pgtls.pgrun.WRITE_WORKLOADS)


def test_configs_cover_both_shapes_on_every_loop():
    cfgs = pgtls.configs(["uvloop", "asyncio"], peers=True)
    surge = {(c["shape"], c["loop"], c["conns"]) for c in cfgs if c["driver"] == "surge"}
    assert surge == {
        ("10 conns", "uvloop", 10),
        ("10 conns", "asyncio", 10),
        ("1000 coros", "uvloop", 1),
        ("1000 coros", "asyncio", 1),
    }
    assert [c["driver"] for c in pgtls.configs(["uvloop"], peers=False)] == ["surge", "surge"]
