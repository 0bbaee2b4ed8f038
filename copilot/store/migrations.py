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
    ("chat_0001_thought_memory", [
        """CREATE TABLE thoughts (
            id TEXT PRIMARY KEY,
            text TEXT NOT NULL,
            origin TEXT NOT NULL,
            question TEXT NOT NULL DEFAULT '',
            user TEXT NOT NULL DEFAULT 'local',
            level REAL NOT NULL,
            created_at REAL NOT NULL,
            deleted_at REAL
        )""",
        "CREATE INDEX thoughts_created ON thoughts(created_at)",
        """CREATE TABLE thought_edges (
            thought_id TEXT NOT NULL REFERENCES thoughts(id),
            source_id TEXT NOT NULL,
            source_kind TEXT NOT NULL CHECK (source_kind IN ('paper', 'thought')),
            position INTEGER NOT NULL,
            PRIMARY KEY (thought_id, source_id)
        )""",
        "CREATE INDEX thought_edges_source ON thought_edges(source_id)",
    ]),
    ("trends_0001_cache", [
        """CREATE TABLE trends_cache (
            key TEXT PRIMARY KEY,
            user TEXT NOT NULL,
            profile_version INTEGER,
            start TEXT NOT NULL,
            end TEXT NOT NULL,
            categories TEXT NOT NULL,
            corpus_version TEXT NOT NULL,
            created_at REAL NOT NULL,
            report TEXT NOT NULL
        )""",
        "CREATE INDEX trends_cache_user ON trends_cache(user, created_at)",
    ]),
]
