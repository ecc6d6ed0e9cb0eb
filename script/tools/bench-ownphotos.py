#!/usr/bin/env python3
"""script/bench ownphotos: own photos over loopback (script/bench.d/ownphotos runs it).

    bench-ownphotos.py make DIR JPEG HEIC PHOTOS HEICS
        PHOTOS copies of JPEG and HEICS of HEIC in DIR, each different (a JPEG comment segment; a
        HEIC 'free' box at its end), so each is a new photo to the server.
    bench-ownphotos.py run DIR PORT NGINX_PORT SESSION SERVER_PID DATABASE_URL WRK
        Sends DIR's files as own-photos.js does (each its own request, two at a time) to a new
        pin's album, then the same bytes to nginx; prints MB/s, CPU ms per photo (the server's
        utime + stime over the batch), peak RSS; then wrk on an album page of 30 own photos and one
        of 30 provider photos.
    bench-ownphotos.py many JPEG COUNT "LABEL PORT PID SESSION"...
        For each server in turn: COUNT uploads of JPEG padded to 30 MB (comment segments), sent
        at once, each at 2 MB/s; the server's VmRSS sampled every 50 ms while they arrive and are
        made, and how far it rose above where it stood.
"""
import http.client, json, os, re, statistics, struct, subprocess, sys, threading, time, urllib.parse


def make(folder, jpeg, heic, photos, heics):
    base_jpeg = open(jpeg, "rb").read()
    base_heic = open(heic, "rb").read()
    for n in range(photos):
        comment = b"bench photo %d" % n
        segment = b"\xff\xfe" + struct.pack(">H", len(comment) + 2) + comment
        with open(os.path.join(folder, "IMG_%04d.JPG" % n), "wb") as f:
            f.write(base_jpeg[:2] + segment + base_jpeg[2:])
    for n in range(heics):
        payload = b"bench heic %d" % n
        with open(os.path.join(folder, "IMG_%04d.HEIC" % n), "wb") as f:
            f.write(base_heic + struct.pack(">I4s", 8 + len(payload), b"free") + payload)
    sizes = [os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder)]
    print("    %d JPEGs of %.1f MB (12 MP) and %d HEICs of %.1f MB: %.0f MB in all"
          % (photos, len(base_jpeg) / 1e6, heics, len(base_heic) / 1e6, sum(sizes) / 1e6))


def cpu_ms(pid):
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    # utime + stime, and cutime + cstime: a HEIC is decoded by a child process the server waits for.
    return (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) * 1000 / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024
    return 0


def send_all(port, path, files, headers_for, threads=2):
    """Each file its own POST, `threads` at a time; the statuses."""
    work = list(files)
    lock = threading.Lock()
    statuses = []

    def worker():
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while True:
            with lock:
                if not work:
                    break
                name = work.pop(0)
            body = open(name, "rb").read()
            connection.request("POST", path, body=body, headers=headers_for(name, body))
            response = connection.getresponse()
            response.read()
            with lock:
                statuses.append(response.status)
            if response.getheader("Connection", "").lower() == "close":
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        connection.close()

    workers = [threading.Thread(target=worker) for _ in range(threads)]
    started = time.monotonic()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return statuses, time.monotonic() - started


