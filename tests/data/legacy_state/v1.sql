BEGIN TRANSACTION;
CREATE TABLE audit (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at TEXT NOT NULL,
            repo TEXT NOT NULL,
            number INTEGER NOT NULL,
            comment_id INTEGER NOT NULL,
            action TEXT NOT NULL CHECK (action IN ('created', 'edited', 'adopted'))
        );
INSERT INTO "audit" VALUES(1,'2026-10-05T14:03:00.000000Z','o/r',1,42,'created');
CREATE TABLE comments (
            repo TEXT NOT NULL,
            number INTEGER NOT NULL,
            comment_id INTEGER NOT NULL,
            body_hash TEXT NOT NULL,
            facts_key TEXT NOT NULL,
            observed_at TEXT NOT NULL,
            head_sha TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (repo, number)
        );
INSERT INTO "comments" VALUES('o/r',1,42,'h','k','2026-10-05T14:03:00.000000Z','sha','2026-10-05T14:03:00.000000Z');
CREATE TABLE facts (
            repo TEXT NOT NULL,
            number INTEGER NOT NULL,
            facts_key TEXT NOT NULL,
            observed_at TEXT NOT NULL,
            PRIMARY KEY (repo, number)
        );
INSERT INTO "facts" VALUES('o/r',1,'facts','2026-10-05T14:03:00.000000Z');
CREATE TABLE first_seen (
            repo TEXT NOT NULL,
            number INTEGER NOT NULL,
            head_sha TEXT NOT NULL,
            key TEXT NOT NULL,
            seen_at TEXT NOT NULL,
            PRIMARY KEY (repo, number, head_sha, key)
        );
INSERT INTO "first_seen" VALUES('o/r',1,'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa','status:dco','2026-10-05T14:03:00.000000Z');
CREATE TABLE rtd_final (
            project TEXT NOT NULL,
            commit_sha TEXT NOT NULL,
            payload TEXT NOT NULL,
            stored_at TEXT NOT NULL,
            PRIMARY KEY (project, commit_sha)
        );
CREATE INDEX audit_at ON audit (at);
DELETE FROM "sqlite_sequence";
INSERT INTO "sqlite_sequence" VALUES('audit',1);
COMMIT;
PRAGMA user_version = 1;
