"""``ConfigError``, in a module of its own so that ``environment.py`` (which config.py reads the
environment through) can raise it without importing config.py back; ``ezat_common.config``
re-exports it, the name every caller uses."""

from __future__ import annotations


class ConfigError(Exception):
    """The configuration cannot be used; the message names the file and the key."""
