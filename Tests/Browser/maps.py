#!/usr/bin/env python3
"""Shared maps in real browsers: two members on one map in two Chrome sessions (a pin dropped by
one shows on the other's map without a reload, timed; an album fills live and says who dropped
it; a deletion leaves the other's map live), a viewer in a third session (a read-only map: a
press and hold drops nothing), a member removed while their album is open (404 on the next
visit, their own map back), screenshots of the switcher and the members page in both themes,
and the keyboard-only way through the switcher and the maps pages, light and dark. Mail goes to a
real SMTP server: the invitation mail is read from its Maildir and shown as received; an editor's
share link closes when Ann removes him (the owners' list says so, shot light and dark); and a
password is reset from the mailed link, which ends the other browser's session.
script/test (stage maps) starts the app, the photo fixture and aiosmtpd and runs:

    maps.py BASE_URL SCREENSHOT_DIR DATABASE_URL MAILDIR

Times are read from one clock: Date.now() in each browser (they run on the same machine).
"""
import email, email.policy, html, mailbox, os, re, subprocess, sys, time, urllib.error, urllib.parse, urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import journey as j  # noqa: E402  (same BASE and SCREENSHOT_DIR arguments)
import accessibility as a  # noqa: E402  (tab_to, ring_visible, theme; DATABASE_URL is argv[3] too)
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

BASE, SHOTS, DATABASE_URL, MAILDIR = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
MAP_NAME = "Club walks"
KYOTO = (35.0116, 135.7681, 9)
failures = []
figures = []   # (what, milliseconds)
shots = []     # screenshot paths, printed at the end

# In every document, before the page's own scripts: the EventSources it opens (to wait until
# /map/events is connected) and its non-GET fetches with the time each was answered.
HOOKS = """
(() => {
  const NativeEventSource = window.EventSource;
  window.__sources = [];
  if (NativeEventSource) window.EventSource = class extends NativeEventSource {
    constructor(...args) { super(...args); window.__sources.push(this); }
  };
  const nativeFetch = window.fetch;
  window.__requests = [];
  window.fetch = function (url, options) {
    const method = (options && options.method) || 'GET', start = Date.now();
    const answer = nativeFetch.apply(this, arguments);
    if (method !== 'GET') answer.then(async (r) => {
      const t = Date.now();
      let id = null;
      try { if (r.status === 200 || r.status === 201) id = (await r.clone().json()).id; } catch (e) { /* no JSON */ }
      window.__requests.push({method, url: String(url), start, t, status: r.status, id});
    }, () => window.__requests.push({method, url: String(url), start, t: Date.now(), status: 0, id: null}));
    return answer;
  };
})();
"""

# On a map page: every pin list the layer is given, with the time of the frame after it.
WATCH_PINS = """
  const layer = window.virtualTourist.pins, set = layer.set.bind(layer);
  window.__sets = [];
  window.__samePage = true;
  layer.set = (list) => { set(list); const ids = list.map((p) => p.id); requestAnimationFrame(() => window.__sets.push({t: Date.now(), ids})); };
"""


def browser():
    d = j.browser()
    d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": HOOKS})
    return d


def psql(sql):
    return subprocess.run(["psql", DATABASE_URL, "-qAtc", sql], check=True, capture_output=True, text=True).stdout.strip()


def step(driver, name, body):
    with j.Step(driver, "maps: " + name):
        body()
    if j.failures:
        failures.extend(j.failures)
        j.failures.clear()


def keep(driver, name, element=None):
    path = os.path.join(SHOTS, name + ".png")
    if element is None:
        j.shot(driver, name)
    else:
        element.screenshot(path)
    shots.append(path)


