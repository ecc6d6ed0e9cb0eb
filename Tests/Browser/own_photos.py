#!/usr/bin/env python3
"""A person's own photos in a real browser: twenty files dropped on an album page at once (each
sent on its own, with its progress; a file that is not a photo refused by name, with a Retry), the
form reached with the keyboard, and the plain form without JavaScript. The served versions are
read back with exiftool: no location in any of them.

    own_photos.py BASE_URL SCREENSHOT_DIR
"""
import json, os, re, subprocess, sys, tempfile, time, urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import journey as j  # noqa: E402
import share  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

BASE = j.BASE
ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
failures = []


def step(driver, name, body):
    with j.Step(driver, "own photos: " + name):
        body()
    if j.failures:
        failures.extend(j.failures)
        j.failures.clear()


def photos(folder, count, places=((48.85837, 2.29448),), prefix="IMG", day="2024:05:03"):
    """`count` different JPEGs with a position, in turn at each of `places` (the fixture's cat,
    tagged by exiftool as a phone tags, each with a comment of its own so no two are the same)."""
    source = os.path.join(ROOT, "Sources", "PhotoFixture", "Photos", "chelsea.jpg")
    paths = []
    for n in range(count):
        lat, lon = places[n % len(places)]
        path = os.path.join(folder, "%s_%04d.JPG" % (prefix, n + 1))
        with open(source, "rb") as original, open(path, "wb") as copy:
            copy.write(original.read())
        subprocess.run(["exiftool", "-q", "-overwrite_original", "-n", "-Comment=%s photo %d" % (prefix, n),
                        "-GPSLatitude=%s" % lat, "-GPSLatitudeRef=N", "-GPSLongitude=%s" % lon, "-GPSLongitudeRef=E",
                        "-DateTimeOriginal=%s 14:%02d:00" % (day, n), path], check=True)
        paths.append(path)
    return paths


def drop(driver, paths, target="main"):
    """Drops files on the album page as a person dragging them from a file manager would: the
    files are put in a DataTransfer (through a file input, the only way a page gets File objects
    from disk) and dragover, then drop, are dispatched on the page."""
    driver.execute_script("""
      const input = document.createElement('input');
      input.type = 'file'; input.multiple = true; input.id = 'test-drop-source'; input.hidden = true;
      document.body.append(input);
    """)
    driver.find_element(By.ID, "test-drop-source").send_keys("\n".join(paths))
    driver.execute_script("""
      const input = document.getElementById('test-drop-source');
      const transfer = new DataTransfer();
      for (const file of input.files) transfer.items.add(file);
      const target = document.querySelector(arguments[0]);
      const box = target.getBoundingClientRect();
      const at = {clientX: box.left + box.width / 2, clientY: box.top + box.height / 2};
      target.dispatchEvent(new DragEvent('dragover', {dataTransfer: transfer, bubbles: true, cancelable: true, ...at}));
      target.dispatchEvent(new DragEvent('drop', {dataTransfer: transfer, bubbles: true, cancelable: true, ...at}));
      input.remove();
    """, target)


def cookie_header(driver):
    return "; ".join("%s=%s" % (c["name"], c["value"]) for c in driver.get_cookies())


