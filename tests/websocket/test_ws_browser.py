"""A real browser (headless Chromium from Debian) talking to surge: the page,
served by surge, opens a WebSocket to surge, echoes text, binary and a large
message compressed with permessage-deflate, closes, and reports in the DOM,
read back through the DevTools protocol."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import time
import urllib.request

import pytest
from surge.services import free_port
from websockets.sync.client import connect


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        # make test installs it (scripts/install-system-deps.sh); a bare pytest may not.
        pytest.skip("chromium is not installed (apt-get install chromium, or make system-deps)")
    return path


def evaluate(page, ids, expression):
    n = next(ids)
    page.send(
        json.dumps(
            {
                "id": n,
                "method": "Runtime.evaluate",
                "params": {"expression": expression, "returnByValue": True},
            }
        )
    )
    while True:
        reply = json.loads(page.recv(timeout=10))
        if reply.get("id") == n:
            return reply["result"]["result"].get("value")


def test_chromium_echo(server, tmp_path):
    port = free_port()
    log = open(tmp_path / "chromium.log", "wb")  # noqa: SIM115 - closed below
    browser = subprocess.Popen(
        [
            chromium(),
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            f"--remote-debugging-port={port}",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"http://127.0.0.1:{server.port}/browser",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        target = None
        while target is None:
            if browser.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"chromium did not open the page:\n{(tmp_path / 'chromium.log').read_text()}"
                )
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                    pages = [
                        t for t in json.load(r) if t["type"] == "page" and "/browser" in t["url"]
                    ]
            except OSError:
                pages = []  # not listening yet
            target = pages[0]["webSocketDebuggerUrl"] if pages else None
            time.sleep(0.05)
        assert target is not None, "the page did not open"
        ids = itertools.count(1)
        with connect(target, max_size=None, compression=None) as page:
            title = None
            while time.monotonic() < deadline:
                title = evaluate(page, ids, "document.title")
                if title in ("done", "fail"):
                    break
                time.sleep(0.05)
            results = json.loads(evaluate(page, ids, "document.getElementById('out').textContent"))
    finally:
        browser.terminate()
        try:
            browser.wait(10)
        except subprocess.TimeoutExpired:
            browser.kill()
        log.close()
    assert title == "done", results
    assert results["extensions"].startswith("permessage-deflate")
    assert results["text"] == "hello from the browser é€"
    assert results["binary"] == [0, 1, 2, 255]
    assert results["big_ok"] is True
    assert results["big_len"] == 1_600_000
    assert results["close"] == [1000, "browser done", True]
