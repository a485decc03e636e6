"""The HTTP adapter against a real local server (download.py)."""

from __future__ import annotations

import time
from urllib.parse import quote

import pytest
from ezat_fetcher import download
from ezat_fetcher.core.addresses import parse_networks
from ezat_fetcher.core.failures import FetchFailure
from ezat_fetcher.download import Fetcher, PinnedResolver

from .conftest import PNG, ImageServer

LOOPBACK = parse_networks(["127.0.0.0/8"])


async def refusal(fetcher: Fetcher, url: str, **kwargs: object) -> str:
    with pytest.raises(FetchFailure) as caught:
        await fetcher.fetch(url, **kwargs)  # type: ignore[arg-type]
    return caught.value.message


async def test_png_is_downloaded_and_typed_by_its_bytes(image_server: ImageServer) -> None:
    got = await Fetcher(LOOPBACK).fetch(image_server.url("/png"))
    assert got.media_type == "image/png"  # the server said text/plain
    assert got.data == PNG


async def test_http_error_status_is_reported(image_server: ImageServer) -> None:
    fetcher = Fetcher(LOOPBACK)
    message = await refusal(fetcher, image_server.url("/status/404"))
    assert message == "could not download the image (HTTP 404)"
    message = await refusal(fetcher, image_server.url("/status/503"))
    assert message == "could not download the image (HTTP 503)"


async def test_three_redirects_are_followed(image_server: ImageServer) -> None:
    got = await Fetcher(LOOPBACK).fetch(image_server.url("/chain/3"))
    assert got.data == PNG


async def test_a_fourth_redirect_is_refused(image_server: ImageServer) -> None:
    message = await refusal(Fetcher(LOOPBACK), image_server.url("/chain/4"))
    assert message == "could not download the image (too many redirects)"


async def test_redirect_to_an_address_that_is_not_allowed_is_refused(
    image_server: ImageServer,
) -> None:
    only_one = Fetcher(parse_networks(["127.0.0.1/32"]))
    target = quote(image_server.url("/png", host="127.0.0.2"), safe="")
    message = await refusal(only_one, image_server.url(f"/to?url={target}"))
    assert message == "could not download the image (the host is not a public address)"


@pytest.mark.parametrize(
    "location",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
        "http://10.0.0.1/",
    ],
)
async def test_redirect_to_metadata_or_private_is_refused(
    image_server: ImageServer, location: str
) -> None:
    message = await refusal(Fetcher(LOOPBACK), image_server.url(f"/to?url={quote(location)}"))
    assert message == "could not download the image (the host is not a public address)"


async def test_redirect_to_another_scheme_is_refused(image_server: ImageServer) -> None:
    url = image_server.url(f"/to?url={quote('file:///etc/passwd')}")
    message = await refusal(Fetcher(LOOPBACK), url)
    assert message == "could not download the image (only http and https URLs are accepted)"


async def test_body_over_the_limit_is_refused_from_content_length(
    image_server: ImageServer,
) -> None:
    message = await refusal(Fetcher(LOOPBACK), image_server.url("/big.png"), max_bytes=1000)
    assert message == "could not download the image (larger than 1000 bytes)"


async def test_streamed_body_over_the_limit_is_refused(image_server: ImageServer) -> None:
    fetcher = Fetcher(LOOPBACK)
    message = await refusal(fetcher, image_server.url("/streamed?chunks=10"), max_bytes=4096)
    assert message == "could not download the image (larger than 4 KB)"
    got = await fetcher.fetch(image_server.url("/streamed?chunks=3"), max_bytes=4096)
    assert len(got.data) == len(PNG) + 3 * 1024


async def test_request_cannot_raise_the_service_limit(
    image_server: ImageServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(download, "MAX_BYTES", 1000)  # stands in for 10 MB
    message = await refusal(Fetcher(LOOPBACK), image_server.url("/big.png"), max_bytes=1 << 40)
    assert message == "could not download the image (larger than 1000 bytes)"


async def test_wrong_magic_bytes_are_refused(image_server: ImageServer) -> None:
    message = await refusal(Fetcher(LOOPBACK), image_server.url("/html"))
    assert message == "the file is not a JPEG, PNG, GIF or WebP image"


async def test_png_is_not_accepted_as_pdf(image_server: ImageServer) -> None:
    message = await refusal(Fetcher(LOOPBACK), image_server.url("/png"), kind="pdf")
    assert message == "the file is not a PDF document"


async def test_slow_server_times_out(image_server: ImageServer) -> None:
    started = time.monotonic()
    message = await refusal(Fetcher(LOOPBACK, timeout=0.5), image_server.url("/slow"))
    assert message == "could not download the image (timed out after 0.5 s)"
    assert time.monotonic() - started < 2


async def test_loopback_name_is_refused_without_the_allow_list(image_server: ImageServer) -> None:
    message = await refusal(Fetcher(), image_server.url("/png", host="localhost"))
    assert message == "could not download the image (the host is not a public address)"
    message = await refusal(Fetcher(), image_server.url("/png"))
    assert message == "could not download the image (the host is not a public address)"


async def test_connection_goes_to_the_checked_address_with_the_hostname_kept(
    image_server: ImageServer,
) -> None:
    # "images.test" exists only in this resolver: the download can only work if aiohttp connects
    # to the address we checked instead of resolving the name again, and sends the name as Host.
    async def resolve(host: str, port: int) -> list[str]:
        assert host == "images.test"
        return ["127.0.0.1"]

    host = f"images.test:{image_server.port}"
    url = image_server.url(f"/host.png?host={host}", host="images.test")
    got = await Fetcher(LOOPBACK, resolve=resolve).fetch(url)
    assert got.data == PNG


async def test_every_resolved_address_must_be_public(image_server: ImageServer) -> None:
    async def resolve(host: str, port: int) -> list[str]:
        return ["127.0.0.1", "169.254.169.254"]

    url = image_server.url("/png", host="images.test")
    message = await refusal(Fetcher(LOOPBACK, resolve=resolve), url)
    assert message == "could not download the image (the host is not a public address)"


async def test_unresolvable_host_is_reported() -> None:
    async def resolve(host: str, port: int) -> list[str]:
        raise OSError("no such host")

    message = await refusal(Fetcher(resolve=resolve), "http://nowhere.invalid/a.png")
    assert message == "could not download the image (the host name could not be resolved)"


async def test_closed_port_is_reported(image_server: ImageServer) -> None:
    # Port 1 on loopback: nothing listens there.
    message = await refusal(Fetcher(LOOPBACK), "http://127.0.0.1:1/a.png")
    assert message == "could not download the image (could not connect to the host)"


async def test_pinned_resolver_refuses_unchecked_names() -> None:
    resolver = PinnedResolver()
    with pytest.raises(OSError):
        await resolver.resolve("example.com", 443)


async def test_unknown_kind_is_refused() -> None:
    message = await refusal(Fetcher(LOOPBACK), "http://127.0.0.1/a", kind="video")
    assert message == "downloads of kind `video` are not supported"
