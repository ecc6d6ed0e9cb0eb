#!/usr/bin/env python3
"""script/bench map: the map page as a browser sees it (headless Chromium via Selenium).

Prints the page weight (HTML + CSS + JS, gzipped), time to the first map frame and to a complete
basemap, and frame times while panning with 1,000 pins (requestAnimationFrame deltas, median and
p95). Usage: bench-map.py BASE_URL DATABASE_URL [LAT,LON,ZOOM]
With LAT,LON,ZOOM (a server with TILES_FILE set) the pins and the view are there instead, and the
map waits for its vector tiles: frame times over street-level tiles.
"""
import gzip, json, random, re, subprocess, sys, time, urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

base, database_url = sys.argv[1], sys.argv[2]
vector_view = [float(v) for v in sys.argv[3].split(",")] if len(sys.argv) > 3 else None

options = webdriver.ChromeOptions()
for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,800"]:
    options.add_argument(argument)
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
try:
    driver.get(base + "/sign-up")
    email = "bench-%d@example.org" % random.randrange(10**9)
    for field, value in [("email", email), ("display_name", "Bench"), ("password", "a bench password"),
                         ("password_confirmation", "a bench password")]:
        driver.find_element(By.ID, field).send_keys(value)
    driver.find_element(By.CSS_SELECTOR, "form.stacked button[type=submit]").click()
    time.sleep(1)

    # Page weight: what a first visit downloads for the map page itself (data cells excluded).
    cookie = "; ".join("%s=%s" % (c["name"], c["value"]) for c in driver.get_cookies())
    total = 0
    rows = []
    # Every module counts: app.js and the modules it imports, followed.
    paths = ["/", "/css/app.css", "/js/app.js"]
    for path in paths:
        request = urllib.request.Request(base + path, headers={"Cookie": cookie, "Accept-Encoding": "gzip"})
        with urllib.request.urlopen(request) as response:
            body = response.read()
            gzipped = response.headers.get("Content-Encoding") == "gzip"
            size = len(body) if gzipped else len(gzip.compress(body))
        if path.endswith(".js"):
            text = (gzip.decompress(body) if gzipped else body).decode()
            paths += ["/js/" + m for m in re.findall(r'from "\./([\w.-]+\.js)"', text) if "/js/" + m not in paths]
        rows.append((path, size))
        total += size
    print("Map page weight (gzipped):")
    for path, size in rows:
        print("  %-16s %6.1f KB" % (path, size / 1024))
    print("  %-16s %6.1f KB   (budget 30 KB)" % ("total", total / 1024))

    # 1,000 pins around Europe, where the saved region will be (or around the vector view).
    user_id = subprocess.check_output(["psql", database_url, "-At", "-c",
                                       "SELECT id FROM users WHERE email = '%s'" % email]).decode().strip()
    lat0, lon0, zoom0, span_lat, span_lon = (35, -10, 4.5, 25, 40) if not vector_view else \
        (vector_view[0] - 0.012, vector_view[1] - 0.025, vector_view[2], 0.024, 0.05)
    center_lat, center_lon = (48, 10) if not vector_view else (vector_view[0], vector_view[1])
    subprocess.check_call(["psql", database_url, "-q", "-c", """
        INSERT INTO pins (user_id, lat, lon, place_name)
        SELECT %s, %f + random() * %f, %f + random() * %f, 'Bench pin ' || g FROM generate_series(1, 1000) g;
        INSERT INTO map_regions (user_id, center_lat, center_lon, zoom) VALUES (%s, %f, %f, %f)
        ON CONFLICT (user_id) DO UPDATE SET center_lat = EXCLUDED.center_lat, center_lon = EXCLUDED.center_lon, zoom = EXCLUDED.zoom;
        """ % (user_id, lat0, span_lat, lon0, span_lon, user_id, center_lat, center_lon, zoom0)])

    driver.get(base + "/")
    for _ in range(100):
        ready = "vectorTiles" if vector_view else "basemap"
        if driver.execute_script("return document.getElementById('map').dataset.%s === 'ready'" % ready):
            break
        time.sleep(0.1)
    timing = driver.execute_script("""
        const m = window.virtualTourist.map;
        const nav = performance.getEntriesByType('navigation')[0];
        return { firstFrame: m.firstFrameAt, basemapReady: m.basemapReadyAt, domContentLoaded: nav.domContentLoadedEventEnd };
    """)
    print("Time from navigation start: DOMContentLoaded %.0f ms, first map frame %.0f ms, basemap complete %.0f ms"
          % (timing["domContentLoaded"], timing["firstFrame"], timing["basemapReady"] or -1))

    # Pan for 3 seconds, one step per animation frame, and record the frame-to-frame times.
    deltas = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const m = window.virtualTourist.map;
        const deltas = [];
        let last = null;
        const end = performance.now() + 3000;
        function step(now) {
          if (last !== null) deltas.push(now - last);
          last = now;
          // Back and forth, so the pins stay in view the whole time.
          const dir = Math.floor(deltas.length / 40) % 2 ? -1 : 1;
          m.panBy(dir * 8, dir * 2);
          if (now < end) requestAnimationFrame(step); else done(deltas);
        }
        requestAnimationFrame(step);
    """)
    deltas.sort()
    pins_drawn = driver.execute_script("return document.getElementById('map').dataset.pinsDrawn")
    stats = driver.execute_script("return window.virtualTourist.map.stats()")
    print(("Over vector tiles at zoom %g: " % vector_view[2] if vector_view else "") + "Panning with 1,000 pins (%s in view at the end): %d frames, frame interval median %.1f ms, p95 %.1f ms; "
          "draw time median %.1f ms, p95 %.1f ms (60 fps = 16.7 ms)"
          % (pins_drawn, len(deltas), deltas[len(deltas) // 2], deltas[int(len(deltas) * 0.95)],
             stats["medianDrawMs"], stats["p95DrawMs"]))
finally:
    driver.quit()
