#!/usr/bin/env python3
"""Drives the app through a TLS reverse proxy as browsers would (Tests/Proxy/run starts both).

usage: check.py LABEL HOST HTTPS_PORT HTTP_PORT CA_FILE APP_LOG

HOST (photos.test) resolves to 127.0.0.1 here; clients connect from other loopback addresses
(127.0.0.2, 127.0.0.3), so the app can tell them from the proxy (127.0.0.1, its TRUSTED_PROXIES).
Prints what it checks; exits 1 at the first thing that is not as it should be.
"""
import http.client
import json
import re
import socket
import ssl
import sys
import threading
import time
import urllib.parse

label, host, https_port, http_port, ca_file, app_log = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
context = ssl.create_default_context(cafile=ca_file)
started = time.monotonic()


def say(text):
    print(f"[{label} {time.monotonic() - started:6.2f}s] {text}", flush=True)


def check(condition, text):
    if not condition:
        say("FAILED: " + text)
        sys.exit(1)
    say("ok: " + text)


class Connection(http.client.HTTPSConnection):
    """https://HOST:PORT from a given loopback address, the name checked against the test CA."""

    def __init__(self, source):
        super().__init__(host, https_port, context=context, timeout=30)
        self.source = source

    def connect(self):
        raw = socket.create_connection(("127.0.0.1", https_port), self.timeout, (self.source, 0))
        self.sock = context.wrap_socket(raw, server_hostname=host)


class Client:
    """A browser at one address: a cookie jar, one connection per request."""

    def __init__(self, source):
        self.source = source
        self.cookies = {}
        self.set_cookies = []

    def request(self, method, path, form=None, headers=None):
        connection = Connection(self.source)
        headers = dict(headers or {})
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        body = None
        if form is not None:
            body = urllib.parse.urlencode(form)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        data = response.read().decode("utf-8", "replace")
        for line in response.headers.get_all("Set-Cookie") or []:
            self.set_cookies.append(line)
            pair = line.split(";", 1)[0]
            name, _, value = pair.partition("=")
            if "max-age=0" in line.lower() or not value:
                self.cookies.pop(name, None)
            else:
                self.cookies[name] = value
        connection.close()
        return response.status, response.headers, data

    def csrf(self, path):
        status, _, page = self.request("GET", path)
        match = re.search(r'name="_csrf" value="([^"]*)"', page)
        if not match:
            say(f"FAILED: no CSRF field on {path} ({status})")
            sys.exit(1)
        return match.group(1)


password = "correct horse battery staple"
alice_email = f"alice-{label}@example.org"

# -- http goes to https -------------------------------------------------------------------------
plain = http.client.HTTPConnection("127.0.0.1", http_port, timeout=10)
plain.request("GET", "/sign-in", headers={"Host": f"{host}:{http_port}"})
redirect = plain.getresponse()
check(redirect.status in (301, 308) and (redirect.getheader("Location") or "").startswith("https://"),
      f"http is sent to https ({redirect.status} {redirect.getheader('Location')})")

# -- TLS, HSTS, __Host- cookies -------------------------------------------------------------------
alice = Client("127.0.0.2")
status, headers, page = alice.request("GET", "/sign-up")
check(status == 200, "the sign-up page over https, certificate checked against the test CA")
check((headers.get("Strict-Transport-Security") or "").startswith("max-age="), f"HSTS: {headers.get('Strict-Transport-Security')}")
check(len(headers.get_all("Strict-Transport-Security") or []) == 1, "HSTS sent once")
token = re.search(r'name="_csrf" value="([^"]*)"', page).group(1)
status, headers, _ = alice.request("POST", "/sign-up", form={
    "_csrf": token, "email": alice_email, "display_name": "Alice",
    "password": password, "password_confirmation": password})
check(status == 303, f"signed up through the proxy ({status})")
session = [c for c in alice.set_cookies if c.startswith("__Host-vt_session=")]
check(len(session) == 1 and "Secure" in session[0] and "HttpOnly" in session[0] and "Path=/" in session[0]
      and "Domain" not in session[0], f"session cookie is __Host-, Secure, HttpOnly: {session}")
