"""`GZipMiddleware` and `accepts_gzip`, kept under their first module's name
(they live in `surge.http.middleware.compression`)."""

from .compression import DEFAULT_COMPRESSLEVEL, DEFAULT_MINIMUM_SIZE, GZipMiddleware, accepts_gzip

__all__ = ["DEFAULT_COMPRESSLEVEL", "DEFAULT_MINIMUM_SIZE", "GZipMiddleware", "accepts_gzip"]