def run(folder, port, nginx_port, session, server_pid, database, wrk):
    port, nginx_port, server_pid = int(port), int(nginx_port), int(server_pid)
    cookie = "vt_session=" + session

    def get(path):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        connection.request("GET", path, headers={"Cookie": cookie})
        response = connection.getresponse()
        return response.status, response.read().decode()

    def post_form(path, form):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        connection.request("POST", path, body=urllib.parse.urlencode(form),
                           headers={"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"})
        response = connection.getresponse()
        return response.status, response.read().decode()

    token = re.search(r'name="_csrf" value="([^"]+)"', get("/")[1]).group(1)
    pins = [json.loads(post_form("/pins", {"_csrf": token, "lat": lat, "lon": lon})[1])["id"] for lat, lon in ((44.85, 34.97), (35.0116, 135.7681))]
    files = sorted(os.path.join(folder, name) for name in os.listdir(folder))
    total = sum(os.path.getsize(f) for f in files)
    jpegs = [f for f in files if f.endswith(".JPG")]
    heics = [f for f in files if f.endswith(".HEIC")]

    def ours(name, body):
        return {"Cookie": cookie, "X-CSRF-Token": token, "Accept": "application/json", "Content-Type": "image/jpeg",
                "X-File-Name": urllib.parse.quote(os.path.basename(name))}

    print("\n  batch                        files   MB      s     MB/s   CPU ms/photo   statuses")
    rows = []
    for label, batch in (("JPEG 12 MP", jpegs), ("HEIC 12 MP (iPhone)", heics)):
        if not batch:
            continue
        cpu_before = cpu_ms(server_pid)
        statuses, seconds = send_all(port, "/pins/%d/own-photos" % pins[0], batch, ours)
        cpu = cpu_ms(server_pid) - cpu_before
        size = sum(os.path.getsize(f) for f in batch) / 1e6
        counts = {s: statuses.count(s) for s in set(statuses)}
        rows.append((label, len(batch), size, seconds))
        print("  %-26s %6d %6.0f %6.1f %8.1f %12.0f   %s" % (label, len(batch), size, seconds, size / seconds, cpu / len(batch), counts))
    statuses, seconds = send_all(nginx_port, "/upload", files, lambda name, body: {"Content-Type": "image/jpeg"})
    print("  %-26s %6d %6.0f %6.1f %8.1f %12s   %s" % ("the same bytes to nginx", len(files), total / 1e6, seconds, total / 1e6 / seconds, "-",
                                                    {s: statuses.count(s) for s in set(statuses)}))
    ours_seconds = sum(r[3] for r in rows)
    print("  upload throughput: ours %.1f MB/s (versions made in the same request), nginx %.1f MB/s (reads and drops): %.3f×"
          % (total / 1e6 / ours_seconds, total / 1e6 / seconds, (total / ours_seconds) / (total / seconds)))
    print("  server's peak RSS over the batch: %.0f MB (VmHWM)" % peak_rss_mb(server_pid))

    # 30 own photos on one pin, 30 provider photos on the other: the album page, wrk on each.
    subprocess.run(["psql", database, "-qc",
                    "DELETE FROM own_photos WHERE id NOT IN (SELECT id FROM own_photos ORDER BY id LIMIT 30); "
                    "DELETE FROM photos WHERE pin_id = %d" % pins[0]], check=True)
    for _ in range(200):
        if '"status":"ready"' in get("/pins/%d/album.json" % pins[1])[1].replace(" ", ""):
            break
        time.sleep(0.1)
    print("\n  album page                      r/s     p99 ms")
    for label, pin in (("30 own photos", pins[0]), ("30 provider photos", pins[1])):
        out = subprocess.run(["taskset", "-c", "1", wrk, "-t1", "-c16", "-d5s", "--latency", "-H", "Cookie: " + cookie,
                              "http://127.0.0.1:%d/pins/%d" % (port, pin)], capture_output=True, text=True).stdout
        rps = re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1)
        p99 = re.search(r"99%\s+(\S+)", out).group(1)
        print("  %-30s %8s %10s" % (label, rps, p99))


def padded_jpeg(jpeg, size):
    """The JPEG with comment segments after its SOI until it is `size` bytes: still the same photo."""
    base = open(jpeg, "rb").read()
    room = size - len(base)
    segments = []
    while room > 4:
        n = min(65533, room - 4)
        segments.append(b"\xff\xfe" + struct.pack(">H", n + 2) + b"x" * n)
        room -= n + 4
    return base[:2] + b"".join(segments) + base[2:]


