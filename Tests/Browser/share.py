#!/usr/bin/env python3
"""A share link in a real browser: the owner makes links from the album page (the copy button,
a password, hide-location), a visitor without an account opens them in another browser (the
album read-only, its photos, the keyboard, the password asked once), and a revoked link shows
its page. script/test runs it after the accessibility step, against the same app:

    share.py BASE_URL SCREENSHOT_DIR
"""
import os, sys, time

sys.path.insert(0, os.path.dirname(__file__))
import journey as j  # noqa: E402  (same BASE and SCREENSHOT_DIR arguments)
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

BASE = j.BASE
PASSWORD = "a shared secret phrase"
failures = []


def make_share(driver, pin_id, password=None, hide=False, label="", own_photos=False):
    """A link made with the owner's form on the album's Share page (pin None: /shares, a link to
    the whole map); its path (shown only once)."""
    driver.get(BASE + ("/pins/%s/shares" % pin_id if pin_id else "/shares"))
    if label:
        driver.find_element(By.ID, "share-label").send_keys(label)
    if password:
        driver.find_element(By.ID, "share-new-password").send_keys(password)
    if hide:
        driver.find_element(By.NAME, "hide_location").click()
    if own_photos:
        driver.find_element(By.NAME, "own_photos").click()
    driver.find_element(By.CSS_SELECTOR, "#new-share-form button[type=submit]").click()
    url = j.wait(driver, lambda: driver.find_element(By.ID, "new-share-url").get_attribute("value"), message="the new link")
    return url[url.index("/s/"):]


def keys(driver, *sequence):
    ActionChains(driver).send_keys(*sequence).perform()


def images_loaded(driver):
    return driver.execute_script(
        "const imgs = [...document.querySelectorAll('#photo-grid img')];"
        "return imgs.length > 1 && imgs.slice(0, 6).every(i => i.complete && i.naturalWidth > 0)")


def step(driver, name, body):
    with j.Step(driver, "share: " + name):
        body()
    if j.failures:
        failures.extend(j.failures)
        j.failures.clear()


