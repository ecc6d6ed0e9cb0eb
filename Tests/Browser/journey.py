#!/usr/bin/env python3
"""The whole journey in a real browser (Debian's Chromium via chromedriver and Selenium), on a
desktop window and on a phone-sized touch screen. script/test starts the app and the photo
fixture and runs:  journey.py BASE_URL SCREENSHOT_DIR

Each step asserts what a person sees: the DOM, the state the map script exposes on #map
(data-view-lat/lon/zoom, data-basemap, data-pins-drawn) and canvas pixels where it matters. A
failing step leaves its screenshot and the browser console in SCREENSHOT_DIR. Every page is also
checked for console errors (CSP violations included) and basic accessibility.
"""
import json, os, random, sys, time, traceback, urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

BASE, SHOTS = sys.argv[1], sys.argv[2]
os.makedirs(SHOTS, exist_ok=True)
PASSWORD = "a long journey password"
failures = []


def browser(phone=False, extra=()):
    """Headless Chromium through chromedriver; `extra`: more command-line arguments."""
    options = webdriver.ChromeOptions()
    for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1280,900", "--lang=en-US", *extra]:
        options.add_argument(argument)
    if phone:
        options.add_experimental_option("mobileEmulation", {
            "deviceMetrics": {"width": 390, "height": 844, "pixelRatio": 3.0, "touch": True, "mobile": True},
            "userAgent": "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120 Mobile Safari/537.36",
        })
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_script_timeout(30)
    return driver


class Step:
    """Runs one step; on failure keeps a screenshot and the console, and goes on to report all."""
    def __init__(self, driver, name):
        self.driver, self.name = driver, name

    def __enter__(self):
        print("  -", self.name, flush=True)
        return self

    def __exit__(self, kind, error, tb):
        if error is None:
            return False
        slug = "FAILED-" + "".join(c if c.isalnum() else "-" for c in self.name)[:60]
        try:
            self.driver.save_screenshot(os.path.join(SHOTS, slug + ".png"))
            with open(os.path.join(SHOTS, slug + ".console.txt"), "w") as f:
                for entry in self.driver.get_log("browser"):
                    f.write(json.dumps(entry) + "\n")
        except Exception:
            pass
        failures.append("%s: %s" % (self.name, "".join(traceback.format_exception_only(kind, error)).strip()))
        print("    FAILED:", failures[-1], flush=True)
        return True  # keep going: later steps report too


def wait(driver, condition, timeout=15, message="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            value = condition()
            if value:
                return value
        except Exception:
            pass
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + message)


def data(driver, name):
    return driver.execute_script("return document.getElementById('map').dataset[arguments[0]]", name)


def view(driver):
    return {k: float(data(driver, k)) for k in ("viewLat", "viewLon", "viewZoom")}


def drawn(driver):
    """The last frame drew the map's view as it is now: #map's data-* state (the view, basemap,
    tiles) is written while a frame draws, so right after a move it still describes the old view."""
    return driver.execute_script("""
      const v = window.virtualTourist.map.view, d = document.getElementById('map').dataset;
      return d.viewLat === v.lat.toFixed(5) && d.viewLon === v.lon.toFixed(5) && d.viewZoom === v.zoom.toFixed(3);
    """)


def at_rest(driver):
    """The view stops changing (a flight, a glide or a zoom animation has ended)."""
    def still():
        first = view(driver)
        time.sleep(0.25)
        return first == view(driver) and drawn(driver) and not driver.execute_script("return !!window.virtualTourist.map.animation")
    wait(driver, still, message="the map at rest")


def shot(driver, name):
    driver.save_screenshot(os.path.join(SHOTS, name + ".png"))


