-- The names of a job's artifact's named parts (a chat message a destination kind sends,
-- stored beside the HTML and text as `<sha256>.<name>.json`), comma-separated; NULL when it has
-- none. Older versions neither write nor read it: their artifacts have no such parts.
ALTER TABLE jobs ADD COLUMN artifact_parts TEXT;
