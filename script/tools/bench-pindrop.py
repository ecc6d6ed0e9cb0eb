#!/usr/bin/env python3
"""script/bench pindrop: the time from a pin drop to the first thumbnail painted on screen, in
headless Chromium (Selenium), against a running app whose provider is photo-fixture.

A signed-up person drops a pin the keyboard way (Enter on the focused map drops one at the centre
crosshair, Public/js/app.js); as soon as POST /pins answers, the page opens the pin's album (what
"Open album" does, with no time spent reading the card), and the clock stops when the album's
first photo is painted (its Element Timing render time; the frame after the image's load event
where that is missing). Every time is read on the page's own clock (performance.timeOrigin +
performance.now(), wall-clock milliseconds that carry across the navigation) and lined up with the
server's log (LOG_LEVEL=debug: the album worker's stages, stamped to the millisecond by the same
machine's clock). Prints each drop, then the median and p90 of the whole and of every stage.

The first drop after start-up is a warm-up, shown but not counted: it pays for loading the place
index (the pin's name) and opening the connections to the provider, once per process.

With a second app (script/bench pindrop BEFORE=<rev>: that revision's app, its own database, store
and Public/), each app has a browser of its own (a session cookie is per host, not per port) and
the two take turns drop by drop, the first of each pair alternating, so both see the same machine;
then one table with both.

Usage: bench-pindrop.py DROPS NAME BASE_URL SERVER_LOG [NAME BASE_URL SERVER_LOG]
"""
import calendar, os, random, re, sys, tempfile, time

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

drops = int(sys.argv[1])
sides = [{"name": sys.argv[i], "base": sys.argv[i + 1], "log": sys.argv[i + 2], "results": []}
         for i in range(2, len(sys.argv) - 2, 3)]

# The browser set-up and wait loop are the journey tests' (Tests/Browser/journey.py), which reads
# its BASE_URL and screenshot folder from the command line when imported.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Tests", "Browser"))
argv, sys.argv = sys.argv, [sys.argv[0], sides[0]["base"], tempfile.mkdtemp(prefix="bench-pindrop-")]
import journey  # noqa: E402
sys.argv = argv

# Runs in every document before the page's own scripts (CDP; not subject to the page's CSP).
# The map page: marks the drop at the Enter keydown (capture phase, before app.js hears it) and
# opens the album when POST /pins answers. The album page: notes the event stream and the first
# photo painted. Everything goes to sessionStorage["pindrop"], which survives the navigation.
INSTRUMENT = r"""
(() => {
  const now = () => performance.timeOrigin + performance.now();
  const read = () => JSON.parse(sessionStorage.getItem("pindrop") || "{}");
  const note = (key, value) => { const s = read(); if (s[key] === undefined) { s[key] = value; sessionStorage.setItem("pindrop", JSON.stringify(s)); } };
  const append = (key, value) => { const s = read(); (s[key] = s[key] || []).push(value); sessionStorage.setItem("pindrop", JSON.stringify(s)); };
  if (location.pathname === "/") {
    addEventListener("keydown", (e) => {
      if (!window.pindropArmed || e.key !== "Enter") return;
      window.pindropArmed = false;
      sessionStorage.setItem("pindrop", JSON.stringify({ drop: now() }));
    }, true);
    const fetchOriginal = window.fetch;
    window.fetch = async (url, init) => {
      const dropping = url === "/pins" && init && init.method === "POST" && read().drop;
      if (dropping) note("postStart", now());
      const response = await fetchOriginal(url, init);
      if (dropping && response.ok) {
        const pin = await response.clone().json();
        note("saved", now());
        note("pin", pin.id);
        location.assign(`/pins/${pin.id}`);
      }
      return response;
    };
    return;
  }
  const match = location.pathname.match(/^\/pins\/(\d+)$/);
  if (!match || String(read().pin) !== match[1] || read().painted) return;
  const Original = window.EventSource;
  window.EventSource = class extends Original {
    constructor(...args) {
      super(...args);
      note("streamCreated", now());
      this.addEventListener("open", () => note("streamOpen", now()));
      this.addEventListener("change", () => append("changes", now()));
    }
  };
  const seen = new WeakSet();
  const watch = (img) => {
    if (seen.has(img)) return;
    seen.add(img);
    img.setAttribute("elementtiming", "pindrop");
    note("imgInserted", now());
    const loaded = () => {
      if (!(img.naturalWidth > 0)) return;
      note("loaded", now());
      requestAnimationFrame(() => setTimeout(() => note("framed", now()), 0));
    };
    if (img.complete) loaded(); else img.addEventListener("load", loaded);
  };
  new MutationObserver(() => document.querySelectorAll("#photo-grid img").forEach(watch))
    .observe(document, { childList: true, subtree: true });
  try {
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        const at = entry.renderTime || entry.loadTime;
        if (at) note("painted", performance.timeOrigin + at);
      }
    }).observe({ type: "element", buffered: true });
  } catch { /* no Element Timing: "framed" stands in */ }
})();
"""


