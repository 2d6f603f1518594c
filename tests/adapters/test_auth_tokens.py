"""Dev/CI signed connect tokens (auth: dev-signed-token): round trip, expiry, tampering, malformed input."""

from __future__ import annotations

import base64
import json

import pytest

from shared.adapters.auth_tokens import (
    ExpiredTokenError,
    InvalidSignatureError,
    MalformedTokenError,
    TokenError,
    issue_token,
    main,
    verify_token,
)

SECRET = "k" * 48
NOW = 1_700_000_000


def _payload(token: str) -> dict[str, object]:
    part = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def test_round_trip() -> None:
    token = issue_token(SECRET, "alice", 3600, NOW)
    assert token.startswith("v1.")
    assert verify_token(SECRET, token, NOW) == "alice"
    assert verify_token(SECRET, token, NOW + 3599) == "alice"
    assert _payload(token) == {"sub": "alice", "iat": NOW, "exp": NOW + 3600}


def test_bytes_secret_and_unicode_principal() -> None:
    token = issue_token(SECRET.encode(), "zoë@example.com", 60, NOW)
    assert verify_token(SECRET, token, NOW) == "zoë@example.com"


def test_expired_at_exp() -> None:
    token = issue_token(SECRET, "alice", 60, NOW)
    with pytest.raises(ExpiredTokenError):
        verify_token(SECRET, token, NOW + 60)


def test_wrong_secret() -> None:
    token = issue_token(SECRET, "alice", 60, NOW)
    with pytest.raises(InvalidSignatureError):
        verify_token("x" * 48, token, NOW)


def test_tampered_payload_is_rejected_before_it_is_read() -> None:
    token = issue_token(SECRET, "alice", 60, NOW)
    version, _, signature = token.split(".")
    forged = base64.urlsafe_b64encode(json.dumps({"sub": "mallory", "exp": NOW + 10**6}).encode()).rstrip(b"=")
    with pytest.raises(InvalidSignatureError):
        verify_token(SECRET, f"{version}.{forged.decode()}.{signature}", NOW)


def test_tampered_signature() -> None:
    token = issue_token(SECRET, "alice", 60, NOW)
    flipped = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
    with pytest.raises(InvalidSignatureError):
        verify_token(SECRET, flipped, NOW)


@pytest.mark.parametrize(
    "token",
    ["", "v1", "v1.abc", "v2.abc.def", "v1..sig", "v1.abc.d!f", "a.b.c.d", "v1." + "a" * 3000 + ".b", None, 42],
)
def test_malformed(token: object) -> None:
    with pytest.raises(MalformedTokenError):
        verify_token(SECRET, token, NOW)  # type: ignore[arg-type]


def test_signed_but_invalid_payload_is_malformed() -> None:
    import hashlib
    import hmac

    def sign(payload: bytes) -> str:
        body = base64.urlsafe_b64encode(payload).rstrip(b"=").decode()
        mac = hmac.new(SECRET.encode(), f"v1.{body}".encode(), hashlib.sha256).digest()
        return f"v1.{body}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"

    for payload in (b"[]", b"not json", b'{"sub": "a"}', b'{"sub": "", "exp": 1}', b'{"sub": "a", "exp": true}'):
        with pytest.raises(MalformedTokenError):
            verify_token(SECRET, sign(payload), 0)


def test_errors_share_a_base_class() -> None:
    assert issubclass(ExpiredTokenError, TokenError)
    assert issubclass(InvalidSignatureError, TokenError)
    assert issubclass(MalformedTokenError, TokenError)


@pytest.mark.parametrize(
    ("secret", "principal", "ttl"),
    [("short", "alice", 60), (SECRET, "", 60), (SECRET, "a\nb", 60), (SECRET, "x" * 129, 60), (SECRET, "alice", 0)],
)
def test_issue_rejects_bad_input(secret: str, principal: str, ttl: int) -> None:
    with pytest.raises(ValueError):
        issue_token(secret, principal, ttl, NOW)


def test_verify_rejects_a_short_secret() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        verify_token("short", issue_token(SECRET, "alice", 60, NOW), NOW)


def test_cli_issues_a_token_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CONDUCTOR_AUTH_SECRET", SECRET)
    assert main(["--principal", "bob", "--ttl", "120"]) == 0
    token = capsys.readouterr().out.strip()
    assert _payload(token)["sub"] == "bob"
    assert verify_token(SECRET, token, _payload(token)["iat"]) == "bob"  # type: ignore[arg-type]


def _signed(payload: bytes) -> str:
    import hashlib
    import hmac

    body = base64.urlsafe_b64encode(payload).rstrip(b"=").decode()
    mac = hmac.new(SECRET.encode(), f"v1.{body}".encode(), hashlib.sha256).digest()
    return f"v1.{body}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"


FUTURE = NOW + 3600


@pytest.mark.parametrize(
    "claims",
    [
        f'{{"sub": "a", "exp": "{FUTURE}"}}',
        f'{{"sub": "a", "exp": {FUTURE}.5}}',
        '{"sub": "a", "exp": 1e999}',
        '{"sub": "a", "exp": Infinity}',
        '{"sub": "a", "exp": NaN}',
        f'{{"sub": "a", "exp": {FUTURE}, "iat": "{NOW}"}}',
        f'{{"sub": "a", "exp": {FUTURE}, "iat": true}}',
        f'{{"sub": "a", "exp": {FUTURE}, "nbf": null}}',
        f'{{"sub": "a", "exp": {FUTURE}, "nbf": NaN}}',
        f'{{"sub": "a", "exp": {FUTURE}, "auth_time": [{NOW}]}}',
        f'{{"sub": "a", "exp": {FUTURE}, "auth_time": -Infinity}}',
        '{"sub": "a", "exp": ' + "9" * 400 + "}",
        f'{{"sub": "a", "exp": {FUTURE}, "x": ' + "[" * 600 + "]" * 600 + "}",
    ],
)
def test_time_claims_that_are_not_finite_numbers_are_malformed(claims: str) -> None:
    with pytest.raises(MalformedTokenError):
        verify_token(SECRET, _signed(claims.encode()), NOW)


def test_time_claims_that_are_numbers_are_accepted() -> None:
    claims = {"sub": "a", "exp": FUTURE, "iat": NOW, "nbf": NOW - 0.5, "auth_time": NOW - 60}
    assert verify_token(SECRET, _signed(json.dumps(claims).encode()), NOW) == "a"
