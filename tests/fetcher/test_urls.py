"""URL shape checks and client-facing failure texts (core/urls.py, core/failures.py)."""

from __future__ import annotations

import pytest
from ezat_fetcher.core import failures
from ezat_fetcher.core.urls import CheckedUrl, check_url, redirect_url

ACCEPTED = [
    (
        "https://example.com/a.png",
        CheckedUrl("https://example.com/a.png", "https", "example.com", 443),
    ),
    ("http://example.com/a.png", CheckedUrl("http://example.com/a.png", "http", "example.com", 80)),
    (
        "HTTPS://EXAMPLE.com:8443/x",
        CheckedUrl("HTTPS://EXAMPLE.com:8443/x", "https", "example.com", 8443),
    ),
    ("http://93.184.216.34/x", CheckedUrl("http://93.184.216.34/x", "http", "93.184.216.34", 80)),
    (
        "http://[2606:4700::1]:81/",
        CheckedUrl("http://[2606:4700::1]:81/", "http", "2606:4700::1", 81),
    ),
    ("http://[::FFFF:7f00:1]/", CheckedUrl("http://[::FFFF:7f00:1]/", "http", "::ffff:7f00:1", 80)),
    ("http://bücher.de/x", CheckedUrl("http://bücher.de/x", "http", "xn--bcher-kva.de", 80)),
    ("http://example.com./x", CheckedUrl("http://example.com./x", "http", "example.com.", 80)),
    (
        "http://example.com/a b.png",
        CheckedUrl("http://example.com/a b.png", "http", "example.com", 80),
    ),
]


@pytest.mark.parametrize(("url", "expected"), ACCEPTED, ids=[u for u, _ in ACCEPTED])
def test_accepted_urls(url: str, expected: CheckedUrl) -> None:
    assert check_url(url) == expected


NOT_HTTP = "could not download the image (only http and https URLs are accepted)"
NOT_VALID = "could not download the image (the URL is not valid)"
BAD_HOST = "could not download the image (the URL's host is not valid)"
BAD_PORT = "could not download the image (the URL's port is not valid)"
NO_HOST = "could not download the image (the URL has no host)"
USERINFO = "could not download the image (URLs with a user name or password are not accepted)"

REFUSED = [
    ("ftp://example.com/a.png", NOT_HTTP),
    ("file:///etc/passwd", NOT_HTTP),
    ("gopher://127.0.0.1:6379/_INFO", NOT_HTTP),
    ("data:image/png;base64,iVBORw0KGgo=", NOT_HTTP),
    ("//example.com/a.png", NOT_HTTP),
    ("example.com/a.png", NOT_HTTP),
    ("", NOT_HTTP),
    ("http://user:pw@example.com/", USERINFO),
    ("http://user@example.com/", USERINFO),
    ("http://example.com@127.0.0.1/", USERINFO),
    ("http:///a.png", NO_HOST),
    ("http://:80/a.png", NO_HOST),
    ("http://example.com:0/", BAD_PORT),
    ("http://example.com:65536/", BAD_PORT),
    ("http://example.com:-1/", BAD_PORT),
    ("http://example.com:http/", BAD_PORT),
    ("http://2130706433/", BAD_HOST),  # legacy numeric forms of 127.0.0.1
    ("http://127.1/", BAD_HOST),
    ("http://0127.0.0.1/", BAD_HOST),
    ("http://exa mple.com/", BAD_HOST),
    ("http://%31%32%37.0.0.1/", BAD_HOST),
    ("http://[fe80::1%25eth0]/", BAD_HOST),
    ("http://[::1/", NOT_VALID),
    ("http://example.com\\@127.0.0.1/", NOT_VALID),
    ("http://example.com/\r\nX-Injected: 1", NOT_VALID),
    ("http://example.com/\x00", NOT_VALID),
    ("http://example.com/" + "a" * 9000, "could not download the image (the URL is too long)"),
]


@pytest.mark.parametrize(("url", "message"), REFUSED, ids=[u[:40] for u, _ in REFUSED])
def test_refused_urls_say_why(url: str, message: str) -> None:
    with pytest.raises(failures.FetchFailure) as caught:
        check_url(url)
    assert caught.value.message == message


def test_messages_name_the_file_for_pdf_downloads() -> None:
    with pytest.raises(failures.FetchFailure, match=r"^could not download the file \(only http"):
        check_url("ftp://example.com/a.pdf", kind="pdf")


@pytest.mark.parametrize(
    ("current", "location", "expected"),
    [
        ("http://a.com/x/y.png", "/z.png", "http://a.com/z.png"),
        ("http://a.com/x/y.png", "z.png", "http://a.com/x/z.png"),
        ("http://a.com/x", "https://b.org/c", "https://b.org/c"),
        ("https://a.com/x", "//b.org/c", "https://b.org/c"),
        ("http://a.com/x", " http://169.254.169.254/ ", "http://169.254.169.254/"),
    ],
)
def test_redirect_url(current: str, location: str, expected: str) -> None:
    assert redirect_url(current, location) == expected


@pytest.mark.parametrize(
    ("failure", "message"),
    [
        (failures.http_status(404), "could not download the image (HTTP 404)"),
        (failures.not_public(), "could not download the image (the host is not a public address)"),
        (failures.timed_out(15.0), "could not download the image (timed out after 15 s)"),
        (failures.timed_out(0.5), "could not download the image (timed out after 0.5 s)"),
        (failures.too_large(10 * 1024 * 1024), "could not download the image (larger than 10 MB)"),
        (failures.too_large(1536), "could not download the image (larger than 1.5 KB)"),
        (failures.too_large(1000), "could not download the image (larger than 1000 bytes)"),
        (failures.too_many_redirects(), "could not download the image (too many redirects)"),
        (failures.wrong_type(), "the file is not a JPEG, PNG, GIF or WebP image"),
        (failures.wrong_type("pdf"), "the file is not a PDF document"),
        (failures.not_http(), NOT_HTTP),
    ],
)
def test_failure_messages(failure: failures.FetchFailure, message: str) -> None:
    assert failure.message == message
