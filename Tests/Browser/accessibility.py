#!/usr/bin/env python3
"""Every page in every state through axe-core, in the light and the dark theme, then reflow at
320 px and at 200 % text. script/test runs it after the journey, against the same app:

    accessibility.py BASE_URL SCREENSHOT_DIR DATABASE_URL

axe.min.js comes from the axe-playwright-python wheel (installed by script/test; only the file is
used, injected through Selenium, so Playwright itself is not needed). A page passes with no
critical and no serious violation; every violation is printed by page, theme and impact, so the
output is the before/after record. DATABASE_URL lets the test put an album into the failed state,
which the photo fixture cannot be asked for from outside.
"""
import importlib.util, json, os, subprocess, sys, time

sys.path.insert(0, os.path.dirname(__file__))
import journey as j  # noqa: E402  (same BASE and SCREENSHOT_DIR arguments)
import share  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

BASE, SHOTS, DATABASE_URL = sys.argv[1], sys.argv[2], sys.argv[3]
spec = importlib.util.find_spec("axe_playwright_python")
AXE = open(os.path.join(os.path.dirname(spec.origin), "axe.min.js"), encoding="utf-8").read()
LONG_TITLE = "W" * 300
failures = []


def psql(sql):
    subprocess.run(["psql", DATABASE_URL, "-qAtc", sql], check=True, capture_output=True)


def theme(driver, scheme):
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]})


def axe(driver):
    """axe-core's violations on the current page: [(impact, rule id, how many nodes)]."""
    if not driver.execute_script("return !!window.axe"):
        driver.execute_script(AXE)
    result = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']}).then(r => done(r.violations.map("
        "  v => [v.impact || 'minor', v.id, v.nodes.length, v.nodes.slice(0, 2).map(n => n.target.join(' '))])))"
        ".catch(e => done([['critical', 'axe-error: ' + e, 0, []]]));")
    return result


def record(label, scheme, violations):
    counts = {k: 0 for k in ("critical", "serious", "moderate", "minor")}
    for impact, *_ in violations:
        counts[impact] = counts.get(impact, 0) + 1
    details = "; ".join("%s %s×%d %s" % (impact, rule, n, targets) for impact, rule, n, targets in violations)
    print("    %-34s %-5s critical %d  serious %d  moderate %d  minor %d  %s" % (
        label, scheme, counts["critical"], counts["serious"], counts["moderate"], counts["minor"], details), flush=True)
    if counts["critical"] or counts["serious"]:
        failures.append("%s (%s): %s" % (label, scheme, details))


def import_pages(driver):
    """The import form with a refused file (recorded here, light and dark), then a preview of a
    real file, whose address is returned for the page list."""
    def upload(name, ready):
        driver.get(BASE + "/import")
        path = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "Fixtures", "import", name))
        driver.find_element(By.ID, "import-file").send_keys(path)
        driver.find_element(By.CSS_SELECTOR, "form.stacked button[type=submit]").click()
        j.wait(driver, lambda: driver.find_elements(By.ID, ready), message="import of " + name)
    upload("gpxpy-route.gpx", "import-error")  # a route: no waypoints, refused
    for scheme in ("light", "dark"):
        theme(driver, scheme)
        record("import, file refused", scheme, axe(driver))
    theme(driver, "light")
    upload("gpxpy-unicode.gpx", "import-confirm")
    return driver.current_url[len(BASE):]


def check_all_states(driver, pages):
    for scheme in ("light", "dark"):
        theme(driver, scheme)
        for label, url, ready in pages:
            driver.get(BASE + url)
            if ready:
                # Fifty albums queue behind one worker pair: the last ones take a while.
                j.wait(driver, lambda: ready(driver), timeout=120, message=label)
            record(label, scheme, axe(driver))
            if scheme == "dark" and label.startswith("map"):
                j.shot(driver, "dark-" + label.replace(" ", "-"))


# Every element of the header whose box reaches past the viewport's edges: the page's own width
# missed the header that was 325 px wide at 320 px (the 12-character name, Sign out).
HEADER_OUTSIDE = """
  const width = arguments[0], out = [];
  for (const el of document.querySelectorAll('.site-header, .site-header *')) {
    const r = el.getBoundingClientRect();
    if (r.width > 0 && (r.right > width + 0.5 || r.left < -0.5))
      out.push(el.tagName.toLowerCase() + '.' + (el.getAttribute('class') || '') + ' ' + Math.round(r.left) + '..' + Math.round(r.right) + ' px');
  }
  return out;
"""


