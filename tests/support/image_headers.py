"""Image headers built byte by byte as each format's specification lays them out: what
``ezat_common.media.image_size`` reads, for its tests and the count_tokens estimate's."""

from __future__ import annotations

import struct


def png(width: int, height: int) -> bytes:
    ihdr = struct.pack(">II", width, height) + b"\x08\x06\x00\x00\x00"
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + b"\x00" * 4


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00" * 3


def jpeg(width: int, height: int, marker: int = 0xC0) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    dqt = b"\xff\xdb" + struct.pack(">H", 67) + b"\x00" * 65
    sof = bytes([0xFF, marker]) + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x00" * 9
    return b"\xff\xd8" + app0 + dqt + sof + b"\xff\xda"


def webp(chunk: bytes, payload: bytes) -> bytes:
    return b"RIFF" + struct.pack("<I", 4 + 8 + len(payload)) + b"WEBP" + chunk + payload


def vp8(width: int, height: int) -> bytes:
    frame = b"\x00\x00\x00" + b"\x9d\x01\x2a" + struct.pack("<HH", width, height)
    return webp(b"VP8 " + struct.pack("<I", len(frame)), frame)


def vp8l(width: int, height: int) -> bytes:
    bits = (width - 1) | ((height - 1) << 14)
    return webp(b"VP8L" + struct.pack("<I", 5), b"\x2f" + struct.pack("<I", bits))


def vp8x(width: int, height: int) -> bytes:
    canvas = (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return webp(b"VP8X" + struct.pack("<I", 10), b"\x00" * 4 + canvas)