def server_stages(server_log):
    """pin id → {stage: epoch ms} from the album worker's debug lines (first of each stage)."""
    stages = {}
    line = re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d{3})Z debug albums: pin (\d+): ([a-z ]+?)(?: \(|$)")
    with open(server_log) as f:
        for text in f:
            m = line.match(text.strip())
            if not m:
                continue
            y, mo, d, h, mi, s, ms = (int(v) for v in m.groups()[:7])
            at = calendar.timegm((y, mo, d, h, mi, s)) * 1000 + ms
            stages.setdefault(int(m.group(8)), {}).setdefault(m.group(9), at)
    return stages


def percentile(values, q):
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, int(round(q * (len(ordered) - 1)))))
    return ordered[index]


def median(values):
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return float("nan")
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


def sign_up(side):
    driver = side["driver"]
    driver.delete_all_cookies()
    driver.get(side["base"] + "/sign-up")
    email = "pindrop-%d@example.org" % random.randrange(10**9)
    for field, value in [("email", email), ("display_name", "Bench"), ("password", "a bench password"),
                         ("password_confirmation", "a bench password")]:
        driver.find_element(By.ID, field).send_keys(value)
    driver.find_element(By.CSS_SELECTOR, "form.stacked button[type=submit]").click()
    journey.wait(driver, lambda: driver.find_elements(By.ID, "map-canvas"), message="the map page")


def drop(side, n):
    """Drop n (0: the warm-up) on one side's app: its timings on the page's clock."""
    driver = side["driver"]
    # A new person every six drops: a person's live album pages are capped at eight, and the
    # server counts a page's stream until its next heartbeat (15 s) finds it closed, so drops
    # a few seconds apart ran into the cap and their pages fell back to polling every 2 s.
    if n % 6 == 0:
        sign_up(side)
    else:
        driver.get(side["base"] + "/")
    # The map settled (its basemap drawn, a quiet frame) before the drop, as when a person has
    # found the place: the drop is timed, not the map's loading.
    journey.wait(driver, lambda: driver.execute_script("return document.getElementById('map')?.dataset.basemap === 'ready'"), message="the map")
    driver.execute_async_script("const done = arguments[0]; requestAnimationFrame(() => setTimeout(done, 200));")
    canvas = driver.find_element(By.ID, "map-canvas")
    driver.execute_script("arguments[0].focus(); window.pindropArmed = true;", canvas)
    canvas.send_keys(Keys.ENTER)
    journey.wait(driver, lambda: driver.execute_script("""
        const s = JSON.parse(sessionStorage.getItem('pindrop') || '{}');
        return s.pin && location.pathname === '/pins/' + s.pin && (s.painted || s.framed) ? s : null"""),
        timeout=30, message="the first thumbnail of drop %d" % n)
    # Let Element Timing report (it comes a frame after the paint) before reading the page's timings.
    time.sleep(0.15)
    state, timings = driver.execute_script("""
        const at = (t) => performance.timeOrigin + t;
        const nav = performance.getEntriesByType('navigation')[0];
        const fragments = performance.getEntriesByType('resource').filter(e => e.name.includes('/album.html'))
          .map(e => ({ start: at(e.startTime), end: at(e.responseEnd) }));
        const photo = performance.getEntriesByType('resource').find(e => /\\/photos\\/\\d+/.test(e.name));
        return [JSON.parse(sessionStorage.getItem('pindrop')), {
          navStart: at(0), pageResponse: at(nav.responseEnd), domContentLoaded: at(nav.domContentLoadedEventEnd),
          fragments, photoStart: photo && at(photo.startTime), photoEnd: photo && at(photo.responseEnd) }];""")
    state.update(timings)
    total = (state.get("painted") or state["framed"]) - state["drop"]
    print("    %s%s: pin %s, first thumbnail painted after %4.0f ms" % (side["name"] + " " if len(sides) > 1 else "",
          "drop %2d" % n if n else "warm-up", state["pin"], total), file=sys.stderr, flush=True)
    return state