def reflow(driver, pages):
    """WCAG 1.4.10: no horizontal scrolling at 320 CSS px, nor at 200 % text; nothing of the header
    past the screen's edge."""
    for width, font in ((320, 16), (640, 32)):
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": width, "height": 800, "deviceScaleFactor": 1, "mobile": True})
        # The browser's own text-size setting, as a person sets it: pages must follow it (rem).
        driver.execute_cdp_cmd("Page.setFontSizes", {"fontSizes": {"standard": font, "fixed": font}})
        for label, url, ready in pages:
            driver.get(BASE + url)
            if ready:
                j.wait(driver, lambda: ready(driver), message=label)
            wide = driver.execute_script("return document.documentElement.scrollWidth")
            text = driver.execute_script("return parseFloat(getComputedStyle(document.body).fontSize)")
            if text < font * 0.95:
                failures.append("%s: body text is %.0f px with the browser's text size at %d px" % (label, text, font))
            outside = driver.execute_script(HEADER_OUTSIDE, width)
            ok = wide <= width and not outside
            print("    %-34s %4d px, %d px text: page %d px wide%s" % (
                label, width, font, wide, "" if ok else "  TOO WIDE " + "; ".join(outside)))
            if wide > width:
                failures.append("%s at %d px with %d px text is %d px wide" % (label, width, font, wide))
            if outside:
                failures.append("%s at %d px with %d px text: header past the edge: %s" % (label, width, font, "; ".join(outside)))
            if width == 320 and label == "map with 50 pins":
                j.shot(driver, "map-320px")
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    driver.execute_cdp_cmd("Page.setFontSizes", {"fontSizes": {"standard": 16, "fixed": 13}})


LONG_NAME = "Maximiliane Wilhelmina Theodora Habsburg"  # 40 characters (a person can choose 100)


def long_name(driver, email, pages):
    """A 40-character display name: cut with an ellipsis in the header, whole in its title."""
    assert len(LONG_NAME) == 40
    psql("UPDATE users SET display_name = '%s' WHERE email = '%s'" % (LONG_NAME, email))
    print("  reflow with a 40-character name:")
    reflow(driver, [page for page in pages if page[0] in ("map with 50 pins", "album failed", "error page, signed in")])
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 320, "height": 800, "deviceScaleFactor": 1, "mobile": True})
    driver.get(BASE + "/")
    title, cut = driver.execute_script(
        "const who = document.querySelector('.site-header .who');"
        "return [who.getAttribute('title') || '', who.scrollWidth > who.clientWidth];")
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    print("    the name at 320 px: cut with an ellipsis: %s; title %r" % (cut, title))
    if not cut or LONG_NAME not in title:
        failures.append("at 320 px the 40-character name is not cut, or its title lacks it: %s, %r" % (cut, title))
    psql("UPDATE users SET display_name = 'Ada Lovelace' WHERE email = '%s'" % email)


def exports(driver):
    """The pin exports are plain links under the list: Tab reaches each with a visible ring, and
    each is an attachment of the person's pins."""
    print("  pin exports:")
    try:
        driver.get(BASE + "/")
        j.wait(driver, lambda: j.data(driver, "basemap") == "ready", message="the basemap")
        # The script folds the pin list away on the map; Enter on its summary opens it.
        tab_to(driver, "#pin-list-details > summary", limit=400)
        if not driver.execute_script("return document.getElementById('pin-list-details').open"):
            keys(driver, Keys.ENTER)
        for kind in ("geojson", "gpx", "kml"):
            selector = "#pin-exports a[href='/pins.%s']" % kind
            tab_to(driver, selector, limit=400)
            contrast = ring_visible(driver, "export " + kind)
            status, disposition, size = driver.execute_async_script(
                "const done = arguments[arguments.length - 1];"
                "fetch(document.activeElement.href).then(async r => done([r.status, r.headers.get('Content-Disposition'),"
                " (await r.arrayBuffer()).byteLength]), e => done([0, String(e), 0]));")
            print("    %-8s Tab reaches it (ring %.1f:1); %d, %s, %d bytes" % (kind, contrast, status, disposition, size))
            assert status == 200 and (disposition or "").startswith("attachment;"), "export %s: %s %s" % (kind, status, disposition)
    except AssertionError as error:
        failures.append(str(error))


def album_zip(driver, pin_id):
    """The album's zip is a plain link among the album's actions: Tab reaches it with a visible
    ring, and it is a zip attachment."""
    print("  album zip:")
    try:
        driver.get(BASE + "/pins/%d" % pin_id)
        j.wait_album_ready(driver)
        tab_to(driver, "a[href='/pins/%d/album.zip']" % pin_id, limit=60)
        contrast = ring_visible(driver, "Download album (zip)")
        status, disposition, kind, magic, size = driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "fetch(document.activeElement.href).then(async r => { const b = new Uint8Array(await r.arrayBuffer());"
            " done([r.status, r.headers.get('Content-Disposition'), r.headers.get('Content-Type'), b[0] * 256 + b[1], b.length]); },"
            " e => done([0, String(e), '', 0, 0]));")
        print("    Tab reaches it (ring %.1f:1); %d, %s, %s, %d bytes" % (contrast, status, kind, disposition, size))
        assert status == 200 and (disposition or "").startswith("attachment;") and kind == "application/zip" and magic == 0x504B, \
            "album zip: %s %s %s %x" % (status, kind, disposition, magic)
    except AssertionError as error:
        failures.append(str(error))


