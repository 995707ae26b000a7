"""retry_mode and max_attempts come from code, else the environment, else the config file, else defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from asyncretry import AdaptiveLimiterConfig, ConfigurationError, EnvSettings, RetryPolicy, settings_from_env


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    """A shared config file with a default profile and two named ones (never the real ~/.aws/config)."""
    path = tmp_path / "config"
    path.write_text(
        "[default]\n"
        "region = eu-west-1\n"
        "retry_mode = adaptive\n"
        "max_attempts = 7\n"
        "\n"
        "[profile batch]\n"
        "retry_mode = legacy\n"
        "max_attempts = 2\n"
        "\n"
        "[profile partial]\n"
        "max_attempts = 4\n",
        encoding="utf-8",
    )
    return path


def env(config: Path, **variables: str) -> dict[str, str]:
    return {"AWS_CONFIG_FILE": str(config), **variables}


# -- precedence


def test_defaults_apply_when_nothing_is_set(tmp_path: Path) -> None:
    """With no code value, no variable and no config file: standard mode, 3 attempts."""
    settings = settings_from_env(environ=env(tmp_path / "missing"))
    assert settings == EnvSettings("standard", 3, "default", "default")


def test_the_config_file_default_profile_is_read(config_file: Path) -> None:
    """Without AWS_PROFILE the [default] section gives the values."""
    settings = settings_from_env(environ=env(config_file))
    assert settings == EnvSettings("adaptive", 7, "config file", "config file")


def test_aws_profile_selects_a_profile_section(config_file: Path) -> None:
    """AWS_PROFILE=batch reads the [profile batch] section."""
    settings = settings_from_env(environ=env(config_file, AWS_PROFILE="batch"))
    assert (settings.mode, settings.max_attempts) == ("legacy", 2)


def test_a_key_missing_from_the_profile_falls_back_to_the_default_value(config_file: Path) -> None:
    """A profile without retry_mode gives the built-in default for it, not the [default] section's."""
    settings = settings_from_env(environ=env(config_file, AWS_PROFILE="partial"))
    assert settings == EnvSettings("standard", 4, "default", "config file")


def test_an_unknown_profile_gives_the_defaults(config_file: Path) -> None:
    """A profile with no section in the file leaves the defaults."""
    settings = settings_from_env(environ=env(config_file, AWS_PROFILE="nope"))
    assert settings == EnvSettings("standard", 3, "default", "default")


def test_a_bare_profile_section_name_is_accepted(tmp_path: Path) -> None:
    """A named profile may also be written [NAME], as in the credentials file."""
    path = tmp_path / "config"
    path.write_text("[ci]\nretry_mode = legacy\n", encoding="utf-8")
    assert settings_from_env(environ=env(path, AWS_PROFILE="ci")).mode == "legacy"


def test_a_profile_default_section_is_accepted(tmp_path: Path) -> None:
    """The default profile may also be written [profile default]."""
    path = tmp_path / "config"
    path.write_text("[profile default]\nmax_attempts = 9\n", encoding="utf-8")
    assert settings_from_env(environ=env(path)).max_attempts == 9


def test_the_environment_wins_over_the_config_file(config_file: Path) -> None:
    """AWS_RETRY_MODE and AWS_MAX_ATTEMPTS win over the file's values."""
    settings = settings_from_env(environ=env(config_file, AWS_RETRY_MODE="legacy", AWS_MAX_ATTEMPTS="10"))
    assert settings == EnvSettings("legacy", 10, "env", "env")


def test_each_setting_resolves_on_its_own(config_file: Path) -> None:
    """The environment may set one value and the file the other."""
    settings = settings_from_env(environ=env(config_file, AWS_MAX_ATTEMPTS="1"))
    assert settings == EnvSettings("adaptive", 1, "config file", "env")


def test_code_wins_over_everything(config_file: Path) -> None:
    """Values set in code win over the environment and the file."""
    environ = env(config_file, AWS_RETRY_MODE="legacy", AWS_MAX_ATTEMPTS="10")
    settings = settings_from_env(mode="standard", max_attempts=2, environ=environ)
    assert settings == EnvSettings("standard", 2, "code", "code")


