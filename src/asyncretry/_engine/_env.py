"""Reading ``retry_mode`` and ``max_attempts`` the way the AWS SDKs do.

Precedence: code > environment (``AWS_RETRY_MODE``, ``AWS_MAX_ATTEMPTS``) > the shared config file
(``AWS_CONFIG_FILE``, default ``~/.aws/config``; the profile from ``AWS_DEFAULT_PROFILE``, else
``AWS_PROFILE``, as botocore reads them, else ``default``) > defaults (``standard``; 3 attempts, or
botocore's 5 in ``legacy`` mode). A bad value raises :class:`ConfigurationError` naming where it came from.
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .._exceptions import ConfigurationError

__all__ = ["EnvSettings", "settings_from_env"]

_MODES = ("standard", "adaptive", "legacy")


@dataclass(frozen=True, slots=True)
class EnvSettings:
    """The resolved settings and where each came from (``"code"``, ``"env"``, ``"config file"``, ``"default"``)."""

    mode: str
    max_attempts: int
    mode_source: str
    max_attempts_source: str


def _read_config(environ: Mapping[str, str]) -> tuple[dict[str, str], str]:
    # expanduser on the variable too: botocore accepts AWS_CONFIG_FILE=~/path.
    path = Path(environ.get("AWS_CONFIG_FILE") or "~/.aws/config").expanduser()
    # botocore reads AWS_DEFAULT_PROFILE before AWS_PROFILE.
    profile = environ.get("AWS_DEFAULT_PROFILE") or environ.get("AWS_PROFILE") or "default"
    where = f"{path} [{'default' if profile == 'default' else 'profile ' + profile}]"
    if not path.is_file():
        return {}, where
    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except configparser.Error as error:
        raise ConfigurationError(f"shared config file {path} cannot be parsed: {error}") from error
    for section in (f"profile {profile}", profile) if profile != "default" else ("default", "profile default"):
        if parser.has_section(section):
            return {k: v.strip() for k, v in parser.items(section)}, f"{path} [{section}]"
    return {}, where


def _parse_mode(value: object, source: str) -> str:
    text = str(value).strip().lower() if isinstance(value, str) else value
    if text not in _MODES:
        raise ConfigurationError(
            f"retry mode {value!r} from {source} is invalid: allowed values are 'standard', 'adaptive', 'legacy'"
        )
    return str(text)


def _parse_attempts(value: object, source: str) -> int:
    if isinstance(value, bool):
        number: int | None = None
    elif isinstance(value, int):
        number = value
    else:
        try:
            number = int(str(value).strip(), 10)
        except ValueError:
            number = None
    if number is None or number < 1:
        raise ConfigurationError(
            f"max_attempts {value!r} from {source} is invalid: it must be an integer > 0 (1 disables retries)"
        )
    return number


def settings_from_env(
    *, mode: str | None = None, max_attempts: int | None = None, environ: Mapping[str, str] | None = None
) -> EnvSettings:
    """Resolve ``retry_mode`` and ``max_attempts`` with the AWS SDKs' precedence.

    Args:
        mode: a value set in code, which wins; ``None`` to look further.
        max_attempts: a value set in code, which wins; ``None`` to look further.
        environ: the environment to read (default :data:`os.environ`).

    Raises:
        ConfigurationError: a value is invalid; the message names its source and the allowed values.
    """
    env = os.environ if environ is None else environ
    file_values: dict[str, str] | None = None
    file_where = ""

    def from_file(key: str) -> str | None:
        nonlocal file_values, file_where
        if file_values is None:
            file_values, file_where = _read_config(env)
        return file_values.get(key)

    if mode is not None:
        mode_value, mode_source = _parse_mode(mode, "code"), "code"
    elif env.get("AWS_RETRY_MODE"):
        mode_value, mode_source = _parse_mode(env["AWS_RETRY_MODE"], "environment variable AWS_RETRY_MODE"), "env"
    elif (raw := from_file("retry_mode")) is not None:
        mode_value, mode_source = _parse_mode(raw, f"shared config file {file_where} key retry_mode"), "config file"
    else:
        mode_value, mode_source = "standard", "default"

    if max_attempts is not None:
        attempts, attempts_source = _parse_attempts(max_attempts, "code"), "code"
    elif env.get("AWS_MAX_ATTEMPTS"):
        attempts = _parse_attempts(env["AWS_MAX_ATTEMPTS"], "environment variable AWS_MAX_ATTEMPTS")
        attempts_source = "env"
    elif (raw := from_file("max_attempts")) is not None:
        attempts = _parse_attempts(raw, f"shared config file {file_where} key max_attempts")
        attempts_source = "config file"
    else:
        # botocore's legacy mode makes 5 attempts by default (its _retry.json), the other modes 3.
        attempts, attempts_source = (5 if mode_value == "legacy" else 3), "default"
    return EnvSettings(mode_value, attempts, mode_source, attempts_source)