# ----- the keyboard-only journey -----

FOCUS_RING = """
  const el = document.activeElement;
  const parse = (c) => (c.match(/[\\d.]+/g) || []).slice(0, 4).map(Number);
  const lum = (rgb) => { const [r, g, b] = rgb.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
                         return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const behind = (node) => { for (; node; node = node.parentElement) { const c = parse(getComputedStyle(node).backgroundColor);
                             if (c.length >= 3 && (c.length < 4 || c[3] > 0.5)) return c.slice(0, 3); } return [255, 255, 255]; };
  const style = getComputedStyle(el);
  let colour = null;
  if (style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) >= 2) colour = parse(style.outlineColor).slice(0, 3);
  else if (style.boxShadow && style.boxShadow !== 'none') colour = parse(style.boxShadow).slice(0, 3);
  if (!colour) return {ring: false, id: el.id, tag: el.tagName};
  // The ring sits outside the element (outline-offset) on its parent's background, or inside it.
  const around = style.outlineOffset && parseFloat(style.outlineOffset) < 0 ? behind(el) : behind(el.parentElement);
  const a = lum(colour), b = lum(around);
  return {ring: true, contrast: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05), id: el.id, tag: el.tagName};
"""


def keys(driver, *sequence):
    """Key presses to whatever has focus: no pointer event of any kind."""
    ActionChains(driver).send_keys(*sequence).perform()


def focused(driver, selector):
    return driver.execute_script("return document.activeElement.matches(arguments[0])", selector)


def tab_to(driver, selector, limit=100, backwards=False):
    for _ in range(limit):
        if focused(driver, selector):
            return
        keys(driver, (Keys.SHIFT + Keys.TAB) if backwards else Keys.TAB)
    raise AssertionError("Tab never reached " + selector)


def ring_visible(driver, where):
    info = driver.execute_script(FOCUS_RING)
    assert info["ring"], "%s: no visible focus ring on %s#%s" % (where, info["tag"], info["id"])
    assert info["contrast"] >= 3, "%s: focus ring contrast %.2f on %s#%s" % (where, info["contrast"], info["tag"], info["id"])
    return info["contrast"]


def map_at_rest(driver):
    """The view stops changing (a flight or zoom animation has ended)."""
    j.at_rest(driver)