def test_an_empty_variable_counts_as_unset(config_file: Path) -> None:
    """AWS_RETRY_MODE='' and AWS_MAX_ATTEMPTS='' fall through to the config file."""
    settings = settings_from_env(environ=env(config_file, AWS_RETRY_MODE="", AWS_MAX_ATTEMPTS=""))
    assert (settings.mode_source, settings.max_attempts_source) == ("config file", "config file")


def test_values_are_trimmed_and_modes_are_case_insensitive(tmp_path: Path) -> None:
    """' Adaptive ' and ' 5 ' are read as adaptive and 5."""
    settings = settings_from_env(
        environ=env(tmp_path / "missing", AWS_RETRY_MODE=" Adaptive ", AWS_MAX_ATTEMPTS=" 5 ")
    )
    assert (settings.mode, settings.max_attempts) == ("adaptive", 5)


def test_the_file_is_not_read_when_the_environment_has_both_values(tmp_path: Path) -> None:
    """A broken config file does no harm when the environment already decides both settings."""
    path = tmp_path / "config"
    path.write_text("this is [not an ini file\n", encoding="utf-8")
    settings = settings_from_env(environ=env(path, AWS_RETRY_MODE="standard", AWS_MAX_ATTEMPTS="4"))
    assert (settings.mode, settings.max_attempts) == ("standard", 4)


# -- bad values: a ConfigurationError naming the source and the allowed values


@pytest.mark.parametrize("value", ["0", "abc", "-1", "2.5", "3 attempts", "0x10"])
def test_bad_max_attempts_from_the_environment(tmp_path: Path, value: str) -> None:
    """AWS_MAX_ATTEMPTS must be an integer > 0; the error names the variable and the rule."""
    with pytest.raises(ConfigurationError, match=r"environment variable AWS_MAX_ATTEMPTS is invalid") as err:
        settings_from_env(environ=env(tmp_path / "missing", AWS_MAX_ATTEMPTS=value))
    assert "an integer > 0" in str(err.value)
    assert repr(value) in str(err.value)


@pytest.mark.parametrize("value", ["0", "abc", "-1"])
def test_bad_max_attempts_from_the_config_file(tmp_path: Path, value: str) -> None:
    """A bad max_attempts in the file names the file, the profile section and the key."""
    path = tmp_path / "config"
    path.write_text(f"[profile app]\nmax_attempts = {value}\n", encoding="utf-8")
    with pytest.raises(ConfigurationError) as err:
        settings_from_env(environ=env(path, AWS_PROFILE="app"))
    message = str(err.value)
    assert f"shared config file {path} [profile app] key max_attempts" in message
    assert "an integer > 0" in message


@pytest.mark.parametrize("value", [0, -1])
def test_bad_max_attempts_from_code(value: int) -> None:
    """A bad max_attempts passed in code names 'code' as the source."""
    with pytest.raises(ConfigurationError, match=r"max_attempts .* from code is invalid: it must be an int"):
        settings_from_env(max_attempts=value, environ={"AWS_CONFIG_FILE": "/nonexistent/config"})


def test_a_bool_is_not_a_max_attempts() -> None:
    """max_attempts=True is refused (a bool is not an attempt count)."""
    with pytest.raises(ConfigurationError, match="from code"):
        settings_from_env(max_attempts=True, environ={"AWS_CONFIG_FILE": "/nonexistent/config"})


def test_bad_mode_from_the_environment(tmp_path: Path) -> None:
    """AWS_RETRY_MODE=fast is refused; the message names the variable and lists the allowed modes."""
    with pytest.raises(ConfigurationError) as err:
        settings_from_env(environ=env(tmp_path / "missing", AWS_RETRY_MODE="fast"))
    message = str(err.value)
    assert "'fast' from environment variable AWS_RETRY_MODE is invalid" in message
    assert "'standard', 'adaptive', 'legacy'" in message


