-- Licences as the provider states them (flickr.photos.licenses.getInfo), fetched once and refreshed
-- daily, so every instance credits photos with the same names and links; and the licence deed of
-- each photo, linked from its page.
CREATE TABLE provider_licenses (
    provider   text NOT NULL,
    code       text NOT NULL,
    name       text NOT NULL,
    url        text,
    fetched_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, code)
);

ALTER TABLE photos ADD COLUMN license_url text;

COMMENT ON TABLE provider_licenses IS 'Licences a photo provider lists (Flickr: flickr.photos.licenses.getInfo), cached; replaced whole when older than a day.';
COMMENT ON COLUMN provider_licenses.provider IS 'Whose list: flickr.';
COMMENT ON COLUMN provider_licenses.code IS 'The provider''s id for the licence, as photos carry it (Flickr: "11" is CC BY 4.0).';
COMMENT ON COLUMN provider_licenses.name IS 'The licence''s name as the provider gives it, shown in credit lines.';
COMMENT ON COLUMN provider_licenses.url IS 'The licence deed (or the provider''s page about it), linked from the photo page; NULL when the provider gives none.';
COMMENT ON COLUMN provider_licenses.fetched_at IS 'When the list was fetched from the provider; refreshed after a day.';
COMMENT ON COLUMN photos.license_url IS 'The licence deed of the photo, as the provider''s licence list gives it; NULL when unknown.';
