#!/usr/bin/env python3
"""script/bench shared, the live part: every member's map page open at once, one member drops pins.

    bench-shared.py BASE_URL PEOPLE DROPS

Members 1..PEOPLE are seeded with sessions S000…N (script/bench.d/shared). Each member's "page" is
two keep-alive connections, as a browser's: a /map/events stream and one for /pins.json. Member 2
drops DROPS pins a second apart (POST /pins with the CSRF header, as app.js sends it); each other
member, on the "pins" event, asks /pins.json for a box around the pin at zoom 8 (app.js asks for
its view) and checks the pin is in the answer. Printed: the time from the POST being sent to each
page's /pins.json answer holding the new pin — median, p90, p99, max — and how many pages never
saw it. One asyncio loop: 2 × PEOPLE sockets, no threads.
"""
import asyncio, json, statistics, sys, time
from urllib.parse import urlparse

BASE, PEOPLE, DROPS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
HOST, PORT = urlparse(BASE).hostname, urlparse(BASE).port
DROPPER = 2


def token(n):
    return "S" + str(n).rjust(42, "0")


def csrf(n):
    return "csrfS" + str(n).rjust(38, "0")


async def read_response(reader):
    """One HTTP/1.1 response with a Content-Length (our server's JSON answers): status, body."""
    status = (await reader.readline()).split()[1]
    length = 0
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        if name.lower() == "content-length":
            length = int(value)
    body = await reader.readexactly(length) if length else b""
    return int(status), body


class Page:
    """One member's open map page."""

    def __init__(self, n):
        self.n = n
        self.cookie = f"vt_session={token(n)}"
        self.seen = {}  # pin id -> monotonic time its /pins.json answer held it
        self.ready = asyncio.Event()

    async def open(self):
        self.stream_r, self.stream_w = await asyncio.open_connection(HOST, PORT)
        self.stream_w.write(f"GET /map/events HTTP/1.1\r\nHost: {HOST}\r\nCookie: {self.cookie}\r\nAccept: text/event-stream\r\n\r\n".encode())
        await self.stream_w.drain()
        status = (await self.stream_r.readline()).split()[1]
        if status != b"200":
            raise SystemExit(f"member {self.n}: /map/events answered {status.decode()}")
        while (await self.stream_r.readline()) not in (b"\r\n", b""):
            pass
        self.json_r, self.json_w = await asyncio.open_connection(HOST, PORT)
        self.ready.set()

    async def follow(self):
        """On each "pins" event, reads the view around the pin. The k-th new pin heard is the k-th
        drop (only drops make map events here), so its place is known before the POST's answer."""
        event, order = None, []
        while True:
            line = await self.stream_r.readline()
            if not line:
                return
            line = line.strip()
            # Chunked framing: skip the chunk-size lines; events are "event:" then "data:".
            if line.startswith(b"event:"):
                event = line[6:].strip()
            elif line.startswith(b"data:") and event == b"pins":
                pin = int(line[5:].strip())
                if pin not in order:
                    order.append(pin)
                    lat, lon = place(len(order) - 1)
                    path = f"/pins.json?bbox={lon - 1.5},{lat - 1},{lon + 1.5},{lat + 1}&zoom=8"
                    self.json_w.write(f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\nCookie: {self.cookie}\r\n\r\n".encode())
                    await self.json_w.drain()
                    status, body = await read_response(self.json_r)
                    if status == 200 and any(p["id"] == pin for p in json.loads(body)["pins"]):
                        self.seen[pin] = time.monotonic()
                event = None


def place(k):
    return 20 + k * 0.37, -40 + k * 0.61


async def drop(n, lat, lon):
    reader, writer = await asyncio.open_connection(HOST, PORT)
    form = f"lat={lat:.6f}&lon={lon:.6f}".encode()
    writer.write((f"POST /pins HTTP/1.1\r\nHost: {HOST}\r\nCookie: vt_session={token(n)}\r\nX-CSRF-Token: {csrf(n)}\r\n"
                  f"Accept: application/json\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {len(form)}\r\n"
                  f"Connection: close\r\n\r\n").encode() + form)
    sent = time.monotonic()
    await writer.drain()
    status, body = await read_response(reader)
    answered = time.monotonic()
    writer.close()
    if status != 201:
        raise SystemExit(f"POST /pins answered {status}: {body[:200]!r}")
    return json.loads(body)["id"], sent, answered


async def main():
    pages = [Page(n) for n in range(1, PEOPLE + 1)]
    for chunk in range(0, len(pages), 50):
        await asyncio.gather(*(p.open() for p in pages[chunk:chunk + 50]))
    followers = [asyncio.create_task(p.follow()) for p in pages if p.n != DROPPER]
    await asyncio.sleep(0.5)
    sent_at, answer_ms = {}, []
    for k in range(DROPS):
        pin, sent, answered = await drop(DROPPER, *place(k))
        sent_at[pin] = sent
        answer_ms.append((answered - sent) * 1000)
        await asyncio.sleep(1)
    await asyncio.sleep(2)
    for task in followers:
        task.cancel()
    times, missed = [], 0
    for page in pages:
        if page.n == DROPPER:
            continue
        for pin, sent in sent_at.items():
            if pin in page.seen:
                times.append((page.seen[pin] - sent) * 1000)
            else:
                missed += 1
    times.sort()

    def pct(q):
        return times[min(len(times) - 1, int(q * len(times)))] if times else float("nan")

    print(f"  POST /pins answered: median {statistics.median(answer_ms):.1f} ms")
    print(f"  drop → another member's page holding the pin ({len(times)} pages × drops): median {pct(0.5):.0f} ms, "
          f"p90 {pct(0.9):.0f}, p99 {pct(0.99):.0f}, max {times[-1] if times else float('nan'):.0f}; not seen: {missed}")


asyncio.run(main())