check(all(c.startswith("__Host-") for c in alice.set_cookies), "every cookie is __Host-")
status, headers, page = alice.request("GET", "/")
check(status == 200 and "Alice" in page, "the map page, signed in")
check(headers.get("Strict-Transport-Security") is not None, "HSTS on the signed-in page")

# -- the app sees each client, not the proxy --------------------------------------------------------
# Mallory, at 127.0.0.3, guesses Alice's password and names Alice's address in X-Forwarded-For
# to get her throttled instead. The app must count the guesses against 127.0.0.3.
mallory = Client("127.0.0.3")


def guesses(word, headers):
    """Six wrong passwords for Alice from Mallory, all with one form's token (a double-submit
    cookie: it stays valid). The sixth is refused only within 2 s of the fifth failure: a page load
    between guesses, on a busy machine, used some of that."""
    token = mallory.csrf("/sign-in")
    return [mallory.request("POST", "/sign-in", form={"_csrf": token, "email": alice_email, "password": f"{word} {attempt}"},
                            headers=headers)[0] for attempt in range(6)]


def alice_signs_in():
    alice.cookies.clear()
    token = alice.csrf("/sign-in")
    return alice.request("POST", "/sign-in", form={"_csrf": token, "email": alice_email, "password": password})[0]


def app_log_text():
    with open(app_log, encoding="utf-8", errors="replace") as f:
        return f.read()


statuses = guesses("guess", {"X-Forwarded-For": "127.0.0.2"})
check(statuses == [422] * 5 + [429], f"the guesser is slowed after five failures: {statuses}")
status = alice_signs_in()
check(status == 303, f"Alice, from her own address, signs in at once ({status}): throttling is per client, not per proxy")
log = app_log_text()
guessed = [line for line in log.splitlines() if "POST /sign-in 4" in line]
check(guessed and all(line.rstrip().endswith(" 127.0.0.3") for line in guessed),
      f"the app logged the guesses from 127.0.0.3 ({len(guessed)} lines, e.g. {guessed[-1].split(' http: ')[-1] if guessed else ''})")
check(any(line.rstrip().endswith(" 127.0.0.2") and "POST /sign-in 303" in line for line in log.splitlines()),
      "and Alice's sign-in from 127.0.0.2")
check("not a trusted proxy" not in log, "no warning about forwarding headers (the proxy is trusted)")

# Mallory tries again naming Alice in RFC 7239 Forwarded, which neither proxy removes: the app reads
# X-Forwarded-For alone, so the guesses still count against 127.0.0.3 and Alice still signs in.
logged = len(log)
guesses("again", {"Forwarded": "for=127.0.0.2", "X-Forwarded-For": "127.0.0.2"})
status = alice_signs_in()
check(status == 303, f"a spoofed Forwarded header gets nobody else throttled: Alice signs in at once ({status})")
spoofed = [line for line in app_log_text()[logged:].splitlines() if "POST /sign-in 4" in line]
check(len(spoofed) == 6 and all(line.rstrip().endswith(" 127.0.0.3") for line in spoofed),
      f"the app logged Mallory's address, not the one her Forwarded header named ({len(spoofed)} lines)")

# -- a file to import (up to 5 MB) passes the proxy's body limit, which is 1 MiB elsewhere ---------
token = alice.csrf("/import")
boundary = "----VirtualTouristProxyCheck"
gpx = b'<gpx><wpt lat="35.0116" lon="135.7681"><name>Kyoto</name></wpt></gpx>' + b"\n" * (4 * 1024 * 1024)
body = (f'--{boundary}\r\nContent-Disposition: form-data; name="_csrf"\r\n\r\n{token}\r\n--{boundary}\r\n'
        'Content-Disposition: form-data; name="file"; filename="kyoto.gpx"\r\nContent-Type: application/gpx+xml\r\n\r\n'
        ).encode() + gpx + f"\r\n--{boundary}--\r\n".encode()
connection = Connection(alice.source)
connection.request("POST", "/import", body=body, headers={
    "Cookie": "; ".join(f"{k}={v}" for k, v in alice.cookies.items()), "Content-Type": f"multipart/form-data; boundary={boundary}"})
