-- The knowledge base (staff write it, anyone reads what is published, the
-- assistant answers from it) and platform proposals (customers file them, staff
-- move them). proto-docs/agent.md "Knowledge base" and "Platform proposals".

CREATE TABLE kb_categories (
    id          uuid PRIMARY KEY,
    slug        text NOT NULL CHECK (slug ~ '^[a-z0-9]+(-[a-z0-9]+)*$' AND length(slug) <= 100),
    title       text NOT NULL CHECK (length(title) BETWEEN 1 AND 200),
    created_at  timestamptz NOT NULL,
    CONSTRAINT kb_categories_slug_key UNIQUE (slug)
);

CREATE TABLE kb_articles (
    id           uuid PRIMARY KEY,
    slug         text NOT NULL CHECK (slug ~ '^[a-z0-9]+(-[a-z0-9]+)*$' AND length(slug) <= 100),
    title        text NOT NULL CHECK (length(title) BETWEEN 1 AND 200),
    -- Markdown as written (at most 100 KiB of UTF-8); never rendered here.
    body_md      text NOT NULL CHECK (octet_length(body_md) <= 102400),
    status       text NOT NULL DEFAULT 'draft' CHECK (status IN ('draft', 'published')),
    category_id  uuid REFERENCES kb_categories (id),
    created_by   uuid NOT NULL,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    -- Full-text search in both languages the platform speaks, kept by the
    -- database: the title weighs more than the body. A query is matched in
    -- both configurations (kb::search).
    search       tsvector GENERATED ALWAYS AS (
                     setweight(to_tsvector('english'::regconfig, title), 'A')
                     || setweight(to_tsvector('turkish'::regconfig, title), 'A')
                     || setweight(to_tsvector('english'::regconfig, body_md), 'B')
                     || setweight(to_tsvector('turkish'::regconfig, body_md), 'B')
                 ) STORED,
    CONSTRAINT kb_articles_slug_key UNIQUE (slug)
);
-- The public list (newest change first), all of it or one category's, and search.
CREATE INDEX kb_articles_published ON kb_articles (updated_at DESC, id DESC)
    WHERE status = 'published';
CREATE INDEX kb_articles_published_by_category ON kb_articles (category_id, updated_at DESC, id DESC)
    WHERE status = 'published';
CREATE INDEX kb_articles_search ON kb_articles USING gin (search)
    WHERE status = 'published';
-- Staff's list (drafts too).
CREATE INDEX kb_articles_all ON kb_articles (updated_at DESC, id DESC);

CREATE TABLE proposals (
    id          uuid PRIMARY KEY,
    user_id     uuid NOT NULL,
    title       text NOT NULL CHECK (length(title) BETWEEN 1 AND 200),
    problem     text NOT NULL CHECK (length(problem) BETWEEN 1 AND 10000),
    proposal    text NOT NULL CHECK (length(proposal) BETWEEN 1 AND 10000),
    status      text NOT NULL DEFAULT 'draft'
                CHECK (status IN ('draft', 'accepted', 'rejected', 'done')),
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX proposals_by_user ON proposals (user_id, created_at DESC, id DESC);
CREATE INDEX proposals_all ON proposals (created_at DESC, id DESC);
