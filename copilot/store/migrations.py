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
    ("chat_0002_turns_votes", [
        """CREATE TABLE chat_turns (
            id TEXT PRIMARY KEY,
            user TEXT NOT NULL,
            created_at REAL NOT NULL,
            finished_at REAL,
            question TEXT NOT NULL,
            question_chars INTEGER NOT NULL,
            comparison TEXT NOT NULL DEFAULT 'pending',
            side_a TEXT NOT NULL CHECK (side_a IN ('thoughts', 'raw')),
            backend TEXT NOT NULL,
            model TEXT NOT NULL,
            embedder TEXT NOT NULL,
            personalized INTEGER NOT NULL DEFAULT 0,
            retrieval_s REAL,
            raw_answer TEXT,
            raw_sources TEXT NOT NULL DEFAULT '[]',
            raw_error TEXT,
            raw_s REAL,
            thoughts_answer TEXT,
            thoughts_sources TEXT NOT NULL DEFAULT '[]',
            thoughts_error TEXT,
            thoughts_s REAL
        )""",
        "CREATE INDEX chat_turns_user ON chat_turns(user, created_at)",
        """CREATE TABLE chat_votes (
            turn_id TEXT PRIMARY KEY REFERENCES chat_turns(id),
            user TEXT NOT NULL,
            choice TEXT NOT NULL CHECK (choice IN ('thoughts', 'raw', 'tie', 'bad')),
            label TEXT NOT NULL,
            voted_at REAL NOT NULL,
            changed_at REAL,
            changes INTEGER NOT NULL DEFAULT 0
        )""",
        """CREATE TABLE chat_vote_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            turn_id TEXT NOT NULL REFERENCES chat_turns(id),
            user TEXT NOT NULL,
            choice TEXT NOT NULL,
            previous TEXT,
            at REAL NOT NULL
        )""",
        """CREATE TABLE chat_thought_jobs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            turn_id TEXT NOT NULL REFERENCES chat_turns(id),
            answer TEXT NOT NULL CHECK (answer IN ('thoughts', 'raw')),
            trigger TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'queued',
            thought_id TEXT,
            similarity REAL,
            error TEXT,
            queued_at REAL NOT NULL,
            started_at REAL,
            finished_at REAL,
            UNIQUE (turn_id, answer)
        )""",
    ]),
    ("related_0001_aspect_cache", [
        """CREATE TABLE related_aspect_cache (
            content_hash TEXT NOT NULL,
            model TEXT NOT NULL,
            variant TEXT NOT NULL,
            aspect TEXT NOT NULL,
            text TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (content_hash, model, variant, aspect)
        )""",
    ]),
    ("reliability_0001_private_thoughts", [
        "ALTER TABLE thoughts ADD COLUMN private INTEGER NOT NULL DEFAULT 0",
    ]),
    # Issue #12: one thought per turn. A job row is one attempt; the turn's current job is the one not superseded
    # by a later vote. A thought whose vote changed is retracted (row and lineage kept, vector removed). Jobs of
    # the old schema: the newest per turn stays current unless the turn was voted "both bad"; the thoughts of
    # the others are marked retracted here and their vectors removed by the start-up repair.
    ("chat_0003_one_thought_per_turn", [
        "ALTER TABLE thoughts ADD COLUMN retracted_at REAL",
        """CREATE TABLE chat_thought_jobs_new (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            turn_id TEXT NOT NULL REFERENCES chat_turns(id),
            answer TEXT NOT NULL CHECK (answer IN ('thoughts', 'raw')),
            trigger TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'queued',
            thought_id TEXT,
            similarity REAL,
            error TEXT,
            queued_at REAL NOT NULL,
            started_at REAL,
            finished_at REAL,
            reason TEXT,
            planned_thought_id TEXT,
            runner TEXT,
            superseded_at REAL
        )""",
        """INSERT INTO chat_thought_jobs_new (id, turn_id, answer, trigger, status, thought_id, similarity, error,
                queued_at, started_at, finished_at, superseded_at)
            SELECT j.id, j.turn_id, j.answer, j.trigger, j.status, j.thought_id, j.similarity, j.error, j.queued_at,
                   j.started_at, j.finished_at,
                   CASE WHEN j.id = (SELECT MAX(k.id) FROM chat_thought_jobs k WHERE k.turn_id = j.turn_id)
                         AND NOT EXISTS (SELECT 1 FROM chat_votes v WHERE v.turn_id = j.turn_id AND v.choice = 'bad')
                        THEN NULL ELSE COALESCE(j.finished_at, j.queued_at) END
            FROM chat_thought_jobs j""",
        """UPDATE thoughts SET retracted_at = strftime('%s', 'now') WHERE id IN (
            SELECT thought_id FROM chat_thought_jobs_new WHERE superseded_at IS NOT NULL AND thought_id IS NOT NULL)""",
        """UPDATE chat_thought_jobs_new SET status = CASE WHEN thought_id IS NOT NULL THEN 'retracted'
                                                WHEN status IN ('queued', 'running') THEN 'cancelled' ELSE status END
            WHERE superseded_at IS NOT NULL""",
        "DROP TABLE chat_thought_jobs",
        "ALTER TABLE chat_thought_jobs_new RENAME TO chat_thought_jobs",
        "CREATE UNIQUE INDEX chat_thought_jobs_current ON chat_thought_jobs(turn_id) WHERE superseded_at IS NULL",
        "CREATE INDEX chat_thought_jobs_status ON chat_thought_jobs(status)",
    ]),
    # Issue #17: failures the product works around are counted (`status --json`), not only logged.
    ("reliability_0002_failures", [
        """CREATE TABLE failures (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL,
            reason TEXT NOT NULL,
            at REAL NOT NULL
        )""",
        "CREATE INDEX failures_kind ON failures(kind, at)",
    ]),
    # Issue #14: SlimPLM's decision for each question (store/slim_log.py): skipped or not and why, the proxy's
    # claims with their queries and verdicts, the items retrieved, and tokens and time by role.
    ("slim_0001_decision_log", [
        """CREATE TABLE slim_questions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            user TEXT NOT NULL,
            asked_at REAL NOT NULL,
            question TEXT NOT NULL,
            retrieved INTEGER NOT NULL,
            decided_by TEXT NOT NULL,
            reason TEXT NOT NULL,
            forced_rule TEXT NOT NULL DEFAULT '',
            heuristic_answer TEXT NOT NULL DEFAULT '',
            judge_output TEXT NOT NULL DEFAULT '',
            verdict TEXT NOT NULL DEFAULT '',
            decomposition TEXT NOT NULL DEFAULT '',
            proxy_error TEXT NOT NULL DEFAULT '',
            answer TEXT NOT NULL,
            proxy_model TEXT NOT NULL,
            main_model TEXT NOT NULL
        )""",
        "CREATE INDEX slim_questions_user ON slim_questions(user, asked_at)",
        """CREATE TABLE slim_claims (
            question_id INTEGER NOT NULL REFERENCES slim_questions(id),
            position INTEGER NOT NULL,
            claim TEXT NOT NULL,
            query TEXT NOT NULL,
            verdict TEXT NOT NULL,
            judge_output TEXT NOT NULL,
            PRIMARY KEY (question_id, position)
        )""",
        """CREATE TABLE slim_items (
            question_id INTEGER NOT NULL REFERENCES slim_questions(id),
            position INTEGER NOT NULL,
            item_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            title TEXT NOT NULL,
            score REAL NOT NULL,
            query TEXT NOT NULL,
            PRIMARY KEY (question_id, position)
        )""",
        """CREATE TABLE slim_roles (
            question_id INTEGER NOT NULL REFERENCES slim_questions(id),
            role TEXT NOT NULL,
            calls INTEGER NOT NULL,
            prompt_tokens INTEGER NOT NULL,
            completion_tokens INTEGER NOT NULL,
            seconds REAL NOT NULL,
            PRIMARY KEY (question_id, role)
        )""",
    ]),
    # Issue #16: Graph of Records (store/gor_cache.py). A scope's simulated questions and the answers the LLM wrote
    # to them (the graph's response records), and a trained network per scope and corpus version; a network row
    # is written in one statement after training finished, so an interrupted training leaves none.
    ("gor_0001_records_and_models", [
        """CREATE TABLE gor_simulations (
            scope TEXT NOT NULL,
            corpus_version TEXT NOT NULL,
            model TEXT NOT NULL,
            questions TEXT NOT NULL,
            responses TEXT NOT NULL DEFAULT '[]',
            created_at REAL NOT NULL,
            PRIMARY KEY (scope, corpus_version, model)
        )""",
        """CREATE TABLE gor_models (
            scope TEXT NOT NULL,
            corpus_version TEXT NOT NULL,
            variant TEXT NOT NULL,
            weights BLOB NOT NULL,
            meta TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (scope, corpus_version, variant)
        )""",
    ]),
    ("feed_0001_feedback_visits_tokens", [
        """CREATE TABLE feed_feedback (
            user TEXT NOT NULL,
            paper_id TEXT NOT NULL,
            verdict TEXT NOT NULL CHECK (verdict IN ('more', 'not')),
            at REAL NOT NULL,
            PRIMARY KEY (user, paper_id)
        )""",
        """CREATE TABLE feed_users (
            user TEXT PRIMARY KEY,
            last_visit REAL,
            previous_visit REAL,
            token TEXT UNIQUE
        )""",
    ]),
    ("backup_0001_hub_log", [
        """CREATE TABLE hub_backups (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL CHECK (kind IN ('backup', 'restore')),
            started_at REAL NOT NULL,
            finished_at REAL,
            status TEXT NOT NULL,
            snapshot TEXT,
            size INTEGER,
            error TEXT
        )""",
    ]),
    ("export_0001_keys", [
        # keys the app makes for itself once and keeps with its data (backed up with it), e.g. the salt of the user
        # hashes in exported preference data
        """CREATE TABLE app_keys (
            name TEXT PRIMARY KEY,
            value TEXT NOT NULL,
            created_at REAL NOT NULL
        )""",
    ]),
    # Issue #41: the experiment counts each comparison's first vote, and only one cast blind. A turn records when its
    # sides were first shown (the vote, or a command that printed them); a vote keeps its first choice beside the
    # current one; `blind` is 1 for a first vote cast before the sides were shown, 0 after, NULL for votes cast
    # before this was recorded (their blindness is not known).
    ("trust_0001_blind_votes", [
        "ALTER TABLE chat_turns ADD COLUMN revealed_at REAL",
        "ALTER TABLE chat_votes ADD COLUMN first_choice TEXT",
        "ALTER TABLE chat_votes ADD COLUMN first_label TEXT",
        "ALTER TABLE chat_votes ADD COLUMN blind INTEGER",
        "ALTER TABLE chat_vote_log ADD COLUMN blind INTEGER",
        """UPDATE chat_votes SET first_choice = COALESCE(
               (SELECT l.choice FROM chat_vote_log l WHERE l.turn_id = chat_votes.turn_id ORDER BY l.id LIMIT 1),
               choice)""",
        """UPDATE chat_votes SET first_label = CASE
               WHEN first_choice = choice THEN label
               WHEN first_choice IN ('tie', 'bad') THEN first_choice
               WHEN first_choice = (SELECT t.side_a FROM chat_turns t WHERE t.id = chat_votes.turn_id) THEN 'A'
               ELSE 'B' END""",
        "UPDATE chat_turns SET revealed_at = (SELECT v.voted_at FROM chat_votes v WHERE v.turn_id = chat_turns.id)",
    ]),
    # Issue #47: each answer's evidence table as a record (copilot.table, JSON), stored with the turn and read as it is
    # (downloads, the thought a preferred answer becomes, the comparison of the sides). Turns stored before have
    # NULL: their text stays what was shown; their downloads are the BibTeX of their sources.
    ("chat_0002_typed_tables", [
        "ALTER TABLE chat_turns ADD COLUMN raw_table TEXT",
        "ALTER TABLE chat_turns ADD COLUMN thoughts_table TEXT",
    ]),
    # Issue #49: a question read as a follow-up keeps the user's own words, so a reopened turn can offer to ask them
    # on their own ('' for every other turn, and for turns stored before)
    ("chat_0003_asked", ["ALTER TABLE chat_turns ADD COLUMN asked TEXT NOT NULL DEFAULT ''"]),
    # Issue #58 item 5: whether an answer is a model's words or a table alone is recorded, never read back from its
    # text: each answer's checked words (NULL: no model wrote it). Turns stored before: an answer from a hosted model
    # (the router, an OpenAI-compatible endpoint) is taken as written, its whole text its words; a local model's as
    # the table alone (the packaged default's; an older turn of a large local GGUF is mislabelled "extractive").
    ("chat_0004_answer_words", [
        "ALTER TABLE chat_turns ADD COLUMN raw_words TEXT",
        "ALTER TABLE chat_turns ADD COLUMN thoughts_words TEXT",
        "UPDATE chat_turns SET raw_words = raw_answer, thoughts_words = thoughts_answer WHERE backend <> 'local'",
    ]),
    # Issue #59 item 11: a one-answer turn (nothing to compare) can be judged by its user: kept (its thought is made
    # as a preferred answer's is) or dismissed (none). A judgement is not a blind vote: no statistic counts it.
    ("chat_0005_judgements", [
        """CREATE TABLE chat_judgements (
            turn_id TEXT PRIMARY KEY REFERENCES chat_turns(id),
            user TEXT NOT NULL,
            choice TEXT NOT NULL CHECK (choice IN ('keep', 'dismiss')),
            judged_at REAL NOT NULL
        )""",
    ]),
    # Issue #57 item 3: a researcher's own PDF, private to its owner (store/documents.py): the document with its
    # parsed body, and one row per quotable sentence with its page and vector. Deleting a document deletes its
    # sentences in the same transaction; a backup copy holds no row of either (store.backup).
    ("documents_0001_private_uploads", [
        """CREATE TABLE documents (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            owner TEXT NOT NULL,
            title TEXT NOT NULL,
            file_name TEXT NOT NULL,
            pages INTEGER NOT NULL,
            size INTEGER NOT NULL,
            uploaded_at REAL NOT NULL,
            body TEXT NOT NULL,
            model TEXT NOT NULL,
            dim INTEGER NOT NULL
        )""",
        "CREATE INDEX documents_owner ON documents(owner, uploaded_at)",
        """CREATE TABLE document_sentences (
            document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            start INTEGER NOT NULL,
            end INTEGER NOT NULL,
            passage INTEGER NOT NULL,
            cut_before INTEGER NOT NULL,
            cut_after INTEGER NOT NULL,
            page INTEGER NOT NULL,
            terms TEXT NOT NULL,
            vector BLOB NOT NULL,
            PRIMARY KEY (document_id, position)
        )""",
    ]),
    # Issue #57: a question about chosen papers keeps them with its turn (their ids, space-separated; '' asked the
    # library, as every turn stored before did), so History and a reopened turn say what the turn was asked of
    ("chat_0006_scope", ["ALTER TABLE chat_turns ADD COLUMN scope TEXT NOT NULL DEFAULT ''"]),
]
