#!/usr/bin/env python3
"""Street-level maps in a real browser (Chromium through Selenium). script/test starts four app
instances and runs:  tiles.py VECTOR_URL SCREENSHOT_DIR STAMEN_URL USGS_URL DEAD_UPSTREAM_URL

  VECTOR_URL         TILES_FILE=Tests/Fixtures/tiles/naples.pmtiles (MVT, Protomaps layers)
  STAMEN_URL         TILES_FILE=…/stamen-toner-z0-3.pmtiles (PNG, zoom 0-3, whole world)
  USGS_URL           TILES_FILE=…/usgs-mt-whitney-z8-15-webp.pmtiles (WebP, zoom 8-15, a small area)
  DEAD_UPSTREAM_URL  TILE_URL pointing at a closed port (every tile fails upstream)

The first two arguments are journey.py's (BASE_URL SCREENSHOT_DIR): its browser, steps and waits
are used here. Checks canvas pixels against the style's colours (Public/js/vector.js STYLE), that
every request stays on the page's origin, and that the console has no errors (CSP violations
included).
"""
import os, random, sys, time, traceback

sys.path.insert(0, os.path.dirname(__file__))
import journey as j  # noqa: E402  (VECTOR_URL and SCREENSHOT_DIR are its BASE_URL and SCREENSHOT_DIR)
from selenium.webdriver.common.by import By  # noqa: E402

VECTOR, SHOTS = j.BASE, j.SHOTS
STAMEN, USGS, DEAD = sys.argv[3:6]
failures = []

# Public/js/vector.js STYLE and map.js's built-in colours.
WATER = (0x9d, 0xc7, 0xdc)
EARTH = (0xf3, 0xef, 0xe4)
ROAD = (0xff, 0xff, 0xff)
ROAD_CASING = (0xcf, 0xc5, 0xb2)
BUILDING = (0xdd, 0xd5, 0xc8)
SEA = (0xa9, 0xcf, 0xe0)


def step(driver, name, body):
    with j.Step(driver, "tiles: " + name):
        body()
    if j.failures:
        failures.extend(j.failures)
        j.failures.clear()


def wait(predicate, timeout=15, message="condition"):
    j.wait(None, predicate, timeout, message)


def sign_up(driver, base):
    driver.get(base + "/sign-up")
    if not driver.find_elements(By.ID, "email"):
        # Signed in already: the instances share one database, and cookies ignore the port.
        driver.get(base + "/")
        wait(lambda: driver.execute_script("return !!(window.virtualTourist && window.virtualTourist.map)"), message="the map")
        return
    for field, value in [("email", "tiles-%d@example.org" % random.randrange(10**9)), ("display_name", "Tess"),
                         ("password", j.PASSWORD), ("password_confirmation", j.PASSWORD)]:
        driver.find_element(By.ID, field).send_keys(value)
    driver.find_element(By.CSS_SELECTOR, "form.stacked button[type=submit]").click()
    wait(lambda: driver.execute_script("return !!(window.virtualTourist && window.virtualTourist.map)"), message="the map")


def set_view(driver, lat, lon, zoom, ready):
    driver.execute_script("window.virtualTourist.map.setView(%r, %r, %r)" % (lat, lon, zoom))
    # The data-* state is written while a frame draws: until one has drawn the new view, it still
    # says "ready" for the old one (j.drawn).
    wait(lambda: j.drawn(driver) and driver.execute_script("const d = document.getElementById('map').dataset; return %s" % ready),
         message="tiles at %s,%s z%s (%s)" % (lat, lon, zoom, ready))
    # One more frame after the last tile, asked for and waited for (a fixed sleep can pass
    # without one on a loaded machine).
    frames = int(j.data(driver, "frames") or 0)
    driver.execute_script("window.virtualTourist.map.redraw()")
    wait(lambda: int(j.data(driver, "frames") or 0) > frames, message="a frame after the tiles")