def test_bad_mode_from_the_config_file(tmp_path: Path) -> None:
    """retry_mode=fast in the file names the file and section."""
    path = tmp_path / "config"
    path.write_text("[default]\nretry_mode = fast\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match=r"shared config file .* \[default\] key retry_mode") as err:
        settings_from_env(environ=env(path))
    assert "'standard', 'adaptive', 'legacy'" in str(err.value)


def test_bad_mode_from_code() -> None:
    """mode='fast' passed in code names 'code' as the source."""
    with pytest.raises(ConfigurationError, match="'fast' from code is invalid: allowed values are"):
        settings_from_env(mode="fast", environ={"AWS_CONFIG_FILE": "/nonexistent/config"})


def test_an_unparsable_config_file_is_a_configuration_error(tmp_path: Path) -> None:
    """A config file that is not INI raises ConfigurationError naming the file."""
    path = tmp_path / "config"
    path.write_text("retry_mode = adaptive\n", encoding="utf-8")  # a key before any section
    with pytest.raises(ConfigurationError, match=f"shared config file {path} cannot be parsed"):
        settings_from_env(environ=env(path))


def test_configuration_errors_are_value_errors() -> None:
    """ConfigurationError is also a ValueError, so generic handlers catch it."""
    assert issubclass(ConfigurationError, ValueError)


# -- RetryPolicy.from_env


def test_from_env_builds_a_policy_from_the_resolved_settings(config_file: Path) -> None:
    """RetryPolicy.from_env() uses the resolved mode and max attempts, and other fields as given."""
    policy = RetryPolicy.from_env(environ=env(config_file, AWS_PROFILE="batch"), deadline=5)
    assert (policy.mode, policy.max_attempts, policy.deadline) == ("legacy", 2, 5.0)
    assert policy.quota_config is None


def test_from_env_code_values_win(config_file: Path) -> None:
    """mode and max_attempts passed to from_env() win over the environment."""
    environ = env(config_file, AWS_RETRY_MODE="legacy", AWS_MAX_ATTEMPTS="9")
    policy = RetryPolicy.from_env(mode="adaptive", max_attempts=4, environ=environ)
    assert (policy.mode, policy.max_attempts) == ("adaptive", 4)
    assert policy.limiter_config is not None


def test_from_env_raises_configuration_errors(tmp_path: Path) -> None:
    """from_env() with AWS_MAX_ATTEMPTS=0 raises the same ConfigurationError."""
    with pytest.raises(ConfigurationError, match="AWS_MAX_ATTEMPTS"):
        RetryPolicy.from_env(environ=env(tmp_path / "missing", AWS_MAX_ATTEMPTS="0"))


def test_from_env_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without environ=, the process environment is read."""
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "missing"))
    monkeypatch.setenv("AWS_RETRY_MODE", "legacy")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "6")
    policy = RetryPolicy.from_env()
    assert (policy.mode, policy.max_attempts) == ("legacy", 6)


def test_a_tilde_in_aws_config_file_means_the_home_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """AWS_CONFIG_FILE=~/name is expanded like the SDKs do."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "aws-config").write_text("[default]\nmax_attempts = 8\n", encoding="utf-8")
    assert settings_from_env(environ={"AWS_CONFIG_FILE": "~/aws-config"}).max_attempts == 8


def test_without_aws_config_file_the_home_config_is_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The default file is ~/.aws/config (HOME pointed at a temporary directory here)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "config").write_text("[default]\nretry_mode = legacy\n", encoding="utf-8")
    settings = settings_from_env(environ={})
    assert (settings.mode, settings.mode_source) == ("legacy", "config file")


# -- the AWS presets: environment variables named AWS_* mean AWS behaviour


def test_legacy_mode_defaults_to_botocores_five_attempts(tmp_path: Path) -> None:
    """AWS_RETRY_MODE=legacy with no max set anywhere gives botocore's legacy default of 5 attempts."""
    settings = settings_from_env(environ=env(tmp_path / "missing", AWS_RETRY_MODE="legacy"))
    assert settings == EnvSettings("legacy", 5, "env", "default")
    policy = RetryPolicy.from_env(environ=env(tmp_path / "missing", AWS_RETRY_MODE="legacy"))
    assert (policy.mode, policy.max_attempts, policy.quota_config) == ("legacy", 5, None)
    assert policy == RetryPolicy.aws_legacy()


