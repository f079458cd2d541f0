"""The one exception type users see.

A `UserError` carries a single line that names what is wrong (the key, file or column and the
offending value) and what would be valid. The CLI prints it as ``error: <message>`` and exits
with status 2; it is never shown as a traceback.
"""


class UserError(ValueError):
    """Bad input from the user: a config value, a file, a column, a CLI option."""


class ConfigError(UserError):
    """A configuration key has a value that cannot be used (raised before any compute is spent)."""


class DataError(UserError):
    """A data file or table cannot be read or does not hold what is needed."""
