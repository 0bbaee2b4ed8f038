"""What commands print: one JSON object on stdout for `--json`, progress bars on stderr."""

from __future__ import annotations

import json
import sys


def print_json(obj: object) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def ingest_progress_bar(total: int | None, unit: str):
    """A tqdm bar on stderr and the callback that moves it from ingestion counts."""
    from tqdm import tqdm

    bar = tqdm(total=total, unit=unit, file=sys.stderr, dynamic_ncols=True)

    def update(counts) -> None:
        bar.n = counts.seen + counts.skipped
        bar.set_postfix(added=counts.added, updated=counts.updated, unchanged=counts.unchanged,
                        skipped=counts.skipped, refresh=False)
        bar.refresh()

    return bar, update