def mail_to(address, subject_part, timeout=30):
    """The first message in the Maildir to `address` whose subject contains `subject_part`,
    decoded as a mail program would (encoded-word subject, base64 body)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.isdir(os.path.join(MAILDIR, "new")):
            for key, message in mailbox.Maildir(MAILDIR, factory=None, create=False).items():
                parsed = email.message_from_bytes(message.as_bytes(), policy=email.policy.default)
                if parsed["To"] and address in str(parsed["To"]) and subject_part in str(parsed["Subject"]):
                    return parsed
        time.sleep(0.2)
    raise AssertionError("no mail to %s about %r within %ds (Maildir %s)" % (address, subject_part, timeout, MAILDIR))


def show_mail(d, message, name):
    """The message as a mail program shows it (its headers and text), screenshot `name`."""
    rows = "".join("<tr><th scope=row>%s</th><td>%s</td></tr>" % (h, html.escape(str(message[h] or "")))
                   for h in ("From", "To", "Subject", "Date"))
    page = ("<!doctype html><html lang=en><meta charset=utf-8><title>%s</title>"
            "<style>body{font:15px system-ui,sans-serif;margin:0;background:#eef0f3}"
            "main{max-width:760px;margin:24px auto;background:#fff;border:1px solid #ccd;border-radius:8px;padding:20px 24px}"
            "th{text-align:left;color:#555;padding:2px 12px 2px 0;font-weight:600}"
            "pre{white-space:pre-wrap;font:15px/1.5 system-ui,sans-serif;border-top:1px solid #ddd;padding-top:14px}</style>"
            "<main><p style='color:#777;margin:0 0 8px'>As received by the SMTP server (Maildir), decoded</p>"
            "<table>%s</table><pre>%s</pre></main>" % (html.escape(str(message["Subject"])), rows, html.escape(message.get_content())))
    d.get("data:text/html;charset=utf-8," + urllib.parse.quote(page))
    keep(d, name)


def status_of(path):
    """A visitor's status for `path` (no cookies, redirects not followed)."""
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args):
            return None
    try:
        return urllib.request.build_opener(NoRedirect).open(BASE + path, timeout=10).status
    except urllib.error.HTTPError as error:
        return error.code


def live_map(d, label):
    """The shared map open, at Kyoto, connected to /map/events, its pin lists watched."""
    d.get(BASE + "/")
    j.wait(d, lambda: j.data(d, "basemap") == "ready", message=label + ": the basemap")
    assert j.data(d, "live") == "true", label + ": #map is not data-live"
    j.wait(d, lambda: d.execute_script(
        "return window.__sources.some((s) => s.url.endsWith('/map/events') && s.readyState === 1)"),
        message=label + ": /map/events connected")
    d.execute_script("window.virtualTourist.map.setView(%s, %s, %s)" % KYOTO)
    j.at_rest(d)
    d.execute_script(WATCH_PINS)


def answer(d, method, path_start):
    """The last non-GET request of the page to a path starting with path_start, once answered."""
    return j.wait(d, lambda: ([r for r in d.execute_script("return window.__requests")
                               if r["method"] == method and r["url"].startswith(path_start) and r["status"]] or [None])[-1],
                  message="the %s %s answer" % (method, path_start))


def shown_at(d, pin_id, after=0, present=True, timeout=10):
    """When (Date.now()) the page's pin layer first had (or, present=False, no longer had) pin_id."""
    def look():
        for s in d.execute_script("return window.__sets"):
            if s["t"] >= after and ((pin_id in s["ids"]) == present):
                return s["t"]
        return None
    return j.wait(d, look, timeout=timeout, message="pin %s %s on the other member's map" % (pin_id, "shown" if present else "gone"))


def figure(what, ms, limit=3000):
    figures.append((what, ms))
    print("    %s: %d ms" % (what, ms), flush=True)
    assert ms < limit, "%s took %d ms (limit %d)" % (what, ms, limit)


def head_of(d, pin_id):
    """The offset from the canvas's centre of a pin's marker head (it sits 18 px above the point)."""
    point = d.execute_script("const p = window.virtualTourist.pins.pins.find((p) => p.id === arguments[0]);"
                             "return p && window.virtualTourist.map.worldToScreen(p.x, p.y);", pin_id)
    assert point, "pin %s is not on the map" % pin_id
    return j.offset_from_center(d, point["x"], point["y"] - 18)


def switch_to(d, name):
    """The header's switcher, with the pointer: choose the map, Open."""
    Select(d.find_element(By.ID, "map-switch")).select_by_visible_text(name)
    # The page it leaves may be a map page too: wait for a new document, not just a canvas.
    d.execute_script("window.__leaving = true")
    d.find_element(By.CSS_SELECTOR, "form.map-switcher button[type=submit]").click()
    j.wait(d, lambda: not d.execute_script("return window.__leaving === true") and d.find_elements(By.ID, "map-canvas"),
           message="the map page")


def member_row(d, text):
    rows = [li for li in d.find_elements(By.CSS_SELECTOR, "li.member") if text in li.text]
    assert rows, "no member row with %r" % text
    return rows[0]


