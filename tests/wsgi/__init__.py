"""WSGI serving tests (a package, so its conftest does not shadow tests/asgi's `conftest`)."""
