-- Photos are JPEG, PNG, GIF or WebP: already compressed. EXTERNAL keeps them out of line (TOAST)
-- without PostgreSQL trying pglz on every image first, which costs CPU on each of an album's 30
-- writes and saves nothing (PostgreSQL manual, "TOAST", storage strategies).
ALTER TABLE photos ALTER COLUMN bytes SET STORAGE EXTERNAL;