def main():
    stamp = int(time.time() * 1000)
    ann_email, bob_email, cy_email = ("%s-%d@example.org" % (n, stamp) for n in ("ann", "bob", "cy"))
    ann, bob = browser(), browser()
    cy = None
    state = {}
    try:
        def setup():
            j.sign_up(ann, ann_email, "Ann")
            # With no shared map the header has only the way to them.
            assert not ann.find_elements(By.ID, "map-switch")
            ann.find_element(By.CSS_SELECTOR, ".site-header a.maps-link").click()
            j.wait(ann, lambda: ann.find_elements(By.ID, "new-map-name"), message="the maps page")
            j.check_page(ann, "maps page, no maps")
            ann.find_element(By.ID, "new-map-name").send_keys(MAP_NAME)
            ann.find_element(By.CSS_SELECTOR, "form[action='/maps'] button[type=submit]").click()
            j.wait(ann, lambda: "/maps/" in ann.current_url and ann.find_elements(By.CSS_SELECTOR, "li.member"), message="the new map's page")
            state["map"] = ann.current_url.rstrip("/").rsplit("/", 1)[1]
            assert Select(ann.find_element(By.ID, "map-switch")).first_selected_option.text == MAP_NAME, "the new map is not shown"
            Select(ann.find_element(By.ID, "invite-role")).select_by_value("editor")
            ann.find_element(By.CSS_SELECTOR, "form[action$='/invitations'] button[type=submit]").click()
            link = j.wait(ann, lambda: ann.find_element(By.CSS_SELECTOR, "input.copy-field[readonly]").get_attribute("value"),
                          message="the invitation link")
            state["join"] = link[link.index("/maps/join/"):]
            j.check_page(ann, "map page (owner, a new invitation)")
            j.sign_up(bob, bob_email, "Bob")
            bob.get(BASE + state["join"])
            j.wait(bob, lambda: MAP_NAME in bob.find_element(By.TAG_NAME, "h1").text, message="the invitation's page")
            j.check_page(bob, "join page")
            bob.find_element(By.XPATH, "//button[normalize-space()='Join the map']").click()
            j.wait(bob, lambda: bob.find_elements(By.ID, "map-canvas"), message="the shared map")
            assert Select(bob.find_element(By.ID, "map-switch")).first_selected_option.text == MAP_NAME
            live_map(ann, "Ann")
            live_map(bob, "Bob")
        step(ann, "Ann makes \u201c%s\u201d and an invitation; Bob joins in a second browser" % MAP_NAME, setup)

        def drop_live():
            count = j.pin_count(ann)
            ann_reads = j.data(ann, "liveUpdates")
            j.press_and_hold(ann)
            j.wait(ann, lambda: j.pin_count(ann) == count + 1, message="Ann's pin")
            dropped = answer(ann, "POST", "/pins")
            assert dropped["status"] in (200, 201) and dropped["id"], dropped
            state["pin"] = dropped["id"]
            state["dropped"] = dropped["t"]
            seen = shown_at(bob, dropped["id"])
            assert bob.execute_script("return window.__samePage === true"), "Bob's page reloaded"
            figure("Ann's drop answered -> Bob's map shows the pin", seen - dropped["t"])
            print("    (from Ann's POST /pins sent: %d ms; Bob's #map liveUpdates = %s)" % (seen - dropped["start"], j.data(bob, "liveUpdates")))
            # Ann's own tab shows her pin already: it does not re-read the view for its event.
            time.sleep(0.5)
            assert j.data(ann, "liveUpdates") == ann_reads, "Ann's tab re-read the view for her own drop (liveUpdates %s -> %s)" % (ann_reads, j.data(ann, "liveUpdates"))
        step(bob, "Ann drops a pin; Bob's map shows it without a reload", drop_live)

        def album_live():
            watch = """
              window.__samePage = true; window.__albumReady = null; window.__albumDownloading = null;
              const album = document.getElementById('album');
              const look = () => {
                if (!window.__albumDownloading && album.dataset.status === 'downloading') window.__albumDownloading = Date.now();
                if (!window.__albumReady && album.dataset.status === 'ready' && (!window.__waitDownloading || window.__albumDownloading) &&
                    document.querySelector('#photo-grid li.photo img')) window.__albumReady = Date.now(); };
              new MutationObserver(look).observe(album, {attributes: true, childList: true, subtree: true}); look();
            """
            opened = bob.execute_script("return Date.now()")
            bob.get(BASE + "/pins/%s" % state["pin"])
            first = bob.find_element(By.ID, "album").get_attribute("data-status")
            bob.execute_script(watch)
            print("    the album when Bob opened it: %s" % first)
            ready = j.wait(bob, lambda: bob.execute_script("return window.__albumReady"), timeout=60, message="the album to fill")
            j.wait(bob, lambda: share_images(bob), message="its photos to load")
            assert bob.execute_script("return window.__samePage === true"), "Bob's album page reloaded"
            who = bob.find_element(By.ID, "album-who").text
            assert "Dropped by Ann" in who, who
            if first != "ready":
                figures.append(("Bob opens the album -> ready with photos, no reload", ready - opened))
            # Whatever the timing so far, a fill seen live for certain: Ann looks at the album, Bob
            # takes a New Collection, and Ann's open page goes downloading -> ready without a reload.
            ann.get(BASE + "/pins/%s" % state["pin"])
            ann.execute_script(watch)
            j.wait(ann, lambda: ann.execute_script("return window.__albumReady"), timeout=60, message="Ann's album page")
            # From here Ann's page counts as ready only after it has shown the new collection downloading.
            ann.execute_script("window.__albumReady = null; window.__albumDownloading = null; window.__waitDownloading = true")
            clicked = bob.execute_script("return Date.now()")
            bob.find_element(By.ID, "new-collection").click()
            downloading = j.wait(ann, lambda: ann.execute_script("return window.__albumDownloading"), timeout=30,
                                 message="Ann's page to show the new collection downloading")
            ready = j.wait(ann, lambda: ann.execute_script("return window.__albumReady"), timeout=60,
                           message="Ann's page to show the new collection")
            assert ann.execute_script("return window.__samePage === true"), "Ann's album page reloaded"
            figures.append(("Bob's New Collection -> Ann's open album shows it downloading", downloading - clicked))
            figures.append(("Bob's New Collection -> Ann's open album ready with photos", ready - clicked))
            ann.refresh()
            who = ann.find_element(By.ID, "album-who").text
            assert "Dropped by Ann" in who and "New Collection by Bob" in who, who
            print("    album filled live on the other member's page: downloading after %d ms, ready after %d ms; %r" % (
                downloading - clicked, ready - clicked, who))
            j.check_page(bob, "album on a shared map (editor)")
            live_map(ann, "Ann")
        step(bob, "Bob opens the pin's album, Ann's fills live with his New Collection", album_live)

        def delete_live():
            live_map(bob, "Bob")
            count = j.pin_count(bob)
            j.press_and_hold(bob, 90, 40)
            j.wait(bob, lambda: j.pin_count(bob) == count + 1, message="Bob's pin")
            dropped = answer(bob, "POST", "/pins")
            state["bob_pin"] = bob_pin = dropped["id"]
            seen = shown_at(ann, bob_pin)
            figure("Bob's drop answered -> Ann's map shows the pin", seen - dropped["t"])
            j.wait(bob, lambda: not bob.execute_script("return window.virtualTourist.pins.pins.some((p) => p.pending)"), message="saved")
            j.at_rest(bob)
            dx, dy = head_of(bob, bob_pin)
            ActionChains(bob).move_to_element_with_offset(bob.find_element(By.ID, "map-canvas"), dx, dy).click().perform()
            j.wait(bob, lambda: bob.find_element(By.ID, "pin-card").is_displayed(), message="Bob's pin card")
            bob.find_element(By.XPATH, "//div[@id='pin-card']//button[text()='Delete pin']").click()
            bob.find_element(By.XPATH, "//div[@id='pin-card']//button[text()='Delete']").click()
            deleted = answer(bob, "DELETE", "/pins/%s" % bob_pin)
            assert deleted["status"] in (200, 204), deleted
            gone = shown_at(ann, bob_pin, after=deleted["start"], present=False)
            assert ann.execute_script("return window.__samePage === true"), "Ann's page reloaded"
            assert state["pin"] in ann.execute_script("return window.virtualTourist.pins.pins.map((p) => p.id)"), "Ann's own pin went too"
            figure("Bob's delete answered -> Ann's map drops the pin", gone - deleted["t"])
        step(ann, "Bob drops a pin and deletes it: Ann's map follows live", delete_live)

        def viewer():
            nonlocal cy
            cy = browser()
            j.sign_up(cy, cy_email, "Cy")
            ann.get(BASE + "/maps/%s" % state["map"])
            ann.find_element(By.ID, "member-email").send_keys(cy_email)
            Select(ann.find_element(By.ID, "member-role")).select_by_value("viewer")
            ann.find_element(By.CSS_SELECTOR, "form[action$='/members'] button[type=submit]").click()
            # The answer never says whether the address has an account; Cy accepts on his Maps page.
            j.wait(ann, lambda: "If someone on this server has that address" in ann.page_source, message="Cy invited")
            assert cy_email in ann.find_element(By.CSS_SELECTOR, "table.invitations").text, "the invitation is not listed for its owner"
            # The invitation by mail, to the account that has the address.
            invitation = mail_to(cy_email, "invited you to a shared map")
            text = invitation.get_content()
            assert str(invitation["Subject"]) == "Ann invited you to a shared map on Virtual Tourist", invitation["Subject"]
            assert "\u201c%s\u201d as a viewer" % MAP_NAME in text and BASE + "/maps" in text, text
            print("    the invitation mail arrived: %r to %s" % (str(invitation["Subject"]), invitation["To"]))
            show_mail(cy, invitation, "maps-invitation-mail")
            cy.get(BASE + "/maps")
            invited = cy.find_element(By.CSS_SELECTOR, "li.invited")
            assert MAP_NAME in invited.text and "Ann" in invited.text, invited.text
            j.check_page(cy, "an invitation on the Maps page")
            invited.find_element(By.XPATH, ".//button[starts-with(normalize-space(.), 'Accept')]").click()
            j.wait(cy, lambda: cy.find_elements(By.ID, "map-canvas"), message="Cy's map after accepting")
            ann.get(BASE + "/maps/%s" % state["map"])
            assert "Viewer" in member_row(ann, cy_email).find_element(By.TAG_NAME, "select").get_attribute("innerText")
            assert Select(member_row(ann, cy_email).find_element(By.TAG_NAME, "select")).first_selected_option.get_attribute("value") == "viewer"
            cy.get(BASE + "/")
            switch_to(cy, MAP_NAME)
            j.wait(cy, lambda: j.data(cy, "basemap") == "ready", message="Cy's basemap")
            assert j.data(cy, "readOnly") == "true", "Cy's map is not data-read-only"
            assert j.data(cy, "live") == "true", "Cy's map is not live"
            assert not cy.find_elements(By.ID, "drop-pin"), "a viewer has the drop button"
            assert not cy.find_elements(By.CSS_SELECTOR, "form.add-pin, #add-pin-place"), "a viewer has the add-pin form"
            j.check_page(cy, "shared map (viewer)")
            cy.execute_script("window.virtualTourist.map.setView(%s, %s, %s)" % KYOTO)
            j.at_rest(cy)
            before = psql("SELECT count(*) FROM pins")
            shown = j.pin_count(cy)
            j.press_and_hold(cy, -120, 60)
            j.wait(cy, lambda: "viewer" in cy.find_element(By.ID, "map-toast").get_attribute("textContent"), message="the viewer's toast")
            time.sleep(1)
            after = psql("SELECT count(*) FROM pins")
            posts = [r for r in cy.execute_script("return window.__requests") if r["url"].startswith("/pins")]
            assert after == before and not posts and j.pin_count(cy) == shown, \
                "a viewer's press and hold: pins %s -> %s in SQL, requests %s" % (before, after, posts)
            print("    Cy (viewer): read-only map, no drop button, no add-pin form; press and hold: %s pins in SQL before and after, no request" % after)
            cy.get(BASE + "/pins/%s" % state["pin"])
            j.wait_album_ready(cy)
            assert not cy.find_elements(By.ID, "new-collection") and not cy.find_elements(By.ID, "edit-toggle"), "a viewer's album has controls"
        step(ann, "Ann adds Cy as a viewer: a read-only map in a third browser", viewer)

        def screenshots():
            for scheme in ("light", "dark"):
                a.theme(ann, scheme)
                ann.get(BASE + "/")
                j.wait(ann, lambda: j.data(ann, "basemap") == "ready", message="the map")
                a.tab_to(ann, "#map-switch")
                a.ring_visible(ann, "the switcher (%s)" % scheme)
                keep(ann, "maps-switcher-%s" % scheme)
                keep(ann, "maps-switcher-header-%s" % scheme, ann.find_element(By.CSS_SELECTOR, ".site-header"))
                ann.get(BASE + "/maps/%s" % state["map"])
                j.check_page(ann, "members page (%s)" % scheme)
                keep(ann, "maps-members-%s" % scheme)
                ann.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 1280, "height": 1800, "deviceScaleFactor": 1, "mobile": False})
                keep(ann, "maps-members-full-%s" % scheme)
                ann.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
            a.theme(ann, "light")
        step(ann, "screenshots: the switcher and the members page, light and dark", screenshots)

        def links_with_makers():
            ann.get(BASE + "/maps/%s" % state["map"])
            ann.find_element(By.NAME, "editors_share").click()
            ann.find_element(By.CSS_SELECTOR, "form[action$='/sharing'] button[type=submit]").click()
            # The box is ticked by the click itself: wait for the answer's notice, or Bob may ask first.
            j.wait(ann, lambda: "Editors can now make share links" in ann.page_source, message="editors may share")
            assert ann.find_element(By.NAME, "editors_share").is_selected()
            for who, label in ((bob, "Bob's walk"), (ann, "For the newsletter")):
                who.get(BASE + ("/pins/%s/shares" % state["pin"] if who is bob else "/shares"))
                who.find_element(By.ID, "share-label").send_keys(label)
                who.find_element(By.CSS_SELECTOR, "#new-share-form button[type=submit]").click()
                url = j.wait(who, lambda: who.find_element(By.ID, "new-share-url").get_attribute("value"), message="the new link")
                state[label] = url[url.index("/s/"):]
                assert status_of(state[label]) == 200, "%s: %s" % (label, status_of(state[label]))
        step(bob, "Ann lets editors share; Bob makes an album link, Ann a link to the whole map", links_with_makers)

        def removed():
            bob.get(BASE + "/pins/%s" % state["pin"])
            j.wait_album_ready(bob)
            ann.get(BASE + "/maps/%s" % state["map"])
            member_row(ann, bob_email).find_element(By.CSS_SELECTOR, "form[action$='/remove'] button").click()
            j.wait(ann, lambda: "Member removed" in ann.page_source, message="Bob removed")
            assert bob_email not in ann.find_element(By.CSS_SELECTOR, ".member-list").text
            bob.refresh()
            j.wait(bob, lambda: "Page not found" in bob.page_source, message="the 404 page for Bob")
            assert not bob.find_elements(By.ID, "photo-grid"), "Bob still sees the album"
            bob.get_log("browser")  # the 404 is expected
            bob.get(BASE + "/")
            j.wait(bob, lambda: j.data(bob, "basemap") == "ready", message="Bob's map")
            switcher = bob.find_elements(By.ID, "map-switch")
            if switcher:
                shown = Select(switcher[0]).first_selected_option.text
            else:
                shown = "My map" if bob.find_element(By.CSS_SELECTOR, ".site-header a.maps-link").text == "Shared maps" else "?"
            assert shown == "My map", "Bob's map after removal: %r" % shown
            assert j.data(bob, "live") is None, "Bob's own map is live"
            assert state["pin"] not in bob.execute_script("return window.virtualTourist.pins.pins.map((p) => p.id)")
            print("    Bob after removal: the album is a 404, his map shows %r (%s)" % (shown, "switcher" if switcher else "no shared map left: the Shared maps link"))
        step(bob, "Ann removes Bob while his album is open: 404 on reload, his own map back", removed)

        def links_after_removal():
            # Bob's link closed with his membership; Ann's stays open. The owners' list says so.
            closed, open_ = status_of(state["Bob's walk"]), status_of(state["For the newsletter"])
            assert closed in (404, 410) and open_ == 200, "after removal: Bob's link %s, Ann's %s" % (closed, open_)
            for scheme in ("light", "dark"):
                a.theme(ann, scheme)
                ann.get(BASE + "/shares")
                rows = {r.find_element(By.TAG_NAME, "td").text: r.text for r in ann.find_elements(By.CSS_SELECTOR, "table.share-links tbody tr")}
                assert "Bob" in rows.get("Bob's walk", "") and "Closed" in rows.get("Bob's walk", ""), rows
                assert "Ann" in rows.get("For the newsletter", "") and "Active" in rows.get("For the newsletter", ""), rows
                j.check_page(ann, "share links with makers (%s)" % scheme)
                keep(ann, "maps-share-links-%s" % scheme, ann.find_element(By.CSS_SELECTOR, "section[aria-labelledby='share-list-heading']"))
            a.theme(ann, "light")
            print("    after Bob's removal his album link answers %s, Ann's whole-map link %s; the list says who made each" % (closed, open_))
        step(ann, "the owners' list of links: Bob's closed with his removal, Ann's open (shot light and dark)", links_after_removal)

        def password_reset():
            # Bob forgot his password: on his phone (a new browser) he asks for a link by mail,
            # chooses a new password, and his laptop's session (the bob browser) ends.
            bob.get(BASE + "/")
            j.wait(bob, lambda: bob.find_elements(By.ID, "map-canvas"), message="Bob signed in on the laptop")
            phone = browser()
            try:
                phone.get(BASE + "/sign-in")
                phone.find_element(By.LINK_TEXT, "Forgot your password?").click()
                # The sign-in page has an #email too: wait for the form only the new page has.
                j.wait(phone, lambda: phone.find_elements(By.CSS_SELECTOR, "form[action='/forgot-password']"), message="the forgot-password page")
                j.check_page(phone, "forgot password")
                phone.find_element(By.ID, "email").send_keys(bob_email.upper())
                phone.find_element(By.CSS_SELECTOR, "form[action='/forgot-password'] button[type=submit]").click()
                j.wait(phone, lambda: "a link to choose a new password is on its way" in phone.page_source, message="the answer")
                reset = mail_to(bob_email, "Reset your Virtual Tourist password")
                link = re.search(r"https?://\S+/reset-password/[A-Za-z0-9_-]+", reset.get_content())
                assert link and link.group(0).startswith(BASE + "/reset-password/"), reset.get_content()
                show_mail(phone, reset, "maps-reset-mail")
                phone.get(link.group(0))
                j.wait(phone, lambda: phone.find_elements(By.ID, "password_confirmation"), message="the new-password form")
                j.check_page(phone, "choose a new password")
                for field in ("password", "password_confirmation"):
                    phone.find_element(By.ID, field).send_keys("a new password from the mail")
                phone.find_element(By.CSS_SELECTOR, "form.stacked button[type=submit]").click()
                j.wait(phone, lambda: "/sign-in" in phone.current_url, message="back on the sign-in page")
                # Once: the link opens nothing more.
                assert status_of(link.group(0)[len(BASE):]) == 404
                phone.find_element(By.ID, "email").send_keys(bob_email)
                phone.find_element(By.ID, "password").send_keys("a new password from the mail")
                phone.find_element(By.CSS_SELECTOR, "form.stacked button[type=submit]").click()
                j.wait(phone, lambda: phone.find_elements(By.ID, "map-canvas"), message="signed in with the new password")
                bob.get(BASE + "/")
                j.wait(bob, lambda: "/sign-in" in bob.current_url, message="the laptop signed out")
                print("    reset by mail: link used once, new password works, the other browser signed out")
            finally:
                phone.quit()
        step(bob, "Bob resets his password from the mailed link; his other session ends", password_reset)
    finally:
        ann.quit()
        bob.quit()
        if cy:
            cy.quit()
    for scheme in ("light", "dark"):
        keyboard(scheme, cy_email)


