#!/usr/bin/env python3
"""A person's visit over the app's published port, for the Compose journey (Tests/Docker/compose-journey).
Standard library only.

  visit.py BASE_URL STATE_FILE first    sign up, drop a pin, wait for its album, fetch a photo; add an
                                        iPhone HEIC of one's own to the album (decoded in the image's child
                                        process, spooled on its volume) and fetch its versions and original;
                                        writes the session cookie, pin id, photo ids and hashes to STATE_FILE
  visit.py BASE_URL STATE_FILE again    with the saved cookie: still signed in, the pin, the album and the
                                        same photo bytes are there, the own photo's original too
  visit.py BASE_URL STATE_FILE load N   with the saved cookie, drops N pins (their albums download), prints their ids
  visit.py BASE_URL STATE_FILE verify   with the saved cookie, reads "photo-id sha256" lines on stdin and fetches
                                        each photo: prints how many were served with exactly those bytes, how many
                                        with others, how many not at all (exit 1 unless all were served intact)

OWN_PHOTO=0 leaves the own photo out (a release from before own photos).
SETUP_CODE, when set, is sent with the sign-up: the first account of an instance whose SIGN_UP is
invite or closed needs the code the app wrote in its log at start.

Each step prints one line; any failure exits 1 with the reason.
"""
import hashlib, http.cookiejar, json, os, re, sys, time, urllib.error, urllib.parse, urllib.request

BASE, STATE, MODE = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3]
EMAIL, PASSWORD = "compose@example.org", "a long compose password"


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


jar = http.cookiejar.CookieJar()
opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), NoRedirect)


def fail(message):
    print("FAILED:", message, flush=True)
    sys.exit(1)


def request(method, path, form=None, accept=None):
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    req = urllib.request.Request(BASE + path, data=data, method=method)
    if accept:
        req.add_header("Accept", accept)
    try:
        with opener.open(req, timeout=15) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def csrf(path):
    status, _, body = request("GET", path)
    if status != 200:
        fail(f"GET {path} answered {status}")
    match = re.search(rb'name="_csrf" value="([^"]+)"', body)
    if not match:
        fail(f"no CSRF token on {path}")
    return match.group(1).decode()


def wait_for_album(pin_id, seconds=90):
    deadline = time.time() + seconds
    while time.time() < deadline:
        status, _, body = request("GET", f"/pins/{pin_id}/album.json")
        if status != 200:
            fail(f"album.json answered {status}")
        album = json.loads(body)
        ready = [p for p in album["photos"] if p["status"] == "ready"]
        if album["status"] == "ready" and ready:
            return album, ready
        if album["status"] == "failed":
            fail(f"the album failed: {album.get('error')}")
        time.sleep(0.5)
    fail(f"the album was not ready after {seconds} s")


HEIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ImagingTests", "Photos", "pug.heic")


def own_photo(photo_id, original):
    status, headers, body = request("GET", f"/own-photos/{photo_id}" + ("?original=1" if original else ""))
    if status != 200 or not headers.get("Content-Type", "").startswith("image/"):
        fail(f"GET /own-photos/{photo_id} answered {status} {headers.get('Content-Type')}")
    return body, headers["Content-Type"]


def photo(photo_id):
    status, headers, body = request("GET", f"/photos/{photo_id}")
    if status != 200 or not headers.get("Content-Type", "").startswith("image/"):
        fail(f"GET /photos/{photo_id} answered {status} {headers.get('Content-Type')}")
    return hashlib.sha256(body).hexdigest(), len(body)


