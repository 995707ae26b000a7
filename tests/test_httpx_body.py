"""Error bodies from any server: bounded decoding (gzip, deflate, stacked), text in any charset, JSON depth."""

from __future__ import annotations

import gzip
import json
import tracemalloc
import zlib
from collections.abc import Callable
from functools import cache

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from asyncretry._http._body import MAX_JSON_DEPTH, body_text, code_in_body, decode_bounded, json_depth

DOCUMENT = b'{"__type": "ThrottlingException", "message": "slow down"}'
BOMB_SIZE = 60_000_000  # decoded bytes: a 61 KB gzip body that decodes to 60 MB


def raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


@cache
def gzip_bomb(size: int = BOMB_SIZE) -> bytes:
    """gzip of ``size`` zero bytes, made a megabyte at a time (the test itself stays small too)."""
    compressor = zlib.compressobj(9, wbits=zlib.MAX_WBITS | 16)
    chunk = bytes(1 << 20)
    parts = [compressor.compress(chunk) for _ in range(size >> 20)]
    return b"".join([*parts, compressor.compress(bytes(size & ((1 << 20) - 1))), compressor.flush()])


def encoded(encoding: str) -> dict[str, str]:
    return {"content-encoding": encoding}


# ------------------------------------------------------------------------------------------ decoding
@pytest.mark.parametrize(
    ("encoding", "raw"),
    [
        ("gzip", gzip.compress(DOCUMENT, mtime=0)),
        ("x-gzip", gzip.compress(DOCUMENT, mtime=0)),
        ("GZip", gzip.compress(DOCUMENT, mtime=0)),
        ("deflate", zlib.compress(DOCUMENT)),
        ("deflate", raw_deflate(DOCUMENT)),  # what some servers call deflate; httpx reads it too
        ("identity", DOCUMENT),
        ("", DOCUMENT),
        ("gzip, deflate", zlib.compress(gzip.compress(DOCUMENT, mtime=0))),  # applied in order, undone in reverse
        ("deflate , identity,gzip", gzip.compress(zlib.compress(DOCUMENT), mtime=0)),
    ],
)
def test_supported_encodings_are_decoded(encoding: str, raw: bytes) -> None:
    """gzip, x-gzip, deflate (zlib-wrapped or raw), identity and stacks of them give the original body."""
    assert decode_bounded(encoded(encoding), raw, 1024) == DOCUMENT


def test_repeated_content_encoding_headers_stack() -> None:
    """Two Content-Encoding headers are one stack, as httpx.Headers joins them."""
    headers = httpx.Headers([(b"Content-Encoding", b"gzip"), (b"Content-Encoding", b"deflate")])
    assert decode_bounded(headers, zlib.compress(gzip.compress(DOCUMENT, mtime=0)), 1024) == DOCUMENT


def test_the_limit_is_inclusive() -> None:
    """A body of exactly ``limit`` decoded bytes is returned; one byte more is None."""
    raw = gzip.compress(DOCUMENT, mtime=0)
    assert decode_bounded(encoded("gzip"), raw, len(DOCUMENT)) == DOCUMENT
    assert decode_bounded(encoded("gzip"), raw, len(DOCUMENT) - 1) is None
    assert decode_bounded({}, DOCUMENT, len(DOCUMENT) - 1) is None
    assert decode_bounded({}, b"", 0) == b""


@pytest.mark.parametrize("encoding", ["br", "zstd", "compress", "gzip, br", "gzip;q=1", "\u00e9"])
def test_encodings_not_decoded_here_give_none(encoding: str) -> None:
    """br and zstd (no decoder in this environment), compress and unknown tokens give None, not raw bytes."""
    assert decode_bounded(encoded(encoding), gzip.compress(DOCUMENT, mtime=0), 1 << 20) is None


