"""Option parsing and validation: one clear message naming the thing to fix."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import fake_key, with_userinfo
from verifier.checks.registry import repeats_for
from verifier.config import (
    check_repeats,
    env_var_name,
    family_list,
    non_negative_int,
    normalize_endpoint,
    positive_int,
    positive_seconds,
    prepare_out_dir,
    repeats,
)
from verifier.endpoint.redaction import Redactor, redact_url
from verifier.errors import ConfigError


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000/v1"),
        ("http://127.0.0.1:8000/", "http://127.0.0.1:8000/v1"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000/v1"),
        ("https://api.example.com/openai/v1beta/", "https://api.example.com/openai/v1beta"),
        (" http://[::1]:9000 ", "http://[::1]:9000/v1"),
    ],
)
def test_endpoint_is_normalized(given: str, expected: str) -> None:
    assert normalize_endpoint(given) == expected


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("127.0.0.1:8000", "must be an http:// or https:// URL"),
        ("ftp://host/v1", "must be an http:// or https:// URL"),
        ("http:///v1", "has no host name"),
        ("http://host:notaport/v1", "has an invalid port"),
    ],
)
def test_bad_endpoint_names_the_problem(given: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        normalize_endpoint(given)


# Values the tests hide; shaped like credentials, plainly not real ones.
SECRET = fake_key("redact-me")
PASSWORD = "not-a-password-52"


def test_endpoint_error_never_echoes_a_password() -> None:
    with pytest.raises(argparse.ArgumentTypeError) as info:
        normalize_endpoint(with_userinfo("http://host:bad/v1", "user", PASSWORD))
    assert PASSWORD not in str(info.value)


def test_api_key_env_rejects_a_key() -> None:
    assert env_var_name("MY_KEY") == "MY_KEY"
    with pytest.raises(argparse.ArgumentTypeError, match="looks like a key"):
        env_var_name(fake_key("option"))


def test_numbers() -> None:
    assert positive_int("3") == 3
    assert non_negative_int("0") == 0
    assert positive_seconds("0.5") == 0.5
    for parse, bad in (
        (positive_int, "0"),
        (positive_int, "x"),
        (non_negative_int, "-1"),
        (positive_seconds, "0"),
        (positive_seconds, "inf"),
        (positive_seconds, "nan"),
    ):
        with pytest.raises(argparse.ArgumentTypeError, match="given"):
            parse(bad)


@pytest.mark.parametrize(
    ("parse", "bad", "message"),
    [
        (positive_int, "0", "must be a whole number >= 1, given: '0'"),
        (positive_int, "1.5", "must be a whole number >= 1, given: '1.5'"),
        (non_negative_int, "-1", "must be a whole number >= 0, given: '-1'"),
        (non_negative_int, "", "must be a whole number >= 0, given: ''"),
        (positive_seconds, "-2", "must be a number of seconds > 0, given: '-2'"),
        (positive_seconds, "1e400", "must be a number of seconds > 0, given: '1e400'"),
        (positive_seconds, "soon", "must be a number of seconds > 0, given: 'soon'"),
    ],
)
def test_number_messages_are_the_same_for_no_number_and_out_of_range(
    parse: Callable[[str], object], bad: str, message: str
) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as info:
        parse(bad)
    assert str(info.value) == message


def test_repeats_for_every_family_or_by_family() -> None:
    assert repeats("3") == 3
    assert repeats("tool_calling=3, structured_output=2") == {
        "tool_calling": 3,
        "structured_output": 2,
    }
    assert repeats_for(3, "structured_output") == 3
    assert repeats_for(None, "tool_calling") == 5
    by_family = repeats("tool_calling=3")
    assert repeats_for(by_family, "tool_calling") == 3
    assert repeats_for(by_family, "structured_output") == 1, "the others keep their default"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("0", "must be a whole number >= 1, given: '0'"),
        ("tool_calling", "must be a whole number >= 1, given: 'tool_calling'"),
        ("tool_calling=0", "tool_calling: must be a whole number >= 1, given: '0'"),
        ("tool_calling=", "must be K or FAMILY=K[,FAMILY=K...], given: 'tool_calling='"),
        ("=3", "must be K or FAMILY=K[,FAMILY=K...], given: '=3'"),
        ("tool_calling=3,", "must be K or FAMILY=K[,FAMILY=K...], given: 'tool_calling=3,'"),
        (
            "tool_calling=3,tool_calling=2",
            "tool_calling is given twice, in 'tool_calling=3,tool_calling=2'",
        ),
    ],
)
def test_repeats_messages(bad: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as info:
        repeats(bad)
    assert str(info.value) == message


def test_repeats_by_family_names_known_families() -> None:
    known = ("tool_calling", "structured_output")
    check_repeats({"tool_calling": 3}, known)
    check_repeats(3, known)
    with pytest.raises(ConfigError) as info:
        check_repeats({"tool_call": 3}, known)
    assert str(info.value) == (
        "--repeats: unknown family 'tool_call' (did you mean 'tool_calling'?); "
        "choose from: tool_calling, structured_output"
    )


def test_family_list_keeps_canonical_order_and_suggests() -> None:
    known = ("tool_calling", "structured_output")
    assert family_list("structured_output,tool_calling", known) == known
    with pytest.raises(ConfigError, match="did you mean 'structured_output'"):
        family_list("structured_outptu", known)
    with pytest.raises(ConfigError, match="has no checks in this version"):
        family_list("vision", known)
    with pytest.raises(ConfigError, match="empty"):
        family_list(" , ", known)


def test_out_dir_must_be_writable(tmp_path: Path) -> None:
    assert prepare_out_dir(tmp_path / "a" / "b").is_dir()
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="--out: cannot write to"):
        prepare_out_dir(blocker / "sub")


def test_redact_url_removes_userinfo_and_secret_params() -> None:
    url = with_userinfo("https://api.example.com:8443/v1", "bob", PASSWORD)
    redacted = redact_url(f"{url}?api_key={SECRET}&region=eu")
    assert redacted == "https://api.example.com:8443/v1?api_key=[REDACTED]&region=eu"


def test_redactor_replaces_secrets_everywhere() -> None:
    redactor = Redactor([SECRET, None, "ab"])
    data = {SECRET: [f"x {SECRET} y", 3], "ab": "ab"}
    assert redactor.data(data) == {"[REDACTED]": ["x [REDACTED] y", 3], "ab": "ab"}
    assert redactor.headers([("Authorization", "Bearer z"), ("Server", SECRET)]) == {
        "server": "[REDACTED]"
    }