def main():
    owner = j.browser()
    visitor = j.browser()
    try:
        state = {}

        def make_links():
            j.sign_up(owner, "sharer-%d@example.org" % int(time.time() * 1000), "Sam Sharer")
            pin = owner.execute_async_script("""
              const done = arguments[arguments.length - 1];
              const csrf = document.querySelector('[data-csrf]').dataset.csrf;
              fetch('/pins', {method: 'POST', headers: {'X-CSRF-Token': csrf, Accept: 'application/json'},
                              body: new URLSearchParams({lat: '48.8566', lon: '2.3522'})}).then(r => r.json()).then(p => done(p.id));
            """)
            owner.get(BASE + "/pins/%s" % pin)
            j.wait_album_ready(owner)
            owner.find_element(By.ID, "share-album").click()
            j.wait(owner, lambda: "/shares" in owner.current_url, message="the album's share page")
            j.check_page(owner, "share links (owner)")
            state["open"] = make_share(owner, pin, label="For the family")
            copy = owner.find_element(By.ID, "copy-share-url")
            assert copy.is_displayed(), "the Copy button shows with script"
            shown = owner.find_element(By.ID, "new-share-url").get_attribute("value")
            assert shown.startswith("http"), "the link is absolute: " + shown
            state["locked"] = make_share(owner, pin, password=PASSWORD, hide=True, label="Location hidden")
            state["pin"] = pin
        step(owner, "the owner makes two links from the album page", make_links)

        def visit():
            visitor.get(BASE + state["open"])
            j.wait(visitor, lambda: images_loaded(visitor), message="the shared photos")
            j.check_page(visitor, "shared album")
            source = visitor.page_source
            assert 'name="robots" content="noindex' in source
            assert "New Collection" not in source and "Delete pin" not in source and "Sam Sharer" not in source
            assert not visitor.find_elements(By.CSS_SELECTOR, "form[method=post]"), "no control that changes anything"
            assert visitor.find_elements(By.ID, "album-map"), "the small map"
        step(visitor, "a visitor without an account sees the album", visit)

        def keyboard():
            visitor.get(BASE + state["open"])
            for _ in range(60):
                if visitor.execute_script("return document.activeElement.matches('.photo a')"):
                    break
                keys(visitor, Keys.TAB)
            keys(visitor, Keys.ENTER)
            j.wait(visitor, lambda: "/view" in visitor.current_url, message="the photo full screen")
            first = visitor.current_url
            assert "/s/" in first
            keys(visitor, Keys.ARROW_RIGHT)
            j.wait(visitor, lambda: visitor.current_url != first and "/view" in visitor.current_url, message="the next photo")
            keys(visitor, Keys.ARROW_LEFT)
            j.wait(visitor, lambda: visitor.current_url == first, message="the previous photo")
            j.wait(visitor, lambda: visitor.execute_script(
                "const i = document.querySelector('.photo-large img'); return i.complete && i.naturalWidth > 0"), message="the full photo")
            keys(visitor, Keys.ESCAPE)
            j.wait(visitor, lambda: visitor.current_url == BASE + state["open"], message="back to the album")
        step(visitor, "keyboard: a photo full screen, arrow keys, Escape", keyboard)

        def password():
            visitor.get(BASE + state["locked"])
            j.wait(visitor, lambda: visitor.find_elements(By.ID, "share-password"), message="the password page")
            # (Not check_page: the page is a 403 until the password, and Chromium logs that status.)
            assert "/photos/" not in visitor.page_source
            visitor.find_element(By.ID, "share-password").send_keys("not it at all")
            visitor.find_element(By.CSS_SELECTOR, "form.stacked button[type=submit]").click()
            j.wait(visitor, lambda: "not right" in visitor.page_source, message="the wrong password refused")
            visitor.find_element(By.ID, "share-password").send_keys(PASSWORD)
            visitor.find_element(By.CSS_SELECTOR, "form.stacked button[type=submit]").click()
            # The cookie is scoped to the link's path: the thumbnails and album.html load with it.
            j.wait(visitor, lambda: images_loaded(visitor), message="the photos behind the password")
            source = visitor.page_source
            assert "48.85" not in source and "2.352" not in source and not visitor.find_elements(By.ID, "album-map"), "no location"
            visitor.get(BASE + state["locked"] + "/album.json")
            assert '"photos"' in visitor.page_source, "album.json with the cookie"
        step(visitor, "the password is asked once, the location hidden", password)

        def revoke():
            owner.get(BASE + "/pins/%s/shares" % state["pin"])
            row = owner.find_element(By.XPATH, "//tr[td[text()='For the family']]")
            row.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
            j.wait(owner, lambda: "Link revoked" in owner.page_source, message="the revoked flash")
            visitor.get(BASE + state["open"])
            j.wait(visitor, lambda: "withdrawn" in visitor.page_source, message="the withdrawn link's page")
            assert not visitor.find_elements(By.CSS_SELECTOR, "#photo-grid img")
        step(owner, "the owner revokes a link; the visitor sees it withdrawn", revoke)

        def whole_map():
            path = make_share(owner, None, label="All my places")
            visitor.get_log("browser")  # the earlier steps' 403 and 410 answers are logged as errors
            visitor.get(BASE + path)
            j.wait(visitor, lambda: visitor.find_element(By.ID, "share-map").get_attribute("data-ready"), message="the shared map")
            j.check_page(visitor, "shared map")
            visitor.find_element(By.CSS_SELECTOR, ".share-places a").click()
            j.wait(visitor, lambda: images_loaded(visitor), message="an album from the shared map")
            assert "/s/" in visitor.current_url and "/pins/" in visitor.current_url
        step(visitor, "a link to the whole map: the places, then an album", whole_map)
    finally:
        owner.quit()
        visitor.quit()
    if failures:
        print("\n%d share-link failure(s):" % len(failures))
        for failure in failures:
            print("  ", failure)
        sys.exit(1)
    print("share links: 6 of 6 steps passed")


if __name__ == "__main__":
    main()
