"""A real Flask app for the WSGI tests, served by `surge serve` and by gunicorn."""

from __future__ import annotations

import hashlib
from pathlib import Path

from flask import Flask, Response, abort, jsonify, redirect, request, send_file

app = Flask(__name__)
HERE = Path(__file__).parent


@app.get("/")
def root():
    return "hello from flask"


@app.get("/query")
def query():
    return jsonify(args=request.args.to_dict(flat=False), path=request.path)


@app.post("/form")
def form():
    return jsonify(form=request.form.to_dict(flat=False))


@app.post("/json")
def json_body():
    data = request.get_json()
    return jsonify(got=data, kind=type(data).__name__), 201


@app.post("/upload")
def upload():
    f = request.files["file"]
    data = f.read()
    return jsonify(
        name=f.filename,
        size=len(data),
        sha=hashlib.sha256(data).hexdigest(),
        note=request.form["note"],
    )


@app.get("/stream")
def stream():
    def gen():
        for i in range(5):
            yield f"line {i}\n"

    return Response(gen(), mimetype="text/plain")


@app.get("/file")
def file():
    # send_file hands the open file to the server's wsgi.file_wrapper.
    return send_file(HERE / "hello.txt", mimetype="text/plain", etag=False, last_modified=None)


@app.get("/missing")
def missing():
    abort(404)


@app.get("/crash")
def crash():
    raise RuntimeError("boom")


@app.get("/cookie")
def cookie():
    resp = jsonify(seen=request.cookies.get("a"))
    resp.set_cookie("b", "2", httponly=True)
    resp.set_cookie("c", "3", path="/x")
    return resp


@app.get("/redirect")
def go():
    return redirect("/query?from=redirect")


@app.route("/headers", methods=["GET", "PUT"])
def headers():
    return jsonify(custom=request.headers.get("X-Custom"), method=request.method)
