"""The one exception type users see, and the argument parser that raises it.

A `UserError` carries a single line that names what is wrong (the key, file or column and the
offending value) and what would be valid. The CLI prints it as ``error: <message>`` and exits
with status 2; it is never shown as a traceback.
"""

import argparse
import sys


class UserError(ValueError):
    """Bad input from the user: a config value, a file, a column, a CLI option."""


class ConfigError(UserError):
    """A configuration key has a value that cannot be used (raised before any compute is spent)."""


class DataError(UserError):
    """A data file or table cannot be read or does not hold what is needed."""


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one-line UserErrors instead of usage text and exit(2): every verb's parser.
    It keeps the actions `add_argument` returns (``options``: each option string to its action), for a
    command that repeats some of its own options (`analysis.cli.common.refit_words`)."""

    REPEATABLE = ("append", "append_const", "extend", "count", "store_true", "store_false", "store_const", "help")

    def __init__(self, *args, **kwargs):
        self.options: dict[str, argparse.Action] = {}  # before argparse's own __init__ adds --help
        self.repeatable: set[argparse.Action] = set()  # given twice, they add up or agree (`parse_args`)
        super().__init__(*args, **kwargs)

    def add_argument(self, *args, **kwargs) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.options.update(dict.fromkeys(action.option_strings, action))
        if kwargs.get("action", "store") in self.REPEATABLE:
            self.repeatable.add(action)
        return action

    def parse_args(self, args=None, namespace=None):
        """argparse's, refusing an option that takes one value given twice (user31: `--budget 1e21 --budget 1e22`
        answered for 1e22 alone, silently; review21: `--format png --format svg` wrote svg alone): an option to
        append to, or a flag, may repeat (`REPEATABLE`)."""
        parsed = super().parse_args(args, namespace)
        seen: dict[argparse.Action, list[str]] = {}
        words = [str(w) for w in (sys.argv[1:] if args is None else args)]  # argparse's own default, as it reads
        for word in words[: words.index("--")] if "--" in words else words:  # after `--`: values, not options
            long = word.startswith("--")
            name = word.split("=", 1)[0] if long else word[:2]  # a short option may hold its value: -ofile
            if not name.startswith("-") or len(name) < 2 or name[1].isdigit():  # a value, or a negative number
                continue
            matches = (
                [self.options[name]]
                if name in self.options
                else [a for o, a in self.options.items() if long and o.startswith(name)]
            )
            if len(set(matches)) == 1:
                seen.setdefault(matches[0], []).append(str(word))
        for action, words in seen.items():
            if len(words) > 1 and action not in self.repeatable:
                self.error(f"{action.option_strings[-1]} is given {len(words)} times; give it once")
        return parsed

    def error(self, message):
        raise UserError(f"{self.prog}: {message} (see {self.prog} --help)")
