"""Reading an evaluation's question file: JSON lines, blank lines skipped, each row checked as it is read."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path


def read_rows(path: Path, check: Callable[[dict], None], error: Callable[[str], Exception], shape: str,
              limit: int | None = None) -> list[dict]:
    """The rows of `path` (at most `limit`), each passed through `check`, which may add to the row and raises
    ValueError, KeyError, TypeError, AssertionError or re.error on a malformed one: then raises
    `error("PATH:LINE needs SHAPE")`."""
    if not path.is_file():
        raise error(f"no question file at {path}")
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            check(row)
        except (ValueError, KeyError, TypeError, AssertionError, re.error):
            raise error(f"{path}:{number} needs {shape}") from None
        rows.append(row)
    return rows[:limit]
