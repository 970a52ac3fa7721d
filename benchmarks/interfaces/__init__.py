"""Benchmark suite: surge serving ASGI, WSGI and HTTPS apps beside granian, uvicorn and gunicorn."""