def keyboard_journey(driver):
    steps = []

    def step(name, check):
        with j.Step(driver, "keyboard: " + name):
            check()
            steps.append(name)

    email = "keys-%d@example.org" % int(time.time() * 1000)

    def sign_up():
        driver.get(BASE + "/sign-up")
        tab_to(driver, "#email")
        ring_visible(driver, "email field")
        keys(driver, email, Keys.TAB)
        assert focused(driver, "#display_name")
        keys(driver, "Kay", Keys.TAB)
        assert focused(driver, "#password")
        keys(driver, j.PASSWORD, Keys.TAB)
        assert focused(driver, "#password_confirmation")
        keys(driver, j.PASSWORD, Keys.ENTER)
        j.wait(driver, lambda: driver.find_elements(By.ID, "map-canvas"), message="the map page")
        j.wait(driver, lambda: j.data(driver, "basemap") == "ready", message="the basemap")
    step("sign up", sign_up)

    def search():
        tab_to(driver, "#place-search")
        ring_visible(driver, "place search")
        keys(driver, "Rome")
        j.wait(driver, lambda: driver.find_element(By.ID, "place-search").get_attribute("aria-expanded") == "true", message="suggestions")
        assert driver.find_element(By.ID, "place-search").get_attribute("aria-activedescendant")
        keys(driver, Keys.ENTER)
        j.wait(driver, lambda: focused(driver, "#map-canvas"), message="focus on the map")
        j.wait(driver, lambda: abs(j.view(driver)["viewLat"] - 41.9) < 0.5, message="the map at Rome")
        map_at_rest(driver)
        ring_visible(driver, "map canvas")
    step("search a place (focus moves to the map)", search)

    def drop():
        keys(driver, Keys.ENTER)
        j.wait(driver, lambda: j.pin_count(driver) == 1, message="a pin")
        j.wait(driver, lambda: "Pin dropped near" in driver.find_element(By.ID, "map-toast").text, message="the announcement")
        assert focused(driver, "#map-canvas")
        # The pin list panel (every pin as a link, for keyboards and screen readers) follows.
        title = driver.find_element(By.ID, "pin-list-title").get_attribute("textContent")
        assert title == "Your pins (1)", title
        assert len(driver.find_elements(By.CSS_SELECTOR, "#pins li a[href^='/pins/']")) == 1
    step("drop a pin with Enter at the centre", drop)

    def open_album():
        keys(driver, Keys.TAB)
        j.wait(driver, lambda: j.data(driver, "keyboardPin"), message="a pin in keyboard focus")
        said = driver.find_element(By.ID, "map-announcer").get_attribute("textContent")
        assert " of 1" in said, "the live region said: %r" % said
        keys(driver, Keys.ENTER)
        j.wait(driver, lambda: focused(driver, "#pin-card a.primary"), message="focus on Open album")
        ring_visible(driver, "Open album")
        keys(driver, Keys.ENTER)
        j.wait(driver, lambda: driver.find_elements(By.ID, "album"), message="the album page")
        j.wait_album_ready(driver)
    step("Tab to the pin, Enter, Enter: its album", open_album)

    def remove_photo():
        before = len(j.album_ids(driver))
        tab_to(driver, "#edit-toggle")
        ring_visible(driver, "Edit")
        keys(driver, Keys.ENTER)
        tab_to(driver, ".photo .remove button", limit=6)
        ring_visible(driver, "Remove")
        keys(driver, Keys.ENTER)
        j.wait(driver, lambda: len(j.album_ids(driver)) == before - 1, message="the photo removed")
        j.wait(driver, lambda: focused(driver, ".photo .remove button"), timeout=5, message="focus on the next photo's Remove")
    step("remove a photo (focus to the next one)", remove_photo)

    def new_collection():
        before = set(j.album_ids(driver))
        tab_to(driver, "#new-collection", backwards=True)
        keys(driver, Keys.ENTER)
        j.wait(driver, lambda: focused(driver, "#album-status"), message="focus on the album's status")
        # Focus moves when the POST is answered, before the page has fetched the new collection:
        # the old one still says "ready" then, and its tiles are about to be replaced (a tile
        # focused meanwhile is removed, and Enter on it opens nothing). Wait for the new tiles.
        j.wait(driver, lambda: not set(j.album_ids(driver) or before) & before, message="the new collection's tiles")
        j.wait_album_ready(driver)
    step("New Collection (focus to the status it announces)", new_collection)

    def through_time():
        # The strip, which album.js fetches after the page is drawn; the 1950s (the 11th decade
        # from the 1850s) has photos at the fixture's every place.
        fifties = ".decade-strip li:nth-child(11) button"
        j.wait(driver, lambda: driver.find_elements(By.CSS_SELECTOR, fifties), timeout=30, message="the strip of decades")
        name = driver.find_element(By.CSS_SELECTOR, fifties).get_attribute("textContent")
        assert name.startswith("1950s") and "photo" in name, "the button reads %r" % name
        # Below the photos: after Edit, Tab goes to the photos first, the strip after them.
        tab_to(driver, fifties)
        ring_visible(driver, "the 1950s")
        keys(driver, Keys.ENTER)
        j.wait(driver, lambda: "taken in the 1950s" in driver.find_element(By.ID, "album-page-info").get_attribute("textContent"),
               message="an album of the 1950s")
        j.wait_album_ready(driver)
        j.wait(driver, lambda: driver.find_elements(By.CSS_SELECTOR, ".decade-strip li.current button[aria-current=true]"),
               timeout=30, message="the 1950s marked current")
        j.shot(driver, "era-album-1950s-" + driver.execute_script(
            "return matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light'"))
        tab_to(driver, "#then-and-now-link")
        keys(driver, Keys.ENTER)
        j.wait(driver, lambda: "/then-and-now" in driver.current_url, message="then and now")
        assert driver.find_elements(By.CSS_SELECTOR, ".pair figure.then figcaption strong"), "pairs, each side named in its caption"
        assert all(i.get_attribute("alt") for i in driver.find_elements(By.CSS_SELECTOR, ".pair img")), "every photo has an alt text"
        tab_to(driver, "#then-era")
        keys(driver, Keys.ARROW_DOWN)
        tab_to(driver, ".then-now-form button")
        ring_visible(driver, "Show")
        keys(driver, Keys.ENTER)
        j.wait(driver, lambda: "then=19" in driver.current_url, message="then and now of another decade")
        tab_to(driver, ".breadcrumbs a", backwards=True)
        keys(driver, Keys.ENTER)
        j.wait(driver, lambda: driver.find_elements(By.ID, "album"), message="back to the album")
        j.wait_album_ready(driver)
    step("choose the 1950s from the strip, then and now, back (keys only)", through_time)

    def full_screen():
        tab_to(driver, ".photo a")
        ring_visible(driver, "photo tile")
        keys(driver, Keys.ENTER)
        j.wait(driver, lambda: "/view" in driver.current_url, message="the photo page")
        first = driver.current_url
        keys(driver, Keys.ARROW_RIGHT)
        j.wait(driver, lambda: driver.current_url != first and "/view" in driver.current_url, message="the next photo")
    step("open a photo full screen and step to the next", full_screen)

    def delete_pin():
        tab_to(driver, "a.brand", backwards=True)
        keys(driver, Keys.ENTER)
        j.wait(driver, lambda: driver.find_elements(By.ID, "map-canvas"), message="the map page")
        j.wait(driver, lambda: j.data(driver, "basemap") == "ready", message="the basemap")
        tab_to(driver, "#map-canvas")
        map_at_rest(driver)
        keys(driver, Keys.TAB)
        j.wait(driver, lambda: j.data(driver, "keyboardPin"), message="the pin in keyboard focus")
        keys(driver, Keys.DELETE)
        j.wait(driver, lambda: focused(driver, "#pin-card button.danger"), message="focus on Delete")
        ring_visible(driver, "Delete")
        keys(driver, Keys.ENTER)
        j.wait(driver, lambda: j.pin_count(driver) == 0, message="the pin deleted")
        assert focused(driver, "#map-canvas"), "focus back on the map"
        j.wait(driver, lambda: driver.find_element(By.ID, "pin-list-title").get_attribute("textContent") == "Your pins (0)",
               message="the pin list in step")
    step("delete the pin (Tab, Delete, Enter)", delete_pin)
    print("    keyboard journey steps passed: %d of 9" % len(steps))
    if len(steps) < 9:
        failures.append("keyboard journey: %d of 9 steps passed" % len(steps))
        failures.extend(j.failures)


