"""Error bodies from any server: bounded decoding, and error codes read from JSON or XML.

Every function here takes whatever bytes a server sent and answers a value or ``None``; none raises,
none holds more than its limit in memory (a 61 KB gzip body that would inflate to 60 MB is refused
after ``limit`` bytes), and none recurses on the input (a JSON body nested 32,000 deep is refused by
a linear scan before ``json.loads``, whose recursion would otherwise end in ``RecursionError``).
"""

from __future__ import annotations

import json
import re
import zlib
from codecs import BOM_UTF8, BOM_UTF16_BE, BOM_UTF16_LE, BOM_UTF32_BE, BOM_UTF32_LE
from collections.abc import Mapping
from itertools import accumulate
from typing import Any

__all__ = ["MAX_JSON_DEPTH", "MAX_CODE_LENGTH", "body_text", "code_in_body", "decode_bounded", "json_depth"]

MAX_JSON_DEPTH = 64
"""The deepest JSON error body parsed for a code; AWS's are 1 or 2 levels deep."""

MAX_CODE_LENGTH = 128
"""The longest error code taken from a header or body; anything longer is not a code."""

_GZIP = zlib.MAX_WBITS | 16  # a gzip header and trailer around deflate data
_ZLIB = zlib.MAX_WBITS  # "deflate" as RFC 9110 defines it: zlib-wrapped deflate data
_RAW_DEFLATE = -zlib.MAX_WBITS  # what some servers send as "deflate" (httpx accepts it too)


# ----------------------------------------------------------------------------------------- decoding
def _inflate(data: bytes, wbits: int, limit: int) -> bytes | None:
    """``data`` decompressed, or None when it is not valid or would exceed ``limit`` bytes."""
    try:
        # max_length stops the output at limit + 1 bytes (the rest of the input is left unread), so a
        # bomb costs at most that much memory: never "inflate everything, then cut".
        out = zlib.decompressobj(wbits).decompress(data, limit + 1)
    except zlib.error:
        return None
    return out if len(out) <= limit else None


def decode_bounded(headers: Mapping[str, str], raw: bytes, limit: int) -> bytes | None:
    """A body decoded as its ``Content-Encoding`` says, never producing more than ``limit`` bytes.

    ``gzip`` (and ``x-gzip``), ``deflate`` (zlib-wrapped, or raw as some servers send it) and
    ``identity`` are decoded, stacked encodings (``gzip, deflate``) in reverse order. An intermediate
    layer of a stack may hold up to ``2 * limit + 1024`` bytes (a compressed form is at most a little
    larger than what it holds). Truncated data gives what it holds, as httpx does.

    Args:
        headers: the response headers (``httpx.Headers``, or a mapping with lower-case names).
        raw: the body as received.
        limit: the most decoded bytes to produce (>= 0).

    Returns:
        The decoded body, or ``None`` when it is longer than ``limit``, not valid for its encoding,
        or in an encoding not decoded here (``br``, ``zstd``, or an unknown one).

    Raises:
        TypeError, ValueError: ``limit`` is not an integer >= 0 (the only exceptions: any bytes and
            any header values are answered).
    """
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"limit must be an integer, got {limit!r} ({type(limit).__name__})")
    if limit < 0 or limit.bit_length() > 60:
        shown = limit if limit.bit_length() <= 64 else "an integer of more than 19 digits"  # repr() may refuse
        raise ValueError(f"limit must be an integer >= 0 and < 2**60, got {shown}")
    layers = [token.strip(" \t").lower() for token in headers.get("content-encoding", "").split(",")]
    layers = [layer for layer in layers if layer not in ("", "identity")]
    data = raw
    for remaining, encoding in enumerate(reversed(layers), 1 - len(layers)):
        bound = limit if remaining == 0 else 2 * limit + 1024  # the last layer undone is the body
        if encoding in ("gzip", "x-gzip"):
            decoded = _inflate(data, _GZIP, bound)
        elif encoding == "deflate":
            decoded = _inflate(data, _ZLIB, bound)
            if decoded is None:
                decoded = _inflate(data, _RAW_DEFLATE, bound)
        else:
            return None
        if decoded is None:
            return None
        data = decoded
    return data if len(data) <= limit else None