def colour_counts(driver, colours, box=None, tolerance=0):
    """How many canvas pixels have each colour, each channel within `tolerance` (box: x0, y0, x1,
    y1 in canvas pixels)."""
    return driver.execute_script("""
        const c = document.getElementById('map-canvas');
        const [x0, y0, x1, y1] = arguments[1] || [0, 0, c.width, c.height];
        const data = c.getContext('2d').getImageData(x0, y0, x1 - x0, y1 - y0).data;
        const wanted = arguments[0], t = arguments[2];
        const counts = wanted.map(() => 0);
        let dark = 0;
        for (let i = 0; i < data.length; i += 4) {
          for (let k = 0; k < wanted.length; k++) {
            const [r, g, b] = wanted[k];
            if (Math.abs(data[i] - r) <= t && Math.abs(data[i + 1] - g) <= t && Math.abs(data[i + 2] - b) <= t) { counts[k]++; break; }
          }
          if (data[i] < 80 && data[i + 1] < 80 && data[i + 2] < 80) dark++;
        }
        return { counts, dark, total: data.length / 4 };
    """, [list(c) for c in colours], box, tolerance)


def same_origin_only(driver, base):
    origins = driver.execute_script("""
        return performance.getEntriesByType('resource').map((e) => new URL(e.name).origin)
          .filter((o) => o !== location.origin);
    """)
    assert origins == [], "requests left our origin: %s" % origins
    tile_requests = driver.execute_script(
        "return performance.getEntriesByType('resource').filter((e) => new URL(e.name).pathname.startsWith('/tiles/')).length")
    return tile_requests


def console_clean(driver):
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"
              and "/tiles/" not in e["message"]]   # a 404 for a tile outside an archive is expected
    assert not errors, "console errors: %s" % errors


def vector_checks(d):
    sign_up(d, VECTOR)
    info = d.execute_script("return fetch('/tiles.json').then((r) => r.json())")
    assert info["format"] == "mvt" and info["maxzoom"] == 14, info

    def zoom14():
        # The harbour of Naples: sea, the shore, roads between districts, their names.
        set_view(d, 40.836, 14.245, 14, "d.vectorTiles === 'ready'")
        d.save_screenshot(os.path.join(SHOTS, "tiles-vector-z14.png"))
        found = colour_counts(d, [WATER, EARTH, ROAD, ROAD_CASING, BUILDING], tolerance=4)
        water, earth, road, casing, building = found["counts"]
        print("    z14 pixels: water %d, earth %d, road %d, casing %d, buildings %d, dark (labels) %d of %d"
              % (water, earth, road, casing, building, found["dark"], found["total"]))
        assert water > found["total"] * 0.1, "no water drawn"
        assert earth > found["total"] * 0.1, "no land drawn"
        # Casings are one-pixel edges: their count moves with the canvas size by a pixel or two.
        assert road > 300 and casing > 100, "no roads drawn"
        assert building > 100, "no buildings drawn"
        assert found["dark"] > 150, "no labels drawn"
    step(d, "vector tiles at zoom 14: water, land, roads, buildings and labels", zoom14)

    def overzoom():
        before = d.execute_script("return performance.getEntriesByType('resource').filter((e) => /\\/tiles\\/1[5-9]\\//.test(e.name)).length")
        set_view(d, 40.836, 14.245, 17, "d.vectorTiles === 'ready'")
        d.save_screenshot(os.path.join(SHOTS, "tiles-vector-z17.png"))
        found = colour_counts(d, [WATER, ROAD])
        assert found["counts"][0] > 1000 and found["counts"][1] > 300, found
        after = d.execute_script("return performance.getEntriesByType('resource').filter((e) => /\\/tiles\\/1[5-9]\\//.test(e.name)).length")
        assert before == after == 0, "asked for tiles past the archive's maxzoom"
    step(d, "past maxzoom the last level is scaled up (overzoom)", overzoom)

    def attribution():
        text = d.find_element(By.ID, "map-attribution").text
        assert "Natural Earth" in text and "GeoNames" in text and "<a" not in text, text
    step(d, "the archive's attribution is on the map", attribution)

    def outside():
        # Kyoto is outside the archive at zoom 12: the built-in map shows there.
        set_view(d, 35.0116, 135.7681, 12, "d.basemap === 'ready'")
        found = colour_counts(d, [EARTH])
        assert found["counts"][0] > found["total"] * 0.3, found
    step(d, "outside the archive the built-in map shows", outside)

    def origin():
        n = same_origin_only(d, VECTOR)
        assert n > 10, "only %d tile requests" % n
        console_clean(d)
    step(d, "no request leaves our origin; no console errors", origin)