def console_errors(driver):
    """SEVERE console entries: script errors, failed loads and CSP violations."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def check_page(driver, label):
    """No console errors; labels on inputs, alt on images, names on controls, readable text."""
    errors = console_errors(driver)
    assert not errors, "%s: console errors: %s" % (label, errors)
    problems = driver.execute_script("""
      const problems = [];
      for (const input of document.querySelectorAll('input:not([type=hidden]), select, textarea')) {
        const labelled = (input.id && document.querySelector(`label[for="${input.id}"]`)) || input.closest('label') ||
                         input.getAttribute('aria-label') || input.getAttribute('aria-labelledby');
        if (!labelled) problems.push('input without a label: ' + (input.name || input.id));
      }
      for (const img of document.querySelectorAll('img')) if (!img.hasAttribute('alt')) problems.push('image without alt: ' + img.src);
      for (const control of document.querySelectorAll('a[href], button')) {
        const name = (control.textContent || '').trim() || control.getAttribute('aria-label') || control.title ||
                     [...control.querySelectorAll('img')].map(i => i.alt).join('');
        if (!name && control.offsetParent !== null) problems.push('control without a name: ' + control.outerHTML.slice(0, 80));
        if (control.tabIndex < 0) problems.push('control not focusable: ' + control.outerHTML.slice(0, 80));
      }
      // Contrast (WCAG 2): body text and buttons against their background.
      const luminance = (rgb) => {
        const [r, g, b] = rgb.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
      };
      const parse = (c) => (c.match(/[\\d.]+/g) || []).slice(0, 4).map(Number);
      const background = (el) => {
        for (let node = el; node; node = node.parentElement) {
          const c = parse(getComputedStyle(node).backgroundColor);
          if (c.length >= 3 && (c.length < 4 || c[3] > 0.5)) return c.slice(0, 3);
        }
        return [255, 255, 255];
      };
      for (const el of document.querySelectorAll('p, h1, h2, label, a, button, li, dd, dt, span')) {
        if (!el.offsetParent || !(el.textContent || '').trim() || el.closest('.button.disabled')) continue;
        const fg = parse(getComputedStyle(el).color).slice(0, 3);
        const l1 = luminance(fg), l2 = luminance(background(el));
        const ratio = (Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05);
        if (ratio < 4.5) problems.push(`low contrast ${ratio.toFixed(2)}: ${el.tagName} "${el.textContent.trim().slice(0, 30)}"`);
      }
      return problems;
    """)
    assert not problems, "%s: accessibility: %s" % (label, problems[:8])


def sign_up(driver, email, name):
    driver.get(BASE + "/sign-up")
    for field, value in [("email", email), ("display_name", name), ("password", PASSWORD), ("password_confirmation", PASSWORD)]:
        driver.find_element(By.ID, field).send_keys(value)
    driver.find_element(By.CSS_SELECTOR, "form.stacked button[type=submit]").click()
    wait(driver, lambda: driver.find_elements(By.ID, "map-canvas"), message="the map page")
    wait(driver, lambda: data(driver, "basemap") == "ready", message="the basemap")


def sign_in(driver, email):
    driver.get(BASE + "/sign-in")
    driver.find_element(By.ID, "email").send_keys(email)
    driver.find_element(By.ID, "password").send_keys(PASSWORD)
    driver.find_element(By.CSS_SELECTOR, "form.stacked button[type=submit]").click()
    wait(driver, lambda: driver.find_elements(By.ID, "map-canvas"), message="the map page")
    wait(driver, lambda: data(driver, "basemap") == "ready", message="the basemap")


def pin_count(driver):
    return driver.execute_script("return window.virtualTourist.pins.pins.filter(p => !p.pending).length")


def screen_of(driver, lat, lon):
    return driver.execute_script("""
      const m = window.virtualTourist.map;
      const w = { x: arguments[1] / 360 + 0.5, y: 0 };
      const s = Math.sin(arguments[0] * Math.PI / 180);
      w.y = 0.5 - Math.log((1 + s) / (1 - s)) / (4 * Math.PI);
      return m.worldToScreen(w.x, w.y);
    """, lat, lon)


def pixel(driver, x, y):
    return driver.execute_script("""
      const c = document.getElementById('map-canvas');
      const d = window.devicePixelRatio || 1;
      return Array.from(c.getContext('2d').getImageData(Math.round(arguments[0] * d), Math.round(arguments[1] * d), 1, 1).data);
    """, x, y)


def offset_from_center(driver, x, y):
    canvas = driver.find_element(By.ID, "map-canvas")
    size = canvas.size
    return x - size["width"] / 2, y - size["height"] / 2


def press_and_hold(driver, dx=0, dy=0, hold=1.5):
    canvas = driver.find_element(By.ID, "map-canvas")
    ActionChains(driver).move_to_element_with_offset(canvas, dx, dy).click_and_hold().pause(hold).release().perform()


def touch(driver, kind, points):
    driver.execute_cdp_cmd("Input.dispatchTouchEvent", {
        "type": kind, "touchPoints": [{"x": x, "y": y, "id": i} for i, (x, y) in enumerate(points)]})


def canvas_origin(driver):
    return driver.execute_script("const r = document.getElementById('map-canvas').getBoundingClientRect(); return [r.left, r.top, r.width, r.height];")


def album_ids(driver):
    return [li.get_attribute("data-id") for li in driver.find_elements(By.CSS_SELECTOR, "#photo-grid li")]


def wait_album_ready(driver, timeout=40):
    wait(driver, lambda: driver.find_element(By.ID, "album").get_attribute("data-status") == "ready", timeout, "the album")


def desktop_journey(first_email):
    d = browser()
    try:
        with Step(d, "1 sign up: the map shows the vector basemap"):
            sign_up(d, first_email, "Journey <Tester>")
            assert "Journey &lt;Tester&gt;" in d.page_source or "Journey <Tester>" in d.find_element(By.CSS_SELECTOR, ".who").text
            d.execute_script("window.virtualTourist.map.setView(5, 15, 3)")  # Africa and the Atlantic
            wait(d, lambda: drawn(d) and data(d, "basemap") == "ready", message="basemap at zoom 3")
            land = pixel(d, *screen_of(d, 8, 22).values())
            sea = pixel(d, *screen_of(d, 0, -25).values())
            assert land[:3] != sea[:3], "land %s and sea %s look the same" % (land, sea)
            assert abs(land[0] - 243) < 12 and abs(sea[2] - 224) < 12, "unexpected colours land %s sea %s" % (land, sea)
            shot(d, "desktop-map")
            check_page(d, "map page")

        with Step(d, "2 drag, wheel zoom and keyboard change the view"):
            before = view(d)
            canvas = d.find_element(By.ID, "map-canvas")
            ActionChains(d).move_to_element(canvas).click_and_hold().move_by_offset(60, 10).move_by_offset(60, 10).release().perform()
            wait(d, lambda: abs(view(d)["viewLon"] - before["viewLon"]) > 5, message="the drag to pan (from %s)" % before)
            at_rest(d)  # a flick glides on
            zoom = view(d)["viewZoom"]
            ActionChains(d).scroll_from_origin(__import__("selenium.webdriver.common.actions.wheel_input", fromlist=["ScrollOrigin"]).ScrollOrigin.from_element(canvas), 0, -300).perform()
            wait(d, lambda: view(d)["viewZoom"] > zoom + 0.3, message="the wheel to zoom in")
            canvas.click()
            at_rest(d)
            zoom = view(d)["viewZoom"]
            canvas.send_keys("+")
            wait(d, lambda: abs(view(d)["viewZoom"] - (round(zoom) + 1)) < 0.01, message="+ to zoom in")
            at_rest(d)
            canvas.send_keys("-")
            wait(d, lambda: abs(view(d)["viewZoom"] - round(zoom)) < 0.01, message="- to zoom out")
            at_rest(d)
            lon = view(d)["viewLon"]
            canvas.send_keys(Keys.ARROW_RIGHT)
            wait(d, lambda: view(d)["viewLon"] > lon, message="the arrow key to pan")

        with Step(d, "3 press and hold drops a pin; a click does not; the card names the place"):
            d.execute_script("window.virtualTourist.map.setView(35.0116, 135.7681, 9)")
            time.sleep(1)
            count = pin_count(d)
            canvas = d.find_element(By.ID, "map-canvas")
            ActionChains(d).move_to_element(canvas).click().perform()
            time.sleep(0.8)
            assert pin_count(d) == count, "a short click dropped a pin"
            press_and_hold(d)
            wait(d, lambda: pin_count(d) == count + 1, message="the new pin")
            wait(d, lambda: not d.execute_script("return window.virtualTourist.pins.pins.some(p => p.pending)"), message="the pin to save")
            # Taps are matched against the last frame drawn: ask for a frame and wait for it, so the
            # saved pin (not the "Saving…" one it replaced) is what the tap finds.
            frames = int(data(d, "frames") or 0)
            d.execute_script("window.virtualTourist.map.redraw()")
            wait(d, lambda: int(data(d, "frames") or 0) > frames, message="a frame with the saved pin")
            # The marker's head sits above the point: tap it.
            ActionChains(d).move_to_element_with_offset(canvas, 0, -18).click().perform()
            title = wait(d, lambda: d.find_element(By.ID, "pin-card-title").text, message="the pin card")
            assert "Kyoto" in title, title
            shot(d, "desktop-pin-card")

        with Step(d, "4 reload: the pin and the view are still there, from the first frame"):
            # The region is saved a moment after the map stops (0.8 s, then its POST): wait for it.
            wait(d, lambda: d.execute_script("""
              const v = window.virtualTourist.map.view;
              return document.getElementById('map').dataset.regionSaved ===
                JSON.stringify({lat: v.lat.toFixed(6), lon: v.lon.toFixed(6), zoom: v.zoom.toFixed(3)});
            """), message="the region to be saved")
            at_rest(d)
            before = view(d)
            d.refresh()
            wait(d, lambda: data(d, "frames"), message="the first frame")
            first = view(d)
            for key in before:
                assert abs(first[key] - before[key]) < 0.001, "view moved on reload: %s → %s" % (before, first)
            wait(d, lambda: pin_count(d) >= 1, message="the saved pin")
            time.sleep(1.2)  # past the save's 0.8 s debounce
            saved = d.execute_script("return document.querySelector('[data-region-saved]') !== null")
            assert not saved, "a page whose view did not move sent its region"

        with Step(d, "5 the album: placeholders, then photos; New Collection; remove a photo"):
            canvas = d.find_element(By.ID, "map-canvas")
            ActionChains(d).move_to_element_with_offset(canvas, 0, -18).click().perform()
            wait(d, lambda: d.find_element(By.ID, "pin-card").is_displayed(), message="the card")
            d.find_element(By.LINK_TEXT, "Open album").click()
            wait(d, lambda: d.find_elements(By.ID, "album"), message="the album page")
            wait_album_ready(d)
            first = album_ids(d)
            assert len(first) == 30, len(first)
            assert len(d.find_elements(By.CSS_SELECTOR, "#photo-grid li.photo img")) == 30
            shot(d, "desktop-album")
            check_page(d, "album page")
            button = d.find_element(By.ID, "new-collection")
            assert button.is_enabled()
            # Watch the page while the new collection loads: placeholders must appear, and the
            # button must be disabled until it is complete.
            d.execute_script("""
              window.__seen = { pending: false, disabled: false };
              const look = () => {
                if (document.querySelector('#photo-grid li.pending')) window.__seen.pending = true;
                if (document.getElementById('new-collection').disabled && document.getElementById('album').dataset.status === 'downloading')
                  window.__seen.disabled = true;
              };
              new MutationObserver(look).observe(document.getElementById('album'), { childList: true, subtree: true, attributes: true });
            """)
            button.click()
            # The observer sees the downloading state even when it lasts less than a poll.
            wait(d, lambda: d.execute_script("return window.__seen.disabled"), message="New Collection to start")
            wait_album_ready(d)
            seen = d.execute_script("return window.__seen")
            saw_placeholders, disabled_while_loading = seen["pending"], seen["disabled"]
            second = album_ids(d)
            assert disabled_while_loading, "New Collection stayed enabled while downloading"
            assert saw_placeholders, "no placeholders appeared"
            assert len(second) == 30 and not set(first) & set(second), "New Collection did not bring different photos"
            assert d.find_element(By.ID, "new-collection").is_enabled()
            d.find_element(By.ID, "edit-toggle").click()
            victim = d.find_element(By.CSS_SELECTOR, "#photo-grid li.photo")
            victim_id = victim.get_attribute("data-id")
            victim.find_element(By.CSS_SELECTOR, ".remove button").click()
            wait(d, lambda: len(album_ids(d)) == 29, message="the photo to go")
            d.refresh()
            wait_album_ready(d)
            assert len(album_ids(d)) == 29 and victim_id not in album_ids(d), "the removed photo came back"

        with Step(d, "6 photo page with keyboard previous/next; the picker pages and saves"):
            ids = album_ids(d)
            d.find_element(By.CSS_SELECTOR, "#photo-grid li.photo a").click()
            wait(d, lambda: "/photos/" in d.current_url, message="the photo page")
            shot(d, "desktop-photo")
            check_page(d, "photo page")
            here = d.current_url
            d.find_element(By.TAG_NAME, "body").send_keys(Keys.ARROW_RIGHT)
            wait(d, lambda: d.current_url != here, message="the next photo")
            assert ("/photos/%s/view" % ids[1]) in d.current_url, d.current_url
            d.find_element(By.TAG_NAME, "body").send_keys(Keys.ARROW_LEFT)
            wait(d, lambda: d.current_url == here, message="the previous photo")
            d.find_element(By.CSS_SELECTOR, ".breadcrumbs a").click()
            # The photo page has no "Choose photos": wait for the album page before looking.
            wait(d, lambda: d.find_elements(By.LINK_TEXT, "Choose photos"), message="the album again")
            d.find_element(By.LINK_TEXT, "Choose photos").click()
            # It opens on a page other than the album's own (usually page 2); page 1 is one back.
            wait(d, lambda: "Choose photos near" in d.page_source, message="the picker")
            if "Page 1 of" not in d.page_source:
                d.find_element(By.PARTIAL_LINK_TEXT, "Previous page").click()
                wait(d, lambda: "Page 1 of" in d.page_source, message="page 1")
            d.find_element(By.PARTIAL_LINK_TEXT, "Next page").click()
            wait(d, lambda: "Page 2 of" in d.page_source, message="page 2")
            shot(d, "desktop-picker")
            check_page(d, "picker page")
            d.find_element(By.CSS_SELECTOR, ".preview-link").click()
            wait(d, lambda: d.find_element(By.CSS_SELECTOR, "dialog.preview-dialog").get_attribute("open") is not None, message="the preview")
            wait(d, lambda: d.execute_script("return document.querySelector('dialog.preview-dialog img').naturalWidth > 0"), message="the preview image")
            d.find_element(By.CSS_SELECTOR, "dialog.preview-dialog button").click()
            box = d.find_element(By.CSS_SELECTOR, ".pick:not(.saved) input[type=checkbox]")
            d.execute_script("arguments[0].click()", box)
            d.find_element(By.CSS_SELECTOR, "form button.primary").click()
            wait(d, lambda: d.find_elements(By.ID, "album"), message="back to the album")
            wait_album_ready(d)
            assert len(album_ids(d)) == 30, len(album_ids(d))

        with Step(d, "7 search Kyoto moves the map there; delete the pin"):
            d.get(BASE + "/")
            wait(d, lambda: data(d, "basemap") == "ready", message="the map")
            d.execute_script("window.virtualTourist.map.setView(0, 0, 2)")
            search = d.find_element(By.ID, "place-search")
            search.send_keys("Kyoto")
            wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "#place-suggestions li"), message="suggestions")
            search.send_keys(Keys.ENTER)
            wait(d, lambda: abs(view(d)["viewLat"] - 35.02) < 0.1 and abs(view(d)["viewLon"] - 135.75) < 0.1, message="the map to reach Kyoto")
            at_rest(d)  # the flight's last frames: the pin's place on screen is read next
            count = pin_count(d)
            canvas = d.find_element(By.ID, "map-canvas")
            pin = d.execute_script("const p = window.virtualTourist.pins.pins[0]; return window.virtualTourist.map.worldToScreen(p.x, p.y);")
            dx, dy = offset_from_center(d, pin["x"], pin["y"] - 18)
            ActionChains(d).move_to_element_with_offset(canvas, dx, dy).click().perform()
            wait(d, lambda: d.find_element(By.ID, "pin-card").is_displayed(), message="the card")
            d.find_element(By.XPATH, "//div[@id='pin-card']//button[text()='Delete pin']").click()
            d.find_element(By.XPATH, "//div[@id='pin-card']//button[text()='Delete']").click()
            wait(d, lambda: pin_count(d) == count - 1, message="the pin to go")
            # The pin leaves the map before its DELETE is answered: reloading sooner races it.
            wait(d, lambda: "Pin deleted" in d.find_element(By.ID, "map-toast").get_attribute("textContent"), message="the deletion answered")
            d.refresh()
            wait(d, lambda: data(d, "frames"), message="the map")
            assert pin_count(d) == count - 1

        with Step(d, "8 a second person: an empty map, and the first person's album is 404"):
            # Make an album to try to reach.
            csrf = d.execute_script("return document.getElementById('map').dataset.csrf")
            pin_id = d.execute_async_script("""
              const done = arguments[arguments.length - 1];
              fetch('/pins', {method: 'POST', headers: {'X-CSRF-Token': arguments[0], Accept: 'application/json'},
                body: new URLSearchParams({lat: '48.8566', lon: '2.3522', _csrf: arguments[0]})}).then(r => r.json()).then(j => done(j.id));
            """, csrf)
            d.find_element(By.CSS_SELECTOR, ".account button").click()  # sign out
            wait(d, lambda: "/sign-in" in d.current_url, message="the sign-in page")
            check_page(d, "sign-in page")
            sign_up(d, "second-%d@example.org" % random.randrange(10**9), "Second")
            assert pin_count(d) == 0, "the second person sees pins"
            d.get(BASE + "/pins/%s" % pin_id)
            assert "Page not found" in d.page_source
            d.get_log("browser")  # the 404 is expected here
    finally:
        d.quit()


def phone_journey(email):
    d = browser(phone=True)
    try:
        with Step(d, "phone: sign in, touch press-and-hold drops a pin, pinch zooms"):
            sign_in(d, email)
            left, top, width, height = canvas_origin(d)
            cx, cy = left + width / 2, top + height / 2
            count = pin_count(d)
            touch(d, "touchStart", [(cx, cy)])
            time.sleep(1.5)  # a long press: well past the page's 500 ms timer, so a busy page still sees it
            touch(d, "touchEnd", [])
            wait(d, lambda: pin_count(d) == count + 1, message="a pin from a long touch")
            zoom = view(d)["viewZoom"]
            touch(d, "touchStart", [(cx - 30, cy), (cx + 30, cy)])
            for step in range(1, 8):
                touch(d, "touchMove", [(cx - 30 - step * 12, cy), (cx + 30 + step * 12, cy)])
                time.sleep(0.03)
            touch(d, "touchEnd", [])
            wait(d, lambda: view(d)["viewZoom"] > zoom + 0.8, message="the pinch to zoom (from %s)" % zoom)
            shot(d, "phone-map")
            check_page(d, "phone map page")
        with Step(d, "phone: album, photo and picker pages"):
            d.get(BASE + "/")
            wait(d, lambda: pin_count(d) >= 1, message="pins")
            pin_id = d.execute_script("return window.virtualTourist.pins.pins[0].id")
            d.get(BASE + "/pins/%s" % pin_id)
            wait_album_ready(d)
            shot(d, "phone-album")
            check_page(d, "phone album page")
            d.find_element(By.CSS_SELECTOR, "#photo-grid li.photo a").click()
            wait(d, lambda: "/photos/" in d.current_url, message="the photo page")
            shot(d, "phone-photo")
            d.get(BASE + "/pins/%s/picker" % pin_id)
            shot(d, "phone-picker")
            check_page(d, "phone picker page")
    finally:
        d.quit()


if __name__ == "__main__":
    first = "journey-%d@example.org" % random.randrange(10**9)
    print("desktop (1280×900):")
    desktop_journey(first)
    print("phone (390×844, touch):")
    phone_journey(first)
    print("screenshots in", SHOTS)
    if failures:
        print("\n%d step(s) failed:" % len(failures))
        for failure in failures:
            print("  ", failure)
        sys.exit(1)
    print("browser journey: all steps passed")
