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
            updated_at TEXT NOT NULL, node_id TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (repo, number)
        );
INSERT INTO "comments" VALUES('o/r',1,42,'h','k','2026-10-05T14:03:00.000000Z','aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa','2026-10-05T14:03:00.000000Z','IC_kwDOA1');
CREATE TABLE deliveries (
            delivery_id TEXT PRIMARY KEY,
            event TEXT NOT NULL,
            received_at TEXT NOT NULL
        );
INSERT INTO "deliveries" VALUES('d-1','check_run','2026-10-05T14:03:00.000000Z');
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
CREATE TABLE required_checks (
            repo TEXT NOT NULL,
            base TEXT NOT NULL,
            name TEXT NOT NULL,
            required INTEGER CHECK (required IN (0, 1)),  -- NULL: GitHub did not say
            learned_at TEXT NOT NULL,
            PRIMARY KEY (repo, base, name)
        );
INSERT INTO "required_checks" VALUES('o/r','main','tests',1,'2026-10-05T14:03:00.000000Z');
CREATE TABLE rtd_reads (
            host TEXT NOT NULL,
            project TEXT NOT NULL,
            commit_sha TEXT NOT NULL,
            payload TEXT,
            read_at TEXT,
            failing_since TEXT,
            failure TEXT,
            PRIMARY KEY (host, project, commit_sha)
        );
INSERT INTO "rtd_reads" VALUES('org','proj','aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa','{}','2026-10-05T14:03:00.000000Z',NULL,NULL);
CREATE TABLE triage (
            repo TEXT NOT NULL,
            number INTEGER NOT NULL,
            title TEXT NOT NULL,
            author TEXT,
            draft INTEGER NOT NULL,
            head_sha TEXT NOT NULL,
            verdict TEXT NOT NULL,
            url TEXT NOT NULL,
            details TEXT NOT NULL,
            observed_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (repo, number)
        );
INSERT INTO "triage" VALUES('o/r',1,'Fix it','alice',0,'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa','passing','https://github.com/o/r/pull/1','{}','2026-10-05T14:03:00.000000Z','2026-10-05T14:03:00.000000Z');
CREATE INDEX audit_at ON audit (at);
CREATE INDEX deliveries_received_at ON deliveries (received_at);
DELETE FROM "sqlite_sequence";
INSERT INTO "sqlite_sequence" VALUES('audit',1);
COMMIT;
PRAGMA user_version = 6;