if MODE == "first":
    token = csrf("/sign-up")
    form = {"_csrf": token, "email": EMAIL, "display_name": "Compose", "password": PASSWORD,
            "password_confirmation": PASSWORD}
    if os.environ.get("SETUP_CODE"):
        form["invite"] = os.environ["SETUP_CODE"]
    status, headers, _ = request("POST", "/sign-up", form)
    if status != 303 or not any(c.name.endswith("vt_session") for c in jar):
        fail(f"sign-up answered {status}, cookies {[c.name for c in jar]}")
    print("signed up as", EMAIL, flush=True)
    token = csrf("/")
    status, _, body = request("POST", "/pins", {"_csrf": token, "lat": "48.8584", "lon": "2.2945"}, accept="application/json")
    if status != 201:
        fail(f"POST /pins answered {status}: {body[:200]!r}")
    pin_id = json.loads(body)["id"]
    print("dropped pin", pin_id, flush=True)
    started = time.time()
    album, ready = wait_for_album(pin_id)
    print(f"album of pin {pin_id} ready with {len(ready)} photos after {time.time() - started:.1f} s", flush=True)
    digest, size = photo(ready[0]["id"])
    print(f"photo {ready[0]['id']} served: {size} bytes, sha256 {digest[:16]}…", flush=True)
    own = {}
    if os.environ.get("OWN_PHOTO") != "0":
        # A photo of one's own, as own-photos.js sends it: the file as the body, its name in X-File-Name.
        heic = open(HEIC, "rb").read()
        token = csrf(f"/pins/{pin_id}")
        req = urllib.request.Request(f"{BASE}/pins/{pin_id}/own-photos", data=heic, method="POST",
                                     headers={"X-CSRF-Token": token, "Accept": "application/json", "Content-Type": "image/heic",
                                              "X-File-Name": "IMG_0001.HEIC"})
        try:
            with opener.open(req, timeout=120) as response:
                status, body = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, body = error.code, error.read()
        if status != 201:
            fail(f"adding an iPhone HEIC answered {status}: {body[:300]!r}")
        own_id = json.loads(body)["id"]
        display, kind = own_photo(own_id, original=False)
        if kind != "image/jpeg" or not display.startswith(b"\xff\xd8"):
            fail(f"own photo {own_id}'s display version is {kind}, {display[:4]!r}")
        original, kind = own_photo(own_id, original=True)
        if original != heic or kind != "image/heic":
            fail(f"own photo {own_id}'s original is {len(original)} bytes of {kind}, not the {len(heic)} bytes sent")
        print(f"an iPhone HEIC added to pin {pin_id} as own photo {own_id}: its display version a {len(display)}-byte JPEG, its original byte for byte", flush=True)
        own = {"own": own_id, "own_sha256": hashlib.sha256(heic).hexdigest()}
    session = next(c for c in jar if c.name.endswith("vt_session"))
    with open(STATE, "w") as f:
        json.dump({"cookie": [session.name, session.value], "pin": pin_id, "photo": ready[0]["id"],
                   "sha256": digest, "photos": len(ready), **own}, f)
elif MODE in ("load", "verify"):
    with open(STATE) as f:
        state = json.load(f)
    name, value = state["cookie"]
    host = urllib.parse.urlsplit(BASE).hostname
    jar.set_cookie(http.cookiejar.Cookie(0, name, value, None, False, host, False, False, "/", True, False,
                                         None, False, None, None, {}))
    if MODE == "load":
        token = csrf("/")
        for i in range(int(sys.argv[4])):
            # A place each (about 2 km apart), so each album is a download of its own.
            status, _, body = request("POST", "/pins", {"_csrf": token, "lat": f"{40 + i * 0.02:.4f}", "lon": f"{-3 - i * 0.02:.4f}"},
                                      accept="application/json")
            if status != 201:
                fail(f"POST /pins answered {status}: {body[:200]!r}")
            print(json.loads(body)["id"], flush=True)
    else:
        intact, changed, unserved = 0, [], []
        for line in sys.stdin:
            if not line.strip():
                continue
            photo_id, expected = line.split()
            status, headers, body = request("GET", f"/photos/{photo_id}")
            if status != 200:
                unserved.append(f"{photo_id}:{status}")
            elif hashlib.sha256(body).hexdigest() != expected:
                changed.append(photo_id)
            else:
                intact += 1
        print(f"{intact} intact, {len(changed)} other bytes, {len(unserved)} not served"
              + (f" ({' '.join(unserved[:5])})" if unserved else ""), flush=True)
        sys.exit(0 if not changed and not unserved else 1)
elif MODE == "again":
    with open(STATE) as f:
        state = json.load(f)
    name, value = state["cookie"]
    host = urllib.parse.urlsplit(BASE).hostname
    jar.set_cookie(http.cookiejar.Cookie(0, name, value, None, False, host, False, False, "/", True, False,
                                         None, False, None, None, {}))
    status, _, body = request("GET", "/pins.json")
    if status != 200:
        fail(f"the saved session no longer works: /pins.json answered {status}")
    if state["pin"] not in [p["id"] for p in json.loads(body)["pins"]]:
        fail(f"pin {state['pin']} is missing from /pins.json")
    print("still signed in with the saved session", flush=True)
    album, ready = wait_for_album(state["pin"], seconds=30)
    if len(ready) != state["photos"]:
        fail(f"the album has {len(ready)} ready photos, it had {state['photos']}")
    print(f"pin {state['pin']} and its {len(ready)} photos are there", flush=True)
    digest, size = photo(state["photo"])
    if digest != state["sha256"]:
        fail(f"photo {state['photo']} changed: sha256 {digest} against {state['sha256']}")
    print(f"photo {state['photo']} has the same bytes: sha256 {digest[:16]}…", flush=True)
    if "own" in state:
        original, _ = own_photo(state["own"], original=True)
        if hashlib.sha256(original).hexdigest() != state["own_sha256"]:
            fail(f"own photo {state['own']}'s original changed")
        print(f"own photo {state['own']}'s original has the same bytes", flush=True)
else:
    fail("mode is first, again, load or verify")