@pytest.mark.parametrize(
    ("encoding", "raw"),
    [
        ("gzip", b"not gzip at all"),
        ("gzip", gzip.compress(DOCUMENT, mtime=0)[:10] + b"\xff" * 20),
        ("deflate", b"\xff\xfe\xfd"),
        ("gzip, gzip", gzip.compress(DOCUMENT, mtime=0)),  # only one layer is really there
    ],
)
def test_corrupt_data_gives_none(encoding: str, raw: bytes) -> None:
    """Bytes that are not valid for their encoding give None."""
    assert decode_bounded(encoded(encoding), raw, 1 << 20) is None


def test_truncated_data_gives_what_it_holds_as_httpx_does() -> None:
    """A gzip body cut short decodes to its start, exactly what httpx hands the caller."""
    raw = gzip.compress(DOCUMENT * 20, mtime=0)[:-30]
    by_httpx = httpx.Response(400, headers=encoded("gzip"), content=raw).content
    assert decode_bounded(encoded("gzip"), raw, 1 << 20) == by_httpx
    assert DOCUMENT.startswith(by_httpx[: len(DOCUMENT)])


def test_a_gzip_bomb_is_refused_in_bounded_memory() -> None:
    """A decompression bomb (about 60 KB of gzip, 60 MB decoded) gives None with under 1 MB of memory."""
    bomb = gzip_bomb()
    assert len(bomb) < 100_000
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        assert decode_bounded(encoded("gzip"), bomb, 65_536) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_a_stacked_bomb_is_refused_in_bounded_memory() -> None:
    """A bomb inside a bomb (gzip of gzip) is cut at each layer (at most twice the limit in between)."""
    bomb = gzip.compress(gzip_bomb(), 9, mtime=0)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        assert decode_bounded(encoded("gzip, gzip"), bomb, 65_536) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


@pytest.mark.parametrize(
    ("limit", "error"),
    [(-1, ValueError), (10**400, ValueError), (-(10**5000), ValueError), (2**60, ValueError), (1.5, TypeError),
     (True, TypeError), ("10", TypeError)],
    ids=["-1", "10**400", "-10**5000", "2**60", "1.5", "True", "'10'"],
)
def test_a_bad_limit_is_refused(limit: object, error: type[Exception]) -> None:
    """The limit must be an integer >= 0; the message names it."""
    with pytest.raises(error, match="limit"):
        decode_bounded({}, b"", limit)  # type: ignore[arg-type]


_ENCODINGS = st.lists(st.sampled_from(["gzip", "deflate", "identity", "x-gzip", "br", "", "zz"]), max_size=3)


@given(raw=st.binary(max_size=300), encodings=_ENCODINGS, limit=st.integers(0, 400))
def test_any_bytes_give_a_body_within_the_limit_or_none(raw: bytes, encodings: list[str], limit: int) -> None:
    """Whatever the bytes and the encodings, the answer is None or at most ``limit`` bytes."""
    found = decode_bounded(encoded(", ".join(encodings)), raw, limit)
    assert found is None or len(found) <= limit


_LAYERS = st.lists(st.sampled_from(["gzip", "deflate", "raw-deflate", "identity"]), max_size=3)


@given(body=st.binary(max_size=500), layers=_LAYERS, limit=st.integers(0, 600))
def test_valid_bodies_decode_as_httpx_decodes_them(body: bytes, layers: list[str], limit: int) -> None:
    """A body encoded in layers decodes to what httpx gives the caller, whenever it fits the limit."""
    encoders: dict[str, Callable[[bytes], bytes]] = {
        "gzip": gzip.compress, "deflate": zlib.compress, "raw-deflate": raw_deflate, "identity": bytes,
    }
    raw = body
    for layer in layers:
        raw = encoders[layer](raw)
    headers = encoded(", ".join("deflate" if layer == "raw-deflate" else layer for layer in layers))
    expected = httpx.Response(200, headers=headers, content=raw).content
    assert expected == body
    assert decode_bounded(headers, raw, limit) == (body if len(body) <= limit else None)


