"""socketify with its own App API, one process: ``python socketify_app.py PORT``."""

import sys

from socketify import App, AppListenOptions


def hello(res, req):
    res.send(b"Hello, world!", content_type=b"text/plain; charset=utf-8")


def json_route(res, req):
    res.send({"message": "Hello, world!"})  # socketify serializes dicts as JSON


async def user(res, req):
    uid = int(req.get_parameter(0))  # read the request before any await
    res.cork_send(f"user {uid}", content_type=b"text/plain; charset=utf-8")


def main() -> None:
    port = int(sys.argv[1])
    app = App()
    app.get("/", hello)
    app.get("/json", json_route)
    app.get("/user/:id", user)
    app.listen(AppListenOptions(port=port, host="127.0.0.1"), lambda config: None)
    app.run()


if __name__ == "__main__":
    main()
