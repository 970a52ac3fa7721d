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