def main():
    d = j.browser()
    folder = tempfile.mkdtemp(prefix="own-photos-")
    state = {}
    try:
        def album():
            j.sign_up(d, "own-%d@example.org" % int(time.time() * 1000), "Pia Photographer")
            pin = d.execute_async_script("""
              const done = arguments[arguments.length - 1];
              const csrf = document.querySelector('[data-csrf]').dataset.csrf;
              fetch('/pins', {method: 'POST', headers: {'X-CSRF-Token': csrf, Accept: 'application/json'},
                              body: new URLSearchParams({lat: '48.8584', lon: '2.2945'})}).then(r => r.json()).then(p => done(p.id));
            """)
            d.get(BASE + "/pins/%s" % pin)
            j.wait_album_ready(d)
            assert d.find_element(By.ID, "own-upload").is_displayed()
            state["pin"] = pin
        step(d, "an album page offers 'Add your photos here'", album)

        def twenty():
            paths = photos(folder, 20)
            notes = os.path.join(folder, "notes.txt")
            with open(notes, "w") as f:
                f.write("not a photo")
            drop(d, paths + [notes])
            j.wait(d, lambda: "Adding photos" in d.find_element(By.CSS_SELECTOR, ".own-summary").text
                   or "Done" in d.find_element(By.CSS_SELECTOR, ".own-summary").text, message="the batch's progress")
            assert len(d.find_elements(By.CSS_SELECTOR, ".own-files progress")) == 21, "a progress bar per file"
            j.wait(d, lambda: d.find_element(By.CSS_SELECTOR, ".own-summary").text == "Done: 20 of 21 added, 1 not added.",
                   timeout=120, message="all twenty added: " + d.find_element(By.CSS_SELECTOR, ".own-summary").text)
            failed = d.find_element(By.CSS_SELECTOR, ".own-files li[data-outcome=failed]")
            assert "notes.txt is not a photo Virtual Tourist can read" in failed.text, failed.text
            assert failed.find_element(By.CSS_SELECTOR, "button").get_attribute("aria-label") == "Retry notes.txt"
            j.wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, "#own-grid li.photo.own")) == 20, message="twenty in the grid")
            j.wait(d, lambda: d.execute_script(
                "return [...document.querySelectorAll('#own-grid img')].every(i => i.complete && i.naturalWidth > 0)"), message="their thumbnails")
            d.get_log("browser")  # notes.txt's 422 is expected
            j.check_page(d, "album with own photos")
            d.get(BASE + "/pins/%s" % state["pin"])
            assert len(d.find_elements(By.CSS_SELECTOR, "#own-grid li.photo.own")) == 20, "twenty after a reload"
            assert "Pia Photographer · 3 May 2024, 14:00" in d.page_source
            j.shot(d, "own-photos-album")
        step(d, "twenty files dropped at once: each added, one refused by name", twenty)

        def no_location():
            ids = [e.get_attribute("data-id") for e in d.find_elements(By.CSS_SELECTOR, "#own-grid li.photo.own")]
            for suffix in ("", "?w=256"):
                request = urllib.request.Request(BASE + "/own-photos/%s%s" % (ids[0], suffix), headers={"Cookie": cookie_header(d)})
                body = urllib.request.urlopen(request).read()
                path = os.path.join(folder, "served.jpg")
                with open(path, "wb") as f:
                    f.write(body)
                tags = json.loads(subprocess.run(["exiftool", "-j", "-G1", "-a", path], capture_output=True, check=True).stdout)[0]
                leaked = [k for k in tags if "GPS" in k or k.startswith("XMP") or k.startswith("IFD0") or k.startswith("ExifIFD")]
                assert not leaked, "%s carries %s" % (suffix or "the display version", leaked)
        step(d, "the versions served carry no location (exiftool)", no_location)

        def viewer():
            # An own photo's page: opened from the grid, next with the arrow key, back with Escape.
            d.get(BASE + "/pins/%s" % state["pin"])
            first = d.find_element(By.CSS_SELECTOR, "#own-grid li.photo.own a")
            d.execute_script("arguments[0].scrollIntoView({block: 'center'})", first)
            first.click()
            j.wait(d, lambda: d.find_elements(By.ID, "next-photo"), message="the photo's page")
            assert "1 of 20" in d.find_element(By.CSS_SELECTOR, ".photo-nav").text
            assert "Download the original" in d.page_source and "Remove from album" in d.page_source
            j.check_page(d, "own photo's page")
            ActionChains(d).send_keys(Keys.ARROW_RIGHT).perform()
            j.wait(d, lambda: "2 of 20" in d.find_element(By.CSS_SELECTOR, ".photo-nav").text, message="the next photo")
            ActionChains(d).send_keys(Keys.ESCAPE).perform()
            j.wait(d, lambda: d.find_elements(By.ID, "own-grid"), message="back at the album")
        step(d, "an own photo's page: previous and next, the keyboard", viewer)

        def shared_hidden():
            # A share link with the own photos and the location hidden, as a visitor without an account sees it.
            link = share.make_share(d, state["pin"], hide=True, own_photos=True)
            visitor = j.browser()
            try:
                visitor.get(BASE + link)
                j.wait(visitor, lambda: len(visitor.find_elements(By.CSS_SELECTOR, "#own-grid li.photo.own")) == 20, message="their own photos")
                j.wait(visitor, lambda: visitor.execute_script(
                    "return [...document.querySelectorAll('#own-grid img')].slice(0, 6).every(i => i.complete && i.naturalWidth > 0)"),
                    message="their thumbnails")
                text = visitor.find_element(By.TAG_NAME, "main").text
                assert "IMG_" not in visitor.page_source and "48.85" not in text, "no file names, no coordinates"
                j.check_page(visitor, "shared album with own photos, location hidden")
                visitor.execute_script("document.getElementById('own-photos').scrollIntoView({block: 'start'})")
                j.shot(visitor, "own-photos-shared-location-hidden")
            finally:
                visitor.quit()
        step(d, "a share link with own photos and the location hidden", shared_hidden)

        def trip():
            d.get(BASE + "/")
            j.wait(d, lambda: j.data(d, "basemap") == "ready", message="the map")
            before = d.execute_script("return window.virtualTourist.pins.pins.length")
            # A trip: the tower, Versailles, Rouen; twenty photos dropped on the map at once.
            paths = photos(folder, 20, places=((48.85837, 2.29448), (48.8049, 2.1204), (49.4432, 1.0999)), prefix="TRIP")
            drop(d, paths, "#map-canvas")
            summary = lambda: d.find_element(By.CSS_SELECTOR, ".own-summary").get_attribute("textContent")
            j.wait(d, lambda: summary() == "Done: 20 of 20 added.", timeout=120, message="the trip's photos")
            assert d.find_element(By.CSS_SELECTOR, ".own-summary").is_displayed(), "the progress is shown (the pin list opened)"
            after = d.execute_script("return window.virtualTourist.pins.pins.length")
            # The album's pin at the tower takes the tower's photos: two new pins, not twenty.
            assert after - before == 2, "pins before %s, after %s" % (before, after)
            assert "Your pins (3)" in d.find_element(By.ID, "pin-list-title").get_attribute("textContent"), "the list counts the new pins"
            d.execute_script("window.virtualTourist.map.setView(49.1, 1.7, 7)")
            j.wait(d, lambda: j.drawn(d), message="the trip in view")
            d.get_log("browser")
            j.check_page(d, "map after a trip's photos")
            j.shot(d, "own-photos-map-after-a-trip")
        step(d, "twenty photos dropped on the map go where they were taken", trip)

        def estimated():
            # Two photos without a position chosen before the one with it, "estimated" ticked: the
            # first two wait for the rest of the batch, then stand beside it (taken minutes apart).
            d.get(BASE + "/")
            j.wait(d, lambda: j.data(d, "basemap") == "ready", message="the map")
            paths = photos(folder, 3, places=((48.8049, 2.1204),), prefix="WALK", day="2024:06:01")
            for path in paths[:2]:
                subprocess.run(["exiftool", "-q", "-overwrite_original", "-gps:all=", path], check=True)
            d.execute_script("document.getElementById('pin-list-details').setAttribute('open', '')")
            checkbox = d.find_element(By.ID, "own-estimate")
            d.execute_script("arguments[0].scrollIntoView({block: 'center'})", checkbox)
            if not checkbox.is_selected():
                checkbox.click()
            d.find_element(By.ID, "own-files").send_keys("\n".join(paths))
            d.find_element(By.CSS_SELECTOR, "#own-upload button[type=submit]").click()
            summary = lambda: d.find_element(By.CSS_SELECTOR, ".own-summary").get_attribute("textContent")
            j.wait(d, lambda: summary() == "Done: 3 of 3 added.", timeout=60, message="the walk's photos (%s)" % summary)
            statuses = [e.get_attribute("textContent") for e in d.find_elements(By.CSS_SELECTOR, ".own-file-status")][-3:]
            assert sum("estimated" in text for text in statuses) == 2, statuses
        step(d, "photos without a position stand beside the batch's photos taken minutes apart", estimated)

        def keyboard():
            d.get(BASE + "/pins/%s" % state["pin"])
            j.wait_album_ready(d)
            body = d.find_element(By.TAG_NAME, "body")
            body.click()
            for _ in range(150):
                if d.execute_script("return document.activeElement.id") == "own-files":
                    break
                ActionChains(d).send_keys(Keys.TAB).perform()
            assert d.execute_script("return document.activeElement.id") == "own-files", "the file input is reached with Tab"
            ActionChains(d).send_keys(Keys.TAB).perform()
            assert d.execute_script("return document.activeElement.textContent") == "Add photos"
        step(d, "keyboard: Tab reaches the file input and its button", keyboard)
    finally:
        d.quit()

    # Without JavaScript: the plain form sends its files together.
    options = webdriver.ChromeOptions()
    for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,900", "--lang=en-US"]:
        options.add_argument(argument)
    options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    plain = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        def no_script():
            email = "plain-%d@example.org" % int(time.time() * 1000)
            plain.get(BASE + "/sign-up")
            for field, value in [("email", email), ("display_name", "Nora Noscript"), ("password", j.PASSWORD), ("password_confirmation", j.PASSWORD)]:
                plain.find_element(By.ID, field).send_keys(value)
            plain.find_element(By.CSS_SELECTOR, "form.stacked button[type=submit]").click()
            j.wait(plain, lambda: plain.find_elements(By.ID, "map-canvas"), message="the map page")
            plain.find_element(By.ID, "add-pin-place").send_keys("48.8584, 2.2945")
            plain.find_element(By.CSS_SELECTOR, "form.add-pin button[type=submit]").click()
            link = j.wait(plain, lambda: [a.get_attribute("href") for a in plain.find_elements(By.CSS_SELECTOR, "a[href*='/pins/']")
                                          if re.search(r"/pins/[0-9]+$", a.get_attribute("href") or "")], timeout=40, message="the new pin's link")
            plain.get(link[0])
            j.wait(plain, lambda: plain.find_elements(By.ID, "own-files"), timeout=40, message="the new pin's album")
            paths = photos(folder, 22)[20:]
            plain.find_element(By.ID, "own-files").send_keys("\n".join(paths))
            plain.find_element(By.CSS_SELECTOR, "#own-upload button[type=submit]").click()
            j.wait(plain, lambda: "2 photos added." in plain.page_source, timeout=40, message="the plain form's answer")
            assert len(plain.find_elements(By.CSS_SELECTOR, "#own-grid li.photo.own")) == 2
            j.shot(plain, "own-photos-no-script")
        step(plain, "without JavaScript: the plain form adds two files", no_script)
    finally:
        plain.quit()

    if failures:
        print("\n%d own-photo failure(s):" % len(failures))
        for failure in failures:
            print("  ", failure)
        sys.exit(1)
    print("own photos: every step passed")


if __name__ == "__main__":
    main()
