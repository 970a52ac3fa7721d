"""The root of surge's exception hierarchy: every error surge raises on purpose
derives from `SurgeError`."""


class SurgeError(Exception):
    """Base class of every surge error."""
