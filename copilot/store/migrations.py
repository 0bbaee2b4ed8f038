"""Schema migrations: (unique name, SQL statements), applied once in list order and recorded.

Never edit a released migration; append a new one. Names are prefixed by the feature that owns them.
"""

MIGRATIONS: list[tuple[str, list[str]]] = [
    ("0001_foundation", [
        """CREATE TABLE llm_calls (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            started_at REAL NOT NULL,
            backend TEXT NOT NULL,
            model TEXT NOT NULL,
            prompt_name TEXT NOT NULL,
            prompt TEXT NOT NULL,
            output TEXT,
            prompt_tokens INTEGER,
            completion_tokens INTEGER,
            latency_s REAL,
            error TEXT
        )""",
        "CREATE INDEX llm_calls_started ON llm_calls(started_at)",
        """CREATE TABLE ingest_runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            started_at REAL NOT NULL,
            finished_at REAL,
            source TEXT NOT NULL,
            pid INTEGER,
            status TEXT NOT NULL DEFAULT 'running',
            seen INTEGER NOT NULL DEFAULT 0,
            added INTEGER NOT NULL DEFAULT 0,
            updated INTEGER NOT NULL DEFAULT 0,
            unchanged INTEGER NOT NULL DEFAULT 0,
            skipped INTEGER NOT NULL DEFAULT 0,
            error TEXT
        )""",
    ]),
    ("profile_0001_profiles", [
        """CREATE TABLE profiles (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            user TEXT NOT NULL,
            version INTEGER NOT NULL,
            text TEXT NOT NULL,
            keywords TEXT NOT NULL,
            paper_ids TEXT NOT NULL,
            saved_at REAL NOT NULL,
            UNIQUE (user, version)
        )""",
    ]),
]