def share_keyboard(path):
    """A visitor without an account, keyboard only: a photo full screen, the arrow keys, Escape."""
    visitor = j.browser()
    try:
        for scheme in ("light", "dark"):
            theme(visitor, scheme)
            visitor.get(BASE + path)
            try:
                tab_to(visitor, ".photo a")
                ring_visible(visitor, "shared photo tile")
                keys(visitor, Keys.ENTER)
                j.wait(visitor, lambda: "/view" in visitor.current_url, message="the photo page")
                first = visitor.current_url
                keys(visitor, Keys.ARROW_RIGHT)
                j.wait(visitor, lambda: visitor.current_url != first and "/view" in visitor.current_url, message="the next photo")
                keys(visitor, Keys.ARROW_LEFT)
                j.wait(visitor, lambda: visitor.current_url == first, message="the previous photo")
                keys(visitor, Keys.ESCAPE)
                j.wait(visitor, lambda: visitor.current_url == BASE + path, message="back to the album")
                print("    shared album by keyboard (%s): photo, arrows, Escape" % scheme)
            except Exception as error:  # noqa: BLE001  (reported with the others)
                failures.append("shared album by keyboard (%s): %s" % (scheme, error))
    finally:
        visitor.quit()


def forced_colours(driver):
    """Windows high contrast (forced-colors: active): focus stays visible on fields, buttons and
    the map, and pins keep their own colours (a canvas is not recoloured)."""
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "forced-colors", "value": "active"}]})
    try:
        outline = "const s = getComputedStyle(document.activeElement); return [s.outlineStyle, parseFloat(s.outlineWidth)]"
        driver.get(BASE + "/")
        for selector in ("#map-canvas", "#place-search", "#zoom-in"):
            tab_to(driver, selector)
            style, width = driver.execute_script(outline)
            assert style != "none" and width >= 2, "forced colours: no focus ring on %s (%s %s)" % (selector, style, width)
        print("    forced colours: focus rings visible")
    except AssertionError as error:
        failures.append(str(error))
    finally:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "forced-colors", "value": "none"}]})


