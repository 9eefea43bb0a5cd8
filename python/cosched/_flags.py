"""Keyword arguments as the command line's flags, and the flags as docstrings.

Every setting of :func:`cosched.simulate` and :func:`cosched.study` is a flag of
``cosched sim`` or ``cosched study eN`` written as a keyword: ``runtime_scale=0.1``
is ``--runtime-scale 0.1``. The native module parses them with the CLI's own
parser, so defaults, checks and error messages are the CLI's.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Union

from . import _native

#: A setting's value: a number, a string, a path, a flag (True) or a list (joined by commas).
SettingValue = Union[bool, int, float, str, "os.PathLike[str]", Iterable[Union[int, float, str]], None]


def to_flags(settings: Mapping[str, SettingValue]) -> list[str]:
    """``{"nodes": 32, "schemes": ["gs", "sb"], "fast": True}`` -> ``["--nodes=32", "--schemes=gs,sb", "--fast"]``.

    ``None`` and ``False`` leave a setting at its default. A value is joined to its flag with ``=`` so
    that a negative number is read as the flag's value (and refused by its check), not as a flag.
    """
    flags: list[str] = []
    for key, value in settings.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            flags.append(flag)
        elif isinstance(value, (str, os.PathLike)):
            flags.append(f"{flag}={os.fspath(value)}")
        elif isinstance(value, Iterable):
            flags.append(f"{flag}={','.join(str(v) for v in value)}")
        else:
            flags.append(f"{flag}={value}")
    return flags


def settings_doc(command: str, *, left_out: tuple[str, ...] = ()) -> str:
    """Every setting of a command, one per line, as keyword arguments, from the CLI's own flag table
    (but ``left_out``: flags the Python function replaces with its own parameters)."""
    lines = []
    for name, help_text, default, takes_value in _native.flag_table(command):
        keyword = name.replace("-", "_")
        if keyword in left_out:
            continue
        shown = f"{keyword}={default}" if default is not None else (keyword if takes_value else f"{keyword}=False")
        lines.append(f"    {shown}\n        {help_text}")
    return "\n".join(lines)