def rss_mb(pid):
    """(RssAnon, RssFile) in MB: the heap's pages, and the pages of files it has mapped (the page
    cache's, which the kernel may drop)."""
    found = {}
    for line in open("/proc/%d/status" % pid):
        if line.startswith(("RssAnon", "RssFile")):
            found[line.split(":")[0]] = int(line.split()[1]) / 1024
    return found.get("RssAnon", 0), found.get("RssFile", 0)


def many(jpeg, count, servers):
    photo = padded_jpeg(jpeg, 30 << 20)
    print("\n  %d uploads of a %.0f MB photo at once, each at 2 MB/s: how far the server's RSS rises while they arrive, and then while" % (count, len(photo) / 1e6))
    print("  their versions are made (anon: the heap's pages; file: pages of files it has mapped, which the kernel may drop)")
    print("  server      anon MB before   arriving   making    file MB arriving   making   statuses")
    for line in servers:
        label, port, pid, session = line.split()
        port, pid = int(port), int(pid)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        connection.request("GET", "/", headers={"Cookie": "vt_session=" + session})
        token = re.search(r'name="_csrf" value="([^"]+)"', connection.getresponse().read().decode()).group(1)
        connection.request("POST", "/pins", body=urllib.parse.urlencode({"_csrf": token, "lat": 48.8584, "lon": 2.2945}),
                           headers={"Cookie": "vt_session=" + session, "Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"})
        pin = json.loads(connection.getresponse().read())["id"]
        time.sleep(1)
        start = rss_mb(pid)
        arriving, making = list(start), list(start)
        statuses = []
        sent = []
        lock = threading.Lock()
        barrier = threading.Barrier(count + 1)

        def upload(n):
            body = photo[:2] + b"\xff\xfe\x00\x0a" + (b"many %03d" % n)[:8] + photo[2:]
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            c.putrequest("POST", "/pins/%d/own-photos" % pin)
            for name, value in (("Cookie", "vt_session=" + session), ("X-CSRF-Token", token), ("Accept", "application/json"),
                                ("Content-Type", "image/jpeg"), ("X-File-Name", "many-%d.jpg" % n), ("Content-Length", str(len(body)))):
                c.putheader(name, value)
            c.endheaders()
            # All but the last kilobyte at 2 MB/s, then together once every upload is that far: the
            # bodies have all arrived but none is complete, so none is being made yet.
            piece, last = 1 << 20, len(body) - 1024
            for at in range(0, last, piece):
                c.send(body[at:min(at + piece, last)])
                time.sleep(0.5)
            with lock:
                sent.append(n)
            barrier.wait()
            c.send(body[last:])
            response = c.getresponse()
            response.read()
            with lock:
                statuses.append(response.status)

        threads = [threading.Thread(target=upload, args=(n,)) for n in range(count)]
        for t in threads:
            t.start()
        released = False
        while any(t.is_alive() for t in threads):
            now = rss_mb(pid)
            peak = making if released else arriving
            peak[0], peak[1] = max(peak[0], now[0]), max(peak[1], now[1])
            if not released and len(sent) == count:
                time.sleep(0.5)  # what the server holds once it has read them
                now = rss_mb(pid)
                arriving[0], arriving[1] = max(arriving[0], now[0]), max(arriving[1], now[1])
                barrier.wait()
                released = True
            time.sleep(0.05)
        print("  %-10s %16.0f %8s %8s %16s %8s   %s" % (label, start[0], "+%.0f" % (arriving[0] - start[0]), "+%.0f" % (making[0] - start[0]),
                                                      "+%.0f" % (arriving[1] - start[1]), "+%.0f" % (making[1] - start[1]),
                                                      {s: statuses.count(s) for s in set(statuses)}))


if __name__ == "__main__":
    if sys.argv[1] == "many":
        many(sys.argv[2], int(sys.argv[3]), sys.argv[4:])
    elif sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]))
    else:
        run(*sys.argv[2:9])