def test_legacy_mode_from_the_config_file_also_defaults_to_five(tmp_path: Path) -> None:
    """retry_mode = legacy in the file without max_attempts gives 5 attempts too."""
    path = tmp_path / "config"
    path.write_text("[default]\nretry_mode = legacy\n", encoding="utf-8")
    assert RetryPolicy.from_env(environ=env(path)).max_attempts == 5


@pytest.mark.parametrize(
    ("variables", "expected"),
    [({"AWS_MAX_ATTEMPTS": "2"}, 2), ({}, 3)],
    ids=["AWS_MAX_ATTEMPTS", "code"],
)
def test_a_max_set_anywhere_wins_over_the_legacy_default(
    tmp_path: Path, variables: dict[str, str], expected: int
) -> None:
    """AWS_MAX_ATTEMPTS, or max_attempts in code, overrides legacy's 5."""
    environ = env(tmp_path / "missing", AWS_RETRY_MODE="legacy", **variables)
    code = {} if variables else {"max_attempts": 3}
    assert RetryPolicy.from_env(environ=environ, **code).max_attempts == expected


def test_standard_mode_from_the_environment_is_the_aws_standard_preset(tmp_path: Path) -> None:
    """AWS_RETRY_MODE=standard gives exactly RetryPolicy.aws_standard() (3 attempts, the 2020 quota)."""
    policy = RetryPolicy.from_env(environ=env(tmp_path / "missing", AWS_RETRY_MODE="standard"))
    assert policy == RetryPolicy.aws_standard()


def test_adaptive_mode_from_the_environment_uses_the_sdks_limiter_profile(tmp_path: Path) -> None:
    """AWS_RETRY_MODE=adaptive gives the SDK-exact "aws" limiter profile, as aws_adaptive() does."""
    policy = RetryPolicy.from_env(environ=env(tmp_path / "missing", AWS_RETRY_MODE="adaptive"))
    assert policy.limiter_config is not None
    assert policy.limiter_config.profile == "aws"
    assert policy == RetryPolicy.aws_adaptive()


def test_adaptive_mode_from_the_config_file_uses_the_sdks_limiter_profile(config_file: Path) -> None:
    """retry_mode = adaptive in the shared config file also means the "aws" limiter profile."""
    policy = RetryPolicy.from_env(environ=env(config_file))
    assert (policy.mode, policy.max_attempts) == ("adaptive", 7)
    assert policy.limiter_config is not None
    assert policy.limiter_config.profile == "aws"


def test_the_projects_limiter_profile_is_chosen_in_code(tmp_path: Path) -> None:
    """limiter=AdaptiveLimiterConfig() passed to from_env() gives asyncretry's own profile."""
    environ = env(tmp_path / "missing", AWS_RETRY_MODE="adaptive")
    policy = RetryPolicy.from_env(environ=environ, limiter=AdaptiveLimiterConfig())
    assert policy.limiter_config is not None
    assert policy.limiter_config.profile == "asyncretry"


def test_from_env_passes_the_profile_on(tmp_path: Path) -> None:
    """profile="2026" reaches the preset: retry cost 14."""
    policy = RetryPolicy.from_env(environ=env(tmp_path / "missing"), profile="2026")
    assert policy.quota_config is not None
    assert policy.quota_config.retry_cost == 14


def test_aws_default_profile_wins_over_aws_profile(config_file: Path) -> None:
    """botocore reads AWS_DEFAULT_PROFILE before AWS_PROFILE; so do we."""
    environ = env(config_file, AWS_DEFAULT_PROFILE="batch", AWS_PROFILE="partial")
    assert settings_from_env(environ=environ).mode == "legacy"
    assert settings_from_env(environ=env(config_file, AWS_PROFILE="partial")).max_attempts == 4
