"""Apps of the operations benchmark (every one answers "/" with "Hello, World!")."""

from surge.http import App

hello = App()


@hello.get("/")
def root(request):
    return "Hello, World!"


async def raw_asgi(scope, receive, send):
    if scope["type"] != "http":
        return
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/plain"), (b"content-length", b"13")],
        }
    )
    await send({"type": "http.response.body", "body": b"Hello, World!"})


def _instrumented():
    """The hello app counted the prometheus_client way (a counter and a latency
    histogram per request, as exporters for other frameworks do), in its
    multiprocess mode: what surge's native counters save."""
    import time

    from prometheus_client import Counter, Histogram

    requests = Counter("bench_requests_total", "requests", ["method", "status"])
    latency = Histogram("bench_request_seconds", "latency")
    app = App()

    @app.get("/")
    def root(request):
        t0 = time.perf_counter()
        requests.labels(request.method, "200").inc()
        latency.observe(time.perf_counter() - t0)
        return "Hello, World!"

    return app


native_metrics = App()
native_metrics.add_metrics("/metrics")


@native_metrics.get("/")
def native_root(request):
    return "Hello, World!"


def __getattr__(name: str):
    if name == "prometheus_client_metrics":
        return _instrumented()
    raise AttributeError(name)
