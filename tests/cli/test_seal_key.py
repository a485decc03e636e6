"""`ezat seal-key` prints an EZAT_SEAL_KEYS entry the translator accepts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ezat_common.seal_keys import parse_keys


def test_seal_key_prints_a_new_entry() -> None:
    ezat = str(Path(sys.executable).parent / "ezat")
    out = [
        subprocess.run(
            [ezat, "seal-key", "--id", "k2"], capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(2)
    ]
    [(kid, key)] = parse_keys(out[0])
    assert kid == "k2" and len(key) == 32
    assert out[0] != out[1]  # a fresh key each time