response = connection.getresponse()
response.read()
connection.close()
check(response.status == 303 and (response.getheader("Location") or "").startswith("/import/"),
      f"a 4 MB file to import went through to its preview ({response.status} {response.getheader('Location')})")

# -- an album's event stream arrives as events happen -----------------------------------------------
token = alice.csrf("/")
status, _, body = alice.request("POST", "/pins", form={"_csrf": token, "lat": "35.0116", "lon": "135.7681"},
                                headers={"Accept": "application/json"})
check(status == 201, f"dropped a pin ({status})")
pin = json.loads(body)["id"]

events = []  # (monotonic time, bytes of one event)
stream_error = []


def read_stream():
    raw = socket.create_connection(("127.0.0.1", https_port), 30, ("127.0.0.2", 0))
    sock = context.wrap_socket(raw, server_hostname=host)
    cookie = "; ".join(f"{k}={v}" for k, v in alice.cookies.items())
    sock.sendall(f"GET /pins/{pin}/events HTTP/1.1\r\nHost: {host}:{https_port}\r\nCookie: {cookie}\r\n"
                 "Accept: text/event-stream\r\n\r\n".encode())
    buffer = b""
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                break
            now = time.monotonic()
            buffer += data
            # Chunk sizes (HTTP/1.1) or raw bytes: either way each event carries one "event: change".
            while b"event: change" in buffer:
                before, _, buffer = buffer.partition(b"event: change")
                events.append((now, before[-40:]))
    except Exception as error:  # the test closes the socket at the end
        stream_error.append(error)


reader = threading.Thread(target=read_stream, daemon=True)
reader.start()
# A buffering proxy holds a short event until its buffer fills or the stream ends, far longer than
# this; 5 s was close to what a TLS handshake and a debug build can take on a loaded machine.
deadline = time.monotonic() + 12
while not events and time.monotonic() < deadline:
    time.sleep(0.02)
check(events, "the stream's first event (the catch-up) arrived at once, not held in a proxy buffer")
# The pin's own album started downloading when it was dropped, and may have finished before the
# stream was open (it takes about two fixture round trips). Let it finish, then ask for a New
# Collection with the stream open: all of that download happens while it is watched.
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    status, _, body = alice.request("GET", f"/pins/{pin}/album.json")
    if status == 200 and json.loads(body)["status"] != "downloading":
        break
    time.sleep(0.1)
status, _, page = alice.request("GET", f"/pins/{pin}")
check(status == 200, "opened the album")
token = re.search(r'name="_csrf" value="([^"]*)"', page).group(1)
opened = time.monotonic()
status, _, _ = alice.request("POST", f"/pins/{pin}/collection", form={"_csrf": token},
                             headers={"Accept": "application/json", "X-CSRF-Token": token})
check(status == 202, f"New Collection: its photos start downloading ({status})")
first_live = None
deadline = time.monotonic() + 60
album = {}
while time.monotonic() < deadline:
    live = [t for t, _ in events if t > opened]
    status, _, body = alice.request("GET", f"/pins/{pin}/album.json")
    album = json.loads(body)
    if live and first_live is None:
        first_live = (live[0], album["status"], sum(1 for p in album["photos"] if p["status"] == "ready"), len(album["photos"]))
    if album["status"] == "ready":
        break
    time.sleep(0.1)
complete = time.monotonic()
live = [t for t, _ in events if t > opened]
check(album.get("status") == "ready", f"the album completed ({len(album.get('photos', []))} photos)")
time.sleep(0.5)
live = [t for t, _ in events if t > opened]
check(len(live) >= 2, f"{len(live)} events arrived while it downloaded, at +" + ", +".join(f"{t - opened:.2f}s" for t in live[:8]))
check(first_live is not None and first_live[0] < complete,
      f"the first arrived {first_live[0] - opened:.2f}s after opening, before the album was complete "
      f"(it said {first_live[1]}, {first_live[2]} of {first_live[3]} photos ready)" if first_live else "no live event")
say("all checks passed")
