#!/usr/bin/env python3
"""Drops pins through the app as the map script does (POST /pins, JSON), on one keep-alive
connection, and prints their ids. Each drop queues the pin's first album (script/bench albums).

Usage: drop-pins.py PORT SESSION_COOKIE COUNT [FIRST]
Pins are spread over land-ish latitudes, about a kilometre or more apart, so each is its own place
for the fixture (its own photos).
"""
import http.client
import json
import re
import sys

port, session, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
first = int(sys.argv[4]) if len(sys.argv) > 4 else 0
cookie = "vt_session=" + session
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
conn.request("GET", "/", headers={"Cookie": cookie})
page = conn.getresponse().read().decode()
csrf = re.search(r'data-csrf="([^"]*)"', page).group(1)
for n in range(first, first + count):
    lat = -50 + (n % 200) * 0.5 + 0.013 * (n // 200)
    lon = -170 + (n // 200) * 3.1 + (n % 7) * 0.011
    body = f"lat={lat:.4f}&lon={lon:.4f}"
    conn.request("POST", "/pins", body=body, headers={
        "Cookie": cookie, "X-CSRF-Token": csrf, "Accept": "application/json",
        "Content-Type": "application/x-www-form-urlencoded"})
    response = conn.getresponse()
    answer = response.read()
    if response.status != 201:
        sys.exit(f"POST /pins answered {response.status}: {answer[:200]!r}")
    print(json.loads(answer)["id"], flush=True)