def main():
    driver = j.browser()
    try:
        for scheme in ("light", "dark"):
            print("  keyboard only (%s):" % scheme)
            theme(driver, scheme)
            keyboard_journey(driver)
            driver.delete_all_cookies()
        theme(driver, "light")
        signed_out = [
            ("sign-in", "/sign-in", None),
            ("sign-up", "/sign-up", None),
            ("forgot password", "/forgot-password", None),
            ("error page, signed out", "/no-such-page", None),
        ]
        for scheme in ("light", "dark"):
            theme(driver, scheme)
            for label, url, _ in signed_out:
                driver.get(BASE + url)
                record(label, scheme, axe(driver))
            # Forms with their errors showing.
            driver.get(BASE + "/sign-up")
            driver.find_element(By.CSS_SELECTOR, "form.stacked button[type=submit]").click()
            j.wait(driver, lambda: driver.find_elements(By.CSS_SELECTOR, ".field-error, [role=alert], .error"), message="sign-up errors")
            record("sign-up with errors", scheme, axe(driver))
            driver.get(BASE + "/sign-in")
            driver.find_element(By.ID, "email").send_keys("nobody-%d@example.org" % int(time.time() * 1000))
            driver.find_element(By.ID, "password").send_keys("not the password")
            driver.find_element(By.CSS_SELECTOR, "form.stacked button[type=submit]").click()
            j.wait(driver, lambda: "do not match" in driver.page_source, message="sign-in error")
            record("sign-in with an error", scheme, axe(driver))
        theme(driver, "light")

        email = "a11y-%d@example.org" % int(time.time() * 1000)
        # Twelve characters: the name that made the header 325 px wide at 320 px.
        j.sign_up(driver, email, "Ada Lovelace")
        forced_colours(driver)
        record("map with 0 pins", "light", axe(driver))
        theme(driver, "dark")
        driver.get(BASE + "/")
        record("map with 0 pins", "dark", axe(driver))
        theme(driver, "light")

        # Fifty pins, one of them with a 300-character unbroken title.
        ids = driver.execute_async_script("""
          const done = arguments[arguments.length - 1];
          const csrf = document.querySelector('[data-csrf]').dataset.csrf;
          (async () => {
            const ids = [];
            for (let i = 0; i < 50; i++) {
              const body = new URLSearchParams({lat: String(-40 + i * 1.5), lon: String(-100 + i * 4)});
              const r = await fetch('/pins', {method: 'POST', headers: {'X-CSRF-Token': csrf, Accept: 'application/json'}, body});
              ids.push((await r.json()).id);
            }
            return ids;
          })().then(done, e => done(String(e)));
        """)
        assert isinstance(ids, list), ids
        psql("UPDATE pins SET place_name = '%s' WHERE id = %d" % (LONG_TITLE, ids[0]))
        ready_id, failed_id = ids[1], ids[2]
        # An empty album: the fixture has no photos south of 60°S.
        empty_id = driver.execute_async_script("""
          const done = arguments[arguments.length - 1];
          const csrf = document.querySelector('[data-csrf]').dataset.csrf;
          fetch('/pins', {method: 'POST', headers: {'X-CSRF-Token': csrf, Accept: 'application/json'},
                          body: new URLSearchParams({lat: '-75', lon: '10'})}).then(r => r.json()).then(p => done(p.id));
        """)
        status = lambda i: (lambda d: d.find_element(By.ID, "album").get_attribute("data-status") in ("ready", "failed", "empty"))
        driver.get(BASE + "/pins/%d" % ready_id)
        j.wait_album_ready(driver)
        photo = driver.find_element(By.CSS_SELECTOR, "#album li[data-id]").get_attribute("data-id")
        psql("UPDATE photos SET title = '%s' WHERE id = %s" % (LONG_TITLE, photo))
        psql("UPDATE pins SET status = 'failed', error = 'The photos could not be downloaded. Try again in a while.', "
             "retryable = true WHERE id = %d" % failed_id)
        # A fresh pin for the loading state (the fixture answers after 0.3 s, so it is still loading).
        loading_url = driver.execute_async_script("""
          const done = arguments[arguments.length - 1];
          const csrf = document.querySelector('[data-csrf]').dataset.csrf;
          fetch('/pins', {method: 'POST', headers: {'X-CSRF-Token': csrf, Accept: 'application/json'},
                          body: new URLSearchParams({lat: '41.9', lon: '12.5'})}).then(r => r.json()).then(p => done('/pins/' + p.id));
        """)
        driver.get(BASE + loading_url)
        record("album loading", "light", axe(driver))

        # Pictures sized for where they show: the album's tiles against the photos they stand for.
        driver.get(BASE + "/pins/%d" % ready_id)
        j.wait_album_ready(driver)
        j.wait(driver, lambda: driver.execute_script(
            "return [...document.querySelectorAll('#photo-grid img')].filter(i => i.getBoundingClientRect().top < innerHeight)"
            ".every(i => i.complete && i.naturalWidth > 0)"), message="the visible tiles loaded")
        tiles, originals, count = driver.execute_async_script("""
          const done = arguments[arguments.length - 1];
          const loaded = performance.getEntriesByType('resource').filter(e => /\\/photos\\/\\d+\\?w=/.test(e.name));
          (async () => {
            let originals = 0;
            for (const e of loaded) {
              const id = e.name.match(/\\/photos\\/(\\d+)/)[1];
              originals += (await (await fetch('/photos/' + id, {cache: 'no-store'})).arrayBuffer()).byteLength;
            }
            return [loaded.reduce((sum, e) => sum + e.encodedBodySize, 0), originals, loaded.length];
          })().then(done, e => done([0, 0, String(e)]));
        """)
        print("    album page images: %d tiles, %d bytes; the same photos in full: %d bytes (%.0f %%)" % (
            count, tiles, originals, 100.0 * tiles / max(1, originals)))
        if not count or tiles > 0.25 * originals:
            failures.append("album tiles are %d bytes for %d photos of %d bytes: more than 25 %%" % (tiles, count, originals))

        import_preview = import_pages(driver)
        pages = [
            ("import", "/import", None),
            ("import preview", import_preview, None),
            ("map with 50 pins", "/", lambda d: j.data(d, "basemap") == "ready"),
            ("album ready (300-char title)", "/pins/%d" % ready_id, status(ready_id)),
            ("album empty", "/pins/%d" % empty_id, status(empty_id)),
            ("album failed", "/pins/%d" % failed_id, None),
            ("album with a long place name", "/pins/%d" % ids[0], None),
            ("picker", "/pins/%d/picker" % ready_id, None),
            ("album with its strip of decades", "/pins/%d" % ready_id,
             lambda d: d.find_elements(By.CSS_SELECTOR, ".decade-strip") and status(ready_id)(d)),
            ("decades, a page of their own", "/pins/%d/decades" % ready_id, None),
            ("then and now", "/pins/%d/then-and-now?then=1950s" % ready_id, None),
            ("when: the 1950s, without script", "/pins/%d/when?when=1950s" % ready_id, None),
            ("photo (300-char title)", "/photos/%s/view" % photo, None),
            ("error page, signed in", "/no-such-page", None),
        ]
        # Share links: the owner's list, and what a visitor sees (album, photo, password page).
        shared = share.make_share(driver, ready_id)
        locked = share.make_share(driver, ready_id, password=share.PASSWORD, hide=True)
        whole_map = share.make_share(driver, None)
        pages += [
            ("share links (owner)", "/pins/%d/shares" % ready_id, None),
            ("shared album (visitor)", shared, lambda d: share.images_loaded(d)),
            ("shared photo (visitor)", "%s/photos/%s/view" % (shared, photo), None),
            ("share password page", locked, None),
            ("shared map (visitor)", whole_map, lambda d: d.find_element(By.ID, "share-map").get_attribute("data-ready")),
        ]
        check_all_states(driver, pages)
        # For the record: the strip, an album of an era and then and now, as a person sees them.
        theme(driver, "light")
        visible_loaded = ("return [...document.querySelectorAll(arguments[0])].filter(i => i.getBoundingClientRect().top < innerHeight)"
                          ".every(i => i.complete && i.naturalWidth > 0)")
        driver.get(BASE + "/pins/%d/then-and-now?then=1950s" % ready_id)
        j.wait(driver, lambda: driver.execute_script(visible_loaded, ".pair img"), message="then and now's photos")
        j.shot(driver, "then-and-now")
        driver.get(BASE + "/pins/%d" % ready_id)
        j.wait(driver, lambda: driver.find_elements(By.CSS_SELECTOR, ".decade-strip"), message="the strip")
        driver.execute_script("document.getElementById('decades').scrollIntoView({block: 'end'})")
        j.wait(driver, lambda: driver.execute_script(visible_loaded, "#photo-grid img"), message="the photos above the strip")
        j.shot(driver, "album-strip-of-decades")
        share_keyboard(shared)
        print("  reflow:")
        reflow(driver, pages + signed_out[:2])
        long_name(driver, email, pages)
        exports(driver)
        album_zip(driver, ready_id)
        shared_map_pages(email)
    finally:
        driver.quit()
    report("accessibility: no critical or serious violations; no page wider than the screen")