def raster_checks(d):
    sign_up(d, STAMEN)

    def stamen():
        for zoom in (1, 2, 3):
            set_view(d, 20, 0, zoom, "d.rasterTiles === 'ready'")
            # Inside the world (at zoom 1 and 2 it is narrower than the window).
            found = colour_counts(d, [EARTH, SEA, (255, 255, 255), (0, 0, 0)], [450, 150, 830, 550])
            earth, sea, white, black = found["counts"]
            # Toner is black and white: the tiles cover the built-in map completely.
            assert earth == 0 and sea == 0 and white + black > found["total"] * 0.5, (zoom, found)
            tiles = d.execute_script("return performance.getEntriesByType('resource').filter((e) => e.name.includes('/tiles/%d/')).length" % zoom)
            assert tiles > 0, "no zoom %d tiles requested" % zoom
        d.save_screenshot(os.path.join(SHOTS, "tiles-stamen-z3.png"))
        set_view(d, 20, 0, 5, "d.rasterTiles === 'ready'")   # overzoom from 3
        found = colour_counts(d, [EARTH, SEA])
        assert found["counts"] == [0, 0], found
        assert d.execute_script("return performance.getEntriesByType('resource').filter((e) => /\\/tiles\\/[4-9]\\//.test(e.name)).length") == 0
        same_origin_only(d, STAMEN)
        console_clean(d)
    step(d, "raster PNG archive: tiles at zoom 1-3, scaled up past 3", stamen)

    sign_up(d, USGS)

    def usgs():
        # The archive covers a few square km around Mount Whitney at zoom 8-15.
        set_view(d, 36.578, -118.292, 13, "d.rasterTiles !== undefined && [...performance.getEntriesByType('resource')].some((e) => e.name.includes('/tiles/13/'))")
        # Part of the view is outside the archive, so the layer never says "ready": wait for the
        # centre's tile to be decoded and drawn (a fetched tile is drawn a frame or more later).
        box = [600, 420, 680, 480]
        try:
            wait(lambda: sum(colour_counts(d, [EARTH, SEA], box)["counts"]) <= (box[2] - box[0]) * (box[3] - box[1]) // 100,
                 message="the topographic tile at the centre")
        except AssertionError:
            pass  # reported below, with the counts
        d.save_screenshot(os.path.join(SHOTS, "tiles-usgs-z13.png"))
        centre = colour_counts(d, [EARTH, SEA], box)
        # A stray pixel of the tile may match a basemap colour; the built-in map would fill the box.
        assert sum(centre["counts"]) <= centre["total"] // 100, "the topographic tile is not drawn at the centre: %s" % centre
        # Far from it the built-in map is drawn (the archive has no tiles there).
        set_view(d, 20, 0, 3, "d.basemap === 'ready'")
        assert d.execute_script("return performance.getEntriesByType('resource').filter((e) => e.name.includes('/tiles/3/')).length") == 0, \
            "asked for tiles below the archive's minzoom"
        found = colour_counts(d, [EARTH])
        assert found["counts"][0] > 1000, found
        same_origin_only(d, USGS)
        console_clean(d)
    step(d, "raster WebP archive (512 px, zoom 8-15): drawn where it has tiles, the built-in map elsewhere", usgs)


def dead_upstream_checks(d):
    sign_up(d, DEAD)

    def dead():
        set_view(d, 48, 10, 5, "d.basemap === 'ready'")
        time.sleep(1.5)
        d.save_screenshot(os.path.join(SHOTS, "tiles-dead-upstream.png"))
        found = colour_counts(d, [EARTH])
        assert found["counts"][0] > found["total"] * 0.3, "the built-in map is not drawn: %s" % found
        statuses = d.execute_script("""
            return Promise.all([fetch('/tiles/5/17/11'), fetch('/tiles.json')]).then((r) => r.map((x) => x.status))""")
        assert statuses == [502, 200], statuses
        assert not d.find_elements(By.CSS_SELECTOR, "img[src*='/tiles/']"), "tile images in the page"
        same_origin_only(d, DEAD)
    step(d, "upstream failing: the built-in map, no broken images", dead)


for checks in (vector_checks, raster_checks, dead_upstream_checks):
    driver = j.browser(extra=["--force-device-scale-factor=1"])
    try:
        checks(driver)
    except Exception:
        failures.append(checks.__name__)
        traceback.print_exc()
    finally:
        driver.quit()

if failures:
    print("FAILED:", ", ".join(failures))
    sys.exit(1)
print("tiles: all browser checks passed")
