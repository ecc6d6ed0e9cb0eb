#!/usr/bin/env python3
"""Holds one kind of abusive load against a server for script/bench abuse.

    abuse.py PORT KIND COUNT SECONDS [COOKIE PATH]

KIND is one of
  slow-headers  COUNT connections each sending a request head a few bytes at a time (slowloris)
  idle          COUNT keep-alive connections that made one request and then sit idle
  streams       COUNT event streams of one account (COOKIE, PATH = /pins/ID/events)
  chunked       COUNT connections pouring one-byte chunks behind 1 KiB chunk extensions
Connections the server closes are opened again, so the pressure lasts SECONDS. Prints what the
server did to them: opened, refused (503/429 or closed at once), closed later. A refused slot
tries again after 0.1 s: the attack holds COUNT connections rather than flooding connects (which
would measure this script's CPU, on the load generator's core, as much as the server). The attack comes
from 127.0.0.2, so per-address limits apply to it and not to the normal client on 127.0.0.1, as
they would between two hosts.
"""
import selectors
import socket
import sys
import time

port, kind, count, seconds = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
cookie = sys.argv[5] if len(sys.argv) > 5 else ""
path = sys.argv[6] if len(sys.argv) > 6 else "/"

sel = selectors.DefaultSelector()
retry_at = []  # times at which a refused slot opens again
stats = {"opened": 0, "refused": 0, "closed": 0, "bytes_sent": 0}
CHUNK = b"1;" + b"e" * 1024 + b"\r\na\r\n"


def first_bytes():
    if kind == "slow-headers":
        return b"GET / HTTP/1.1\r\nHo"
    if kind == "idle":
        return b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    if kind == "streams":
        return f"GET {path} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nCookie: {cookie}\r\n\r\n".encode()
    if kind == "chunked":
        return b"POST /region HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    raise SystemExit(f"unknown kind {kind}")


def open_one():
    s = socket.socket()
    s.bind(("127.0.0.2", 0))
    s.setblocking(False)
    try:
        s.connect_ex(("127.0.0.1", port))
    except OSError:
        s.close()
        return
    sel.register(s, selectors.EVENT_WRITE | selectors.EVENT_READ, {"sent_head": False, "answered": False})
    stats["opened"] += 1


for _ in range(count):
    open_one()

deadline = time.time() + seconds
last_trickle = time.time()
while time.time() < deadline:
    for key, events in sel.select(timeout=0.2):
        s, data = key.fileobj, key.data
        if events & selectors.EVENT_READ:
            try:
                got = s.recv(65536)
            except (BlockingIOError, InterruptedError):
                got = None
            except ConnectionResetError:
                # Reset at once: the server's per-address cap.
                stats["refused"] += 1
                sel.unregister(s)
                s.close()
                retry_at.append(time.time() + 0.1)
                continue
            except OSError:
                got = b""
            if got == b"":
                stats["closed" if data["answered"] or kind != "streams" else "refused"] += 1
                sel.unregister(s)
                s.close()
                retry_at.append(time.time() + 0.1)
                continue
            if got and (got.startswith(b"HTTP/1.1 503") or got.startswith(b"HTTP/1.1 429")):
                stats["refused"] += 1
                sel.unregister(s)
                s.close()
                retry_at.append(time.time() + 0.1)
                continue
            if got:
                data["answered"] = True
        if events & selectors.EVENT_WRITE:
            try:
                if not data["sent_head"]:
                    s.send(first_bytes())
                    data["sent_head"] = True
                    if kind != "chunked":
                        sel.modify(s, selectors.EVENT_READ, data)
                elif kind == "chunked":
                    stats["bytes_sent"] += s.send(CHUNK * 32)
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                sel.unregister(s)
                s.close()
                stats["refused" if not data["sent_head"] else "closed"] += 1
                retry_at.append(time.time() + 0.1)
    now = time.time()
    due = [t for t in retry_at if t <= now]
    retry_at = [t for t in retry_at if t > now]
    for _ in due:
        open_one()
    if kind == "slow-headers" and time.time() - last_trickle > 2:
        last_trickle = time.time()
        for key in list(sel.get_map().values()):
            try:
                key.fileobj.send(b"s")
            except OSError:
                pass

print(" ".join(f"{k}={v}" for k, v in stats.items()))