# ------------------------------------------------------------------------------------------- text
_WIDE_CHARSETS = {  # by name without "-" and "_"
    "utf16": "utf-16", "utf16le": "utf-16-le", "utf16be": "utf-16-be",
    "utf32": "utf-32", "utf32le": "utf-32-le", "utf32be": "utf-32-be",
}
_CHARSET = re.compile(r";\s*charset\s*=\s*\"?([A-Za-z0-9_-]{1,32})", re.IGNORECASE)
# Longest first: a UTF-32 little-endian BOM starts with the UTF-16 one.
_BOMS = (
    (BOM_UTF32_LE, "utf-32"), (BOM_UTF32_BE, "utf-32"), (BOM_UTF8, "utf-8-sig"),
    (BOM_UTF16_LE, "utf-16"), (BOM_UTF16_BE, "utf-16"),
)
_BOM_STARTS = frozenset(bom[:1] for bom, _ in _BOMS)


def body_text(body: bytes, content_type: str = "") -> str:
    """A body as text for finding an error code: never raises, whatever the bytes or the charset.

    Codes are ASCII, and every ASCII-compatible charset (UTF-8, Latin-1, Shift_JIS ...) keeps ASCII
    bytes as they are, so those are read as UTF-8 with undecodable bytes replaced. Only UTF-16 and
    UTF-32 (declared, or announced by a byte-order mark) change the reading; an unknown or bogus
    charset is ignored.
    """
    codec = "utf-8"
    if ";" in content_type:  # parameters: perhaps a charset
        match = _CHARSET.search(content_type)
        if match is not None:
            codec = _WIDE_CHARSETS.get(match.group(1).lower().replace("-", "").replace("_", ""), "utf-8")
    if codec == "utf-8" and body[:1] in _BOM_STARTS:
        codec = next((name for bom, name in _BOMS if body.startswith(bom)), "utf-8")
    return body.decode(codec, "replace")


# ------------------------------------------------------------------------------------------- JSON
# A JSON string, escapes included; one never closed runs to the end of the text (an optional lone
# backslash included) instead of failing, so that a search never restarts inside it: linear time.
_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]++")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def json_depth(text: str) -> int:
    """The deepest bracket nesting of ``text`` outside JSON strings, found in linear time.

    It bounds the recursion ``json.loads`` would reach on ``text`` (the parser stops at the first
    error, so invalid input reaches no deeper), without recursing itself.
    """
    skeleton = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    return max(0, max(accumulate(map(_STEP.__getitem__, skeleton)), default=0))


def _json_code(text: str) -> str | None:
    # Fast path: with few brackets in all, the depth cannot be large.
    if text.count("{") + text.count("[") > MAX_JSON_DEPTH and json_depth(text) > MAX_JSON_DEPTH:
        return None
    try:
        document: Any = json.loads(text)
    except ValueError:  # invalid JSON, or an integer literal longer than int() accepts
        return None
    if isinstance(document, dict):
        for key in ("__type", "code", "Code"):
            value = document.get(key)
            if isinstance(value, str) and value:
                return value
    return None


# -------------------------------------------------------------------------------------------- XML
_XML_CODE = re.compile(r"<Code>\s*+([A-Za-z0-9_.:#-]{1,128}+)\s*+</Code>")


def code_in_body(body: bytes, content_type: str = "") -> str | None:
    """The raw error code of a JSON (``__type``, ``code``, ``Code``) or XML (``<Code>``) error body.

    The code is returned as written (``namespace#Name:uri`` included), or ``None``; never raises.
    """
    text = body_text(body, content_type).lstrip()
    if text[:1] == "{":
        return _json_code(text)
    if text[:1] == "<":
        match = _XML_CODE.search(text)
        if match is not None:
            return match.group(1)
    return None
