-- The daily creation quota counts a user's recent organizations.
CREATE INDEX organizations_by_creator ON organizations (created_by, created_at);