# --------------------------------------------------------------------------------------------- text
@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (DOCUMENT.decode().encode("utf-16"), "application/json"),  # a BOM says UTF-16
        (DOCUMENT.decode().encode("utf-16-be"), "application/json; charset=UTF-16BE"),
        (DOCUMENT.decode().encode("utf-32-le"), 'application/json; Charset="utf_32le"'),
        (DOCUMENT.decode().encode("utf-32"), "application/json"),  # a UTF-32 BOM, not UTF-16 + NULs
        (b"\xef\xbb\xbf" + DOCUMENT, "application/json"),
        (DOCUMENT, "application/json; charset=shift_jis"),  # ASCII-compatible: read as it is
        (DOCUMENT, "application/json; charset=no-such-charset"),
        (DOCUMENT, "application/json; charset=punycode"),  # a codec, but no charset for a body
        (DOCUMENT, "application/json; charset=\u00ff\x00"),
    ],
)
def test_codes_are_read_in_any_declared_charset(body: bytes, content_type: str) -> None:
    """UTF-16 and UTF-32 (declared or by BOM) are read as such; any other charset, real or bogus, as ASCII."""
    assert code_in_body(body, content_type) == "ThrottlingException"


@given(body=st.binary(max_size=400), content_type=st.text(max_size=60))
def test_any_bytes_in_any_charset_give_text(body: bytes, content_type: str) -> None:
    """body_text never raises, whatever the bytes and the content type."""
    assert isinstance(body_text(body, content_type), str)


# --------------------------------------------------------------------------------------------- JSON
@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("", 0),
        ("{}", 1),
        ('{"a": [1, {"b": []}]}', 4),
        ('{"a": "[[[[{{{{"}', 1),  # brackets inside strings do not count
        ('{"a": "\\"[[[[", "b": ["\\\\"]}', 2),  # nor do escaped quotes end a string
        ('{"a": "never closed [[[[[[', 1),
        ('{"a": "ends in a backslash \\', 1),
        ("[" * 32_000, 32_000),
        ("]]]", 0),
    ],
)
def test_json_depth_counts_brackets_outside_strings(text: str, depth: int) -> None:
    """json_depth is the deepest nesting outside strings, escapes and unclosed strings included."""
    assert json_depth(text) == depth


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 65_536,
        b'{"a":' * 13_000 + b"1" + b"}" * 13_000,  # 64 KiB, valid JSON, nested 13,000 deep
        b'{"__type": "ThrottlingException", "deep": ' + b"[" * 32_000 + b"]" * 32_000 + b"}",
        b"{" + b'"\\' * 32_000,  # an unclosed string full of escapes: linear, not quadratic, to scan
        b'{"' + b'\\"' * 32_000,
    ],
)
def test_deeply_nested_json_gives_no_code_and_no_recursion_error(body: bytes) -> None:
    """A body nested deeper than MAX_JSON_DEPTH is not parsed: no RecursionError, just no code."""
    assert code_in_body(body, "application/json") is None


def test_json_as_deep_as_the_limit_is_read() -> None:
    """A body exactly MAX_JSON_DEPTH deep, with thousands of brackets in all, still gives its code."""
    nested = "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1)
    body = '{"code": "SlowDown", "items": [' + ", ".join(["[1]"] * 5000) + "], " + f'"n": {nested}' + "}"
    assert json_depth(body) == MAX_JSON_DEPTH
    assert code_in_body(body.encode()) == "SlowDown"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ :,x\u00e9', max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\x', max_size=4), inner,
                                                                 max_size=3),
    max_leaves=20,
)


def nesting(value: object) -> int:
    if isinstance(value, list):
        return 1 + max(map(nesting, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(nesting, value.values()), default=0)
    return 0


@given(_JSON)
def test_json_depth_is_the_nesting_of_any_json_document(value: object) -> None:
    """For any JSON document (brackets, quotes and backslashes in its strings too), json_depth is its nesting."""
    assert json_depth(json.dumps(value)) == nesting(value)
    assert json_depth(json.dumps(value, ensure_ascii=False, indent=1)) == nesting(value)