# The table's rows in order: (label, where the time comes from, its key). "page": the page's record;
# "server": the worker's stage lines; None: worked out from the drop's events in stage_rows.
STAGES = [
    ("POST /pins sent (page)", "page", "postStart"),
    ("POST /pins answered (page)", "page", "saved"),
    ("  job claimed by a worker (server)", "server", "claimed"),
    ("  provider search answered (server)", "server", "searched"),
    ("  placeholders written (server)", "server", "placeholders written"),
    ("  first image downloaded (server)", "server", "first image downloaded"),
    ("  first image stored, thumbnails made (server)", "server", "first image stored"),
    ("  first photo row written + NOTIFY (server)", "server", "first photos written"),
    ("album page: navigation started", "page", "navStart"),
    ("album page: HTML answered", "page", "pageResponse"),
    ("album page: DOMContentLoaded", "page", "domContentLoaded"),
    ("album page: album.js runs (EventSource made)", "page", "streamCreated"),
    ("album page: event stream open", "page", "streamOpen"),
    ("  change event for the first photo", None, "firstPhotoEvent"),
    ("  album.html with the first photo answered", None, "fragmentAnswered"),
    ("  <img> inserted", "page", "imgInserted"),
    ("  GET /photos/:id sent", "page", "photoStart"),
    ("  GET /photos/:id answered", "page", "photoEnd"),
    ("  image loaded", "page", "loaded"),
    ("  the frame after the load (rAF + task)", "page", "framed"),
    ("first thumbnail painted", None, "end"),
]


def stage_rows(side):
    """label → [ms since the drop], every counted drop of one side, the server's stages from its log."""
    stages = server_stages(side["log"])
    rows = {label: [] for label, _, _ in STAGES}
    for s in side["results"]:
        server = stages.get(int(s["pin"]), {})
        end = s.get("painted") or s["framed"]
        written = server.get("first photos written")
        fetched = [f for f in s.get("fragments", []) if f["end"] <= s.get("imgInserted", end)]
        worked_out = {
            "firstPhotoEvent": next((t for t in s.get("changes") or [] if written and t >= written), None),
            "fragmentAnswered": fetched[-1]["end"] if fetched else None,
            "end": end,
        }
        for label, where, key in STAGES:
            t = (s if where == "page" else server if where == "server" else worked_out).get(key)
            if t is not None:
                rows[label].append(t - s["drop"])
    return rows


def cell(values, drops):
    """"median p90", and of how many drops when not all of them had the stage."""
    if not values:
        return "%13s" % "-"
    text = "%6.0f %6.0f" % (median(values), percentile(values, 0.9))
    return text + ("" if len(values) == drops else " (%d/%d)" % (len(values), drops))


try:
    for side in sides:
        side["driver"] = journey.browser()
        side["driver"].execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": INSTRUMENT})
    for n in range(drops + 1):
        # Turns: the first of each pair alternates, so neither side always follows the other.
        for side in (sides if n % 2 == 0 else sides[::-1]):
            state = drop(side, n)
            if n:
                side["results"].append(state)

    # The server's stages (LOG_LEVEL=debug) on the same clock.
    time.sleep(0.5)
    rows = [stage_rows(side) for side in sides]
    for side, r in zip(sides, rows):
        totals = r["first thumbnail painted"]
        print("Pin drop to first thumbnail painted%s: %d drops, median %.0f ms, p90 %.0f ms (best %.0f ms, worst %.0f ms)"
              % (" (%s)" % side["name"] if len(sides) > 1 else "", len(totals), median(totals), percentile(totals, 0.9), min(totals), max(totals)))
    print("Stages, ms after the drop (median p90; the server's from its log, LOG_LEVEL=debug):")
    print("  %-48s %s" % ("", "".join("%-22s" % ("%13s" % side["name"]) for side in sides)))
    for label in rows[0]:
        print("  %-48s %s" % (label, "".join("%-22s" % cell(r.get(label, []), len(side["results"])) for side, r in zip(sides, rows))))
    sys.stdout.flush()
finally:
    for side in sides:
        if "driver" in side:
            side["driver"].quit()
