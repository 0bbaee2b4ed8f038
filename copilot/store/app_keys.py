"""Keys the app makes for itself once and keeps in SQLite with the rest of its data (so a backup carries them): the
salt of the user hashes in exported preference data. Never shown, logged or exported."""

from __future__ import annotations

import secrets
import time

from copilot.store.db import Database

EXPORT_SALT = "export_salt"


class AppKeys:
    def __init__(self, db: Database) -> None:
        self.db = db

    def get_or_make(self, name: str) -> str:
        """The key called `name`, made (32 random bytes, hex) the first time it is asked for; two processes asking at
        once get the same one."""
        with self.db.transaction() as tx:
            tx.execute("INSERT OR IGNORE INTO app_keys (name, value, created_at) VALUES (?, ?, ?)",
                       (name, secrets.token_hex(32), time.time()))
            return tx.execute("SELECT value FROM app_keys WHERE name = ?", (name,)).fetchone()[0]
