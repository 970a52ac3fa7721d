"""The surge side of tests/http/test_staticfiles.py, test_forms.py and test_cookies.py:
static mounts over $SURGE_FILES_ROOT/public, FileResponse, forms and cookies."""

from __future__ import annotations

import os
from pathlib import Path

from surge.http import App, FileResponse, Response
from surge.http.forms import FormData, UploadFile

ROOT = Path(os.environ["SURGE_FILES_ROOT"])
app = App()
app.static("/static", ROOT / "public")
app.static("/site", ROOT / "public", html=True)
app.static("/linked", ROOT / "public", follow_symlinks=True)


@app.get("/file/{name}")
def file(request, name):
    return FileResponse(ROOT / "public" / name)


@app.get("/download/{name}")
def download(request, name):
    return FileResponse(ROOT / "public" / name, filename=name)


def dump(form: FormData) -> list:
    """The form as JSON: fields as they are, files as name, type, size and a digest."""
    import hashlib

    out: list = []
    for key, value in form.multi_items():
        if isinstance(value, UploadFile):
            digest = hashlib.sha256()
            size = 0
            while chunk := value.file.read(1 << 16):
                digest.update(chunk)
                size += len(chunk)
            value.file.seek(0)
            out.append(
                [
                    key,
                    {
                        "filename": value.filename,
                        "content_type": value.content_type,
                        "size": size,
                        "sha256": digest.hexdigest(),
                        "rolled": bool(getattr(value.file, "_rolled", False)),
                    },
                ]
            )
        else:
            out.append([key, value])
    return out


@app.post("/form")
async def form(request):
    async with request.form() as f:
        return dump(f)


@app.post("/upload", stream=True, max_body_size=64 * 1024 * 1024)
async def upload(request):
    async with request.form(max_file_size=16 * 1024 * 1024) as f:
        return dump(f)


@app.post("/small-limits")
async def small_limits(request):
    async with request.form(max_files=2, max_fields=3, max_part_size=100, max_file_size=1000) as f:
        return dump(f)


@app.get("/rss")
def rss(request):
    """Peak and current resident set size, in KiB; ``?reset=1`` restarts the peak
    from now (Linux: writing 5 to /proc/self/clear_refs)."""
    if request.query_params.get("reset"):
        Path("/proc/self/clear_refs").write_text("5")
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return {
        "peak": int(status["VmHWM"].split()[0]),
        "current": int(status["VmRSS"].split()[0]),
    }


@app.get("/cookies/set")
def set_cookies(request):
    r = Response("set")
    r.set_cookie("session", "abc123", max_age=3600, httponly=True)
    r.set_cookie("theme", "dark", path="/cookies", secure=False, samesite="strict")
    r.set_cookie("scoped", "x", path="/elsewhere")
    r.set_cookie("gone", "soon")
    return r


@app.get("/cookies/delete")
def delete_cookies(request):
    r = Response("deleted")
    r.delete_cookie("gone")
    return r


@app.get("/cookies/echo")
def echo_cookies(request):
    return dict(request.cookies)
