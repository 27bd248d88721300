-- Organization suspension (staff): who, when and why, and a version that grows
-- with every change so identity applies the events in order
-- (core.v1.org.status_changed carries it).
ALTER TABLE organizations
    ADD COLUMN status_version     bigint NOT NULL DEFAULT 0,
    ADD COLUMN status_reason      text,
    ADD COLUMN status_changed_at  timestamptz,
    ADD CONSTRAINT organizations_suspension_has_reason
        CHECK (status = 'active' OR status_reason IS NOT NULL);

-- Projects: a core-level grouping products store as a bare uuid and validate
-- with GET /v1/projects/{id}.
CREATE TABLE projects (
    id           uuid PRIMARY KEY,
    org_id       uuid NOT NULL REFERENCES organizations (id),
    name         text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    description  text NOT NULL DEFAULT '' CHECK (length(description) <= 1000),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
-- An organization's projects in creation order (the list's keyset pages).
CREATE INDEX projects_by_org ON projects (org_id, created_at, id);

-- Organization assets: documents, logos and links the organization keeps
-- (https URLs only; the files live elsewhere).
CREATE TABLE org_assets (
    id          uuid PRIMARY KEY,
    org_id      uuid NOT NULL REFERENCES organizations (id),
    kind        text NOT NULL CHECK (kind IN ('document', 'logo', 'link', 'other')),
    name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    url         text NOT NULL CHECK (url LIKE 'https://%' AND length(url) <= 2048),
    note        text NOT NULL DEFAULT '' CHECK (length(note) <= 1000),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX org_assets_by_org ON org_assets (org_id, created_at, id);
