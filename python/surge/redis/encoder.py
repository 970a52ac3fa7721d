"""`Encoder`: redis-py's ``get_encoder()`` object, for code that encodes and decodes
values itself. The client does not use it: its arguments go straight into the
write buffer in Rust (``crates/surge-py/src/redis/args.rs``), under the same rules:
bytes, str (UTF-8), int and float are taken; bool, None and anything else raise
`DataError`, as redis-py's encoder raises it."""

from __future__ import annotations

from typing import Any

from surge.redis.errors import DataError


class Encoder:
    """Encode an argument to bytes; decode a reply value (when decode_responses)."""

    def __init__(
        self,
        encoding: str = "utf-8",
        encoding_errors: str = "strict",
        decode_responses: bool = False,
    ) -> None:
        self.encoding = encoding
        self.encoding_errors = encoding_errors
        self.decode_responses = decode_responses

    def encode(self, value: Any) -> bytes:
        """bytes/memoryview as is, str in UTF-8, int and float as their decimal text."""
        if isinstance(value, bytes | memoryview | bytearray):
            return bytes(value)
        if isinstance(value, bool):
            raise DataError(
                "Invalid input of type: 'bool'. Convert to a bytes, string, int or float first."
            )
        if isinstance(value, int | float):
            return repr(value).encode()
        if isinstance(value, str):
            return value.encode(self.encoding, self.encoding_errors)
        raise DataError(
            f"Invalid input of type: '{type(value).__name__}'. "
            "Convert to a bytes, string, int or float first."
        )

    def decode(self, value: Any, force: bool = False) -> Any:
        """bytes to str when decode_responses (or force)."""
        if (self.decode_responses or force) and isinstance(value, bytes | memoryview):
            return bytes(value).decode(self.encoding, self.encoding_errors)
        return value