def share_images(d):
    return d.execute_script("const imgs = [...document.querySelectorAll('#photo-grid img')];"
                            "return imgs.length > 0 && imgs.slice(0, 6).every((i) => i.complete && i.naturalWidth > 0)")


def keyboard(scheme, other_email):
    """Keyboard only on the new pages: the maps page's form, a role changed, the switcher."""
    d = browser()
    keys = a.keys
    done = []

    def kstep(name, body):
        with j.Step(d, "maps keyboard (%s): %s" % (scheme, name)):
            body()
            done.append(name)
        if j.failures:
            failures.extend(j.failures)
            j.failures.clear()
    state = {"name": "Walks by keyboard (%s)" % scheme}
    try:
        a.theme(d, scheme)
        j.sign_up(d, "keys-%s-%d@example.org" % (scheme, int(time.time() * 1000)), "Kim")

        def to_maps():
            a.tab_to(d, ".site-header a.maps-link")
            a.ring_visible(d, "Shared maps link")
            keys(d, Keys.ENTER)
            j.wait(d, lambda: d.find_elements(By.ID, "new-map-name"), message="the maps page")
        kstep("the header's Shared maps link", to_maps)

        def make():
            a.tab_to(d, "#new-map-name")
            a.ring_visible(d, "map name field")
            keys(d, state["name"], Keys.TAB)
            assert a.focused(d, "form[action='/maps'] button[type=submit]"), "Tab from the name does not reach Make the map"
            a.ring_visible(d, "Make the map")
            keys(d, Keys.ENTER)
            j.wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "li.member"), message="the new map's page")
            assert state["name"] in d.find_element(By.TAG_NAME, "h1").text
            state["map"] = d.current_url.rstrip("/").rsplit("/", 1)[1]
        kstep("make a shared map", make)

        def add_and_change_role():
            a.tab_to(d, "#member-email")
            a.ring_visible(d, "member email")
            keys(d, other_email, Keys.TAB)
            assert a.focused(d, "#member-role")
            a.ring_visible(d, "member role")
            keys(d, Keys.TAB)
            a.ring_visible(d, "Invite")
            keys(d, Keys.ENTER)
            j.wait(d, lambda: "If someone on this server has that address" in d.page_source, message="the invitation answered")
            # The invitee accepts on their Maps page, by keyboard too.
            o = browser()
            try:
                a.theme(o, scheme)
                j.sign_in(o, other_email)
                o.get(BASE + "/maps")
                a.tab_to(o, "form[action$='/accept'] button")
                a.ring_visible(o, "Accept")
                keys(o, Keys.ENTER)
                j.wait(o, lambda: o.find_elements(By.ID, "map-canvas"), message="the map after accepting")
            finally:
                o.quit()
            d.get(BASE + "/maps/%s" % state["map"])
            select = member_row(d, other_email).find_element(By.TAG_NAME, "select")
            selector = "#" + select.get_attribute("id")
            assert select.get_attribute("value") == "editor"
            a.tab_to(d, selector)
            a.ring_visible(d, "role select")
            # From editor to viewer by arrow keys, whichever way the options run.
            order = d.execute_script("return [...document.querySelector(arguments[0]).options].map((o) => o.value)", selector)
            keys(d, Keys.ARROW_DOWN if order.index("viewer") > order.index("editor") else Keys.ARROW_UP)
            j.wait(d, lambda: d.find_element(By.CSS_SELECTOR, selector).get_attribute("value") == "viewer", timeout=3,
                   message="the arrow key to choose viewer")
            keys(d, Keys.TAB)
            assert a.focused(d, "form[action$='/role'] button"), "Tab from the role does not reach Change"
            a.ring_visible(d, "Change")
            keys(d, Keys.SPACE)
            j.wait(d, lambda: "Role changed to viewer" in d.page_source, message="the role changed")
            assert d.find_element(By.CSS_SELECTOR, selector).get_attribute("value") == "viewer"
        kstep("add a member, change their role (arrow key, Space)", add_and_change_role)

        def switcher():
            a.tab_to(d, "a.brand", backwards=True)
            keys(d, Keys.ENTER)
            j.wait(d, lambda: d.find_elements(By.ID, "map-canvas"), message="the map page")
            assert j.data(d, "live") == "true", "the new map is not the one shown"
            for target, key, press in (("own", Keys.ARROW_UP, Keys.ENTER), (state["map"], Keys.ARROW_DOWN, Keys.SPACE)):
                a.tab_to(d, "#map-switch")
                a.ring_visible(d, "switcher")
                keys(d, key)
                j.wait(d, lambda: d.find_element(By.ID, "map-switch").get_attribute("value") == target, timeout=3,
                       message="the arrow key to choose %s" % target)
                assert d.find_elements(By.ID, "map-canvas"), "choosing in the select changed the page"
                keys(d, Keys.TAB)
                assert a.focused(d, "form.map-switcher button[type=submit]"), "Tab from the select does not reach Open"
                a.ring_visible(d, "Open")
                # The select already shows the choice on the page being left: wait for a new document.
                d.execute_script("window.__leaving = true")
                keys(d, press)
                j.wait(d, lambda: not d.execute_script("return window.__leaving === true") and d.find_elements(By.ID, "map-canvas") and
                       d.find_element(By.ID, "map-switch").get_attribute("value") == target, message="the map %s shown" % target)
                j.wait(d, lambda: j.data(d, "basemap") == "ready", message="the basemap")
                assert (j.data(d, "live") == "true") == (target != "own"), "map %s: data-live %s" % (target, j.data(d, "live"))
            j.check_page(d, "shared map after the switcher")
        kstep("the switcher: own map (Up, Enter), the shared map (Down, Space)", switcher)
    finally:
        d.quit()
    print("    keyboard (%s): %d of 4 steps passed" % (scheme, len(done)))


if __name__ == "__main__":
    main()
    print("\nlive-update figures:")
    for what, ms in figures:
        print("  %-58s %6d ms" % (what, ms))
    print("screenshots:")
    for path in shots:
        print("  " + path)
    if failures:
        print("\n%d shared-map failure(s):" % len(failures))
        for failure in failures:
            print("  ", failure)
        sys.exit(1)
    print("shared maps: every step passed")