def unreflow(driver):
    """Back to the desktop window and the browser's usual text size after reflow()."""
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    driver.execute_cdp_cmd("Page.setFontSizes", {"fontSizes": {"standard": 16, "fixed": 13}})


def maps_link_at_320(driver, label):
    """At 320 px the header still leads to /maps (the shared maps' list, their members): a link
    that is shown and inside the screen."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 320, "height": 800, "deviceScaleFactor": 1, "mobile": True})
    try:
        driver.get(BASE + "/")
        j.wait(driver, lambda: j.data(driver, "basemap") == "ready", message="the map at 320 px")
        box = driver.execute_script("""
          const a = document.querySelector('.site-header a[href="/maps"]');
          if (!a) return null;
          const r = a.getBoundingClientRect();
          return {shown: !!a.offsetParent && r.width > 0, left: r.left, right: r.right, text: a.textContent.trim()};
        """)
        ok = bool(box and box["shown"] and box["left"] >= -0.5 and box["right"] <= 320.5)
        print("    %-34s  320 px: the header's link to /maps %s" % (label, "shown (%r)" % box["text"] if ok else "MISSING %s" % box))
        if not ok:
            failures.append("%s at 320 px: no link to /maps in the header (%s)" % (label, box))
        j.shot(driver, "maps-header-320-" + "".join(c if c.isalnum() else "-" for c in label))
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def shared_map_pages(email):
    """Shared maps, light and dark: /maps with none and with one, a map's page as its owner (and
    the 201 answer that shows a new invitation link once), the invitation's join page, and as a
    viewer the map's page, the shared map (read-only) and an album on it; then reflow. An owner
    and a viewer in two browsers of their own (the owner's map shown is the shared one after)."""
    print("  shared maps:")
    owner, viewer = j.browser(), j.browser()
    try:
        j.sign_in(owner, email)
        check_all_states(owner, [("maps, none", "/maps", None)])
        maps_link_at_320(owner, "map, no shared map")
        theme(owner, "light")
        owner.get(BASE + "/maps")
        owner.find_element(By.ID, "new-map-name").send_keys("Ada’s club")
        owner.find_element(By.CSS_SELECTOR, "form[action='/maps'] button[type=submit]").click()
        j.wait(owner, lambda: owner.find_elements(By.CSS_SELECTOR, "li.member"), message="the new map's page")
        map_url = owner.current_url[len(BASE):]
        codes = []
        for scheme in ("light", "dark"):
            theme(owner, scheme)
            owner.get(BASE + map_url)
            owner.find_element(By.CSS_SELECTOR, "#invite-role option[value=viewer]").click()
            owner.find_element(By.CSS_SELECTOR, "form[action$='/invitations'] button[type=submit]").click()
            link = j.wait(owner, lambda: owner.find_element(By.CSS_SELECTOR, "input.copy-field").get_attribute("value"), message="the link")
            codes.append(link[link.index("/maps/join/"):])
            record("map page, new invitation (owner)", scheme, axe(owner))
        pin = owner.execute_async_script("""
          const done = arguments[arguments.length - 1];
          const csrf = document.querySelector('[data-csrf]') ? document.querySelector('[data-csrf]').dataset.csrf
                                                             : document.querySelector('input[name=_csrf]').value;
          fetch('/pins', {method: 'POST', headers: {'X-CSRF-Token': csrf, Accept: 'application/json'},
                          body: new URLSearchParams({lat: '48.8566', lon: '2.3522', _csrf: csrf})}).then(r => r.json()).then(p => done(p.id));
        """)
        j.sign_up(viewer, "a11y-viewer-%d@example.org" % int(time.time() * 1000), "Vic Viewer")
        join = [("join page (invitation)", codes[0], None)]
        check_all_states(viewer, join)
        reflow(viewer, join)
        unreflow(viewer)
        theme(viewer, "light")
        viewer.get(BASE + codes[0])
        viewer.find_element(By.CSS_SELECTOR, "form[action^='/maps/join/'] button[type=submit]").click()
        j.wait(viewer, lambda: j.data(viewer, "readOnly") == "true", message="the shared map, read-only")
        basemap = lambda d: j.data(d, "basemap") == "ready"
        album = lambda d: d.find_element(By.ID, "album").get_attribute("data-status") in ("ready", "failed", "empty")
        owner_pages = [
            ("maps, with a shared map", "/maps", None),
            ("map page (owner)", map_url, None),
            ("shared map (owner)", "/", basemap),
        ]
        viewer_pages = [
            ("map page (viewer)", map_url, None),
            ("shared map (viewer, read-only)", "/", basemap),
            ("album on a shared map (viewer)", "/pins/%s" % pin, album),
        ]
        check_all_states(owner, owner_pages)
        maps_link_at_320(owner, "shared map (owner)")
        maps_link_at_320(viewer, "shared map (viewer)")
        check_all_states(viewer, viewer_pages)
        print("  reflow, shared maps:")
        reflow(owner, owner_pages)
        reflow(viewer, viewer_pages)
    except Exception as error:  # noqa: BLE001  (reported with the others)
        failures.append("shared maps: %s" % error)
    finally:
        owner.quit()
        viewer.quit()


def report(passed):
    """The failures, and exit 1; or the line that says all passed."""
    if failures:
        print("\n%d accessibility failure(s):" % len(failures))
        for failure in failures:
            print("  ", failure)
        sys.exit(1)
    print(passed)


def setup_code_pages():
    """An instance with SIGN_UP=invite and no account yet: the sign-up page asks for the setup
    code the server logged; axe on it, empty and with its errors, light and dark."""
    driver = j.browser()
    try:
        for scheme in ("light", "dark"):
            theme(driver, scheme)
            driver.get(BASE + "/sign-up")
            if not driver.find_elements(By.ID, "setup_code") and "setup code" not in driver.page_source.lower():
                failures.append("the sign-up page of a new invite-only instance does not ask for the setup code")
            record("sign-up with a setup code", scheme, axe(driver))
            driver.find_element(By.CSS_SELECTOR, "form.stacked button[type=submit]").click()
            j.wait(driver, lambda: driver.find_elements(By.CSS_SELECTOR, ".field-error, [role=alert], .error"), message="setup-code errors")
            record("sign-up with a setup code, errors", scheme, axe(driver))
    finally:
        driver.quit()
    report("accessibility (setup code): no critical or serious violations")


if __name__ == "__main__":
    if len(sys.argv) > 4 and sys.argv[4] == "setup-code":
        setup_code_pages()
    else:
        main()
