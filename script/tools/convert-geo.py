#!/usr/bin/env python3
"""Converts the raw geodata in ../shared/data/geo into the files the app serves (run once; the
output is committed, the app never reads ../shared):

  Public/basemap/L/X_Y.json     land for basemap level L (a zoom band) in cell X, Y: polygons
                                (Natural Earth countries) simplified for the band and clipped to the
                                cell, border lines, and labels of large places (GeoNames)
  Public/geo/places.tsv.gz      GeoNames places with population >= 5,000 for search and naming pins

Usage: script/tools/convert-geo.py [SHARED_GEO_DIR]
Standard library only: the shapefile and dBase readers below follow the ESRI Shapefile Technical
Description (1998) for polygon records (type 5) and dBase III for attributes.
"""
import gzip, io, json, lzma, math, os, struct, sys, zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "..", "shared", "data", "geo")

# (level, source, Douglas-Peucker tolerance in degrees, coordinate quantum in degrees,
#  min population of labels, cell size in degrees). Cells start at lon -180, lat -90.
LEVELS = [
    (0, "110m", 0.0, 0.01, 3_000_000, 360),
    (1, "10m", 0.08, 0.01, 800_000, 360),
    (2, "10m", 0.02, 0.001, 250_000, 30),
    (3, "10m", 0.005, 0.001, 80_000, 10),
]
# Cells overlap by this much so anti-aliased edges of neighbouring fills do not show a seam.
MARGIN = 0.02


def read_dbf(data):
    count, header_len, record_len = struct.unpack("<IHH", data[4:12])
    fields, pos = [], 32
    while data[pos] != 0x0D:
        name = data[pos:pos + 11].split(b"\0")[0].decode("ascii")
        fields.append((name, data[pos + 16]))
        pos += 32
    records = []
    for i in range(count):
        start = header_len + i * record_len + 1  # first byte: deletion flag
        record, offset = {}, start
        for name, length in fields:
            record[name] = data[offset:offset + length].decode("utf-8", "replace").strip()
            offset += length
        records.append(record)
    return records


def read_shp_polygons(data):
    """Yields a list of rings (lists of (lon, lat)) per record."""
    pos = 100
    while pos < len(data):
        _, content_words = struct.unpack(">ii", data[pos:pos + 8])
        content = data[pos + 8:pos + 8 + content_words * 2]
        pos += 8 + content_words * 2
        shape_type = struct.unpack("<i", content[:4])[0]
        if shape_type == 0:
            yield []
            continue
        assert shape_type in (5, 15, 25), shape_type
        num_parts, num_points = struct.unpack("<ii", content[36:44])
        parts = list(struct.unpack("<%di" % num_parts, content[44:44 + 4 * num_parts]))
        pts_at = 44 + 4 * num_parts
        points = [struct.unpack("<dd", content[pts_at + 16 * i:pts_at + 16 * i + 16]) for i in range(num_points)]
        parts.append(num_points)
        yield [points[parts[i]:parts[i + 1]] for i in range(num_parts)]


def simplify(ring, tolerance):
    """Douglas-Peucker, iterative, keeping the ring closed."""
    if tolerance <= 0 or len(ring) < 5:
        return ring
    keep = [False] * len(ring)
    keep[0] = keep[-1] = True
    stack = [(0, len(ring) - 1)]
    while stack:
        a, b = stack.pop()
        ax, ay = ring[a]
        bx, by = ring[b]
        dx, dy = bx - ax, by - ay
        norm = math.hypot(dx, dy)
        best, index = -1.0, -1
        for i in range(a + 1, b):
            px, py = ring[i]
            d = abs(dy * (px - ax) - dx * (py - ay)) / norm if norm > 0 else math.hypot(px - ax, py - ay)
            if d > best:
                best, index = d, i
        if best > tolerance:
            keep[index] = True
            stack.append((a, index))
            stack.append((index, b))
    return [p for p, k in zip(ring, keep) if k]


def ring_area(ring):
    return abs(sum(x1 * y2 - x2 * y1 for (x1, y1), (x2, y2) in zip(ring, ring[1:] + ring[:1]))) / 2


def clip_polygon(ring, x0, y0, x1, y1):
    """Sutherland-Hodgman against a rectangle: fine for filling (edges along the cell boundary
    are never stroked; border lines are clipped separately)."""
    def clip(points, inside, intersect):
        out = []
        for i, current in enumerate(points):
            previous = points[i - 1]
            if inside(current):
                if not inside(previous):
                    out.append(intersect(previous, current))
                out.append(current)
            elif inside(previous):
                out.append(intersect(previous, current))
        return out

    def at_x(x):
        return lambda p, q: (x, p[1] + (q[1] - p[1]) * (x - p[0]) / (q[0] - p[0]))

    def at_y(y):
        return lambda p, q: (p[0] + (q[0] - p[0]) * (y - p[1]) / (q[1] - p[1]), y)

    points = ring
    for inside, intersect in ((lambda p: p[0] >= x0, at_x(x0)), (lambda p: p[0] <= x1, at_x(x1)),
                              (lambda p: p[1] >= y0, at_y(y0)), (lambda p: p[1] <= y1, at_y(y1))):
        if not points:
            break
        points = clip(points, inside, intersect)
    return points


def clip_line(ring, x0, y0, x1, y1):
    """The parts of a closed ring inside a rectangle, as polylines (Liang-Barsky per segment)."""
    lines, current = [], []
    closed = ring + ring[:1]
    for (ax, ay), (bx, by) in zip(closed, closed[1:]):
        t0, t1, dx, dy = 0.0, 1.0, bx - ax, by - ay
        ok = True
        for p, q in ((-dx, ax - x0), (dx, x1 - ax), (-dy, ay - y0), (dy, y1 - ay)):
            if p == 0:
                if q < 0:
                    ok = False
                    break
            else:
                t = q / p
                if p < 0:
                    t0 = max(t0, t)
                else:
                    t1 = min(t1, t)
        if not ok or t0 > t1:
            if len(current) > 1:
                lines.append(current)
            current = []
            continue
        start = (ax + t0 * dx, ay + t0 * dy)
        end = (ax + t1 * dx, ay + t1 * dy)
        if not current or current[-1] != start:
            if len(current) > 1:
                lines.append(current)
            current = [start]
        current.append(end)
        if t1 < 1.0:
            lines.append(current)
            current = []
    if len(current) > 1:
        lines.append(current)
    return lines


def encode_ring(ring, quantum):
    """Flat [x0, y0, dx1, dy1, ...] integers in units of `quantum` degrees: small numbers that
    compress well and parse fast."""
    out, px, py = [], 0, 0
    for lon, lat in ring:
        x, y = round(lon / quantum), round(lat / quantum)
        out += [x - px, y - py]
        px, py = x, y
    return out


def load_countries():
    sources = {}
    base = os.path.join(SRC, "ne_110m_countries", "naturalearth_lowres")
    with open(base + ".shp", "rb") as f:
        shapes = list(read_shp_polygons(f.read()))
    with open(base + ".dbf", "rb") as f:
        attrs = read_dbf(f.read())
    sources["110m"] = [(a.get("name", ""), s) for a, s in zip(attrs, shapes)]
    with zipfile.ZipFile(os.path.join(SRC, "ne_10m_admin_0_countries_deu.zip")) as z:
        shp = z.read("ne_10m_admin_0_countries_deu.shp")
        dbf = z.read("ne_10m_admin_0_countries_deu.dbf")
    attrs = read_dbf(dbf)
    sources["10m"] = [(a.get("NAME", a.get("ADMIN", "")), s) for a, s in zip(attrs, read_shp_polygons(shp))]
    return sources


def load_places():
    with open(os.path.join(SRC, "geonames_countries.json"), encoding="utf-8") as f:
        countries = json.load(f)
    if isinstance(countries, dict):
        countries = countries.get("geonames", countries.get("countries", list(countries.values())))
    names = {}
    capitals = {}
    for c in countries:
        code = c.get("iso") or c.get("countryCode") or c.get("iso_alpha2") or c.get("ISO")
        name = c.get("name") or c.get("countryName") or c.get("Country")
        if code and name:
            names[code] = name
        if code and c.get("capital"):
            capitals[code] = c["capital"]
    places = []
    with lzma.open(os.path.join(SRC, "geonames_cities1000.tsv.xz"), "rt", encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        col = {name: i for i, name in enumerate(header)}
        for line in f:
            row = line.rstrip("\n").split("\t")
            population = int(row[col["population"]] or 0)
            places.append((row[col["name"]], float(row[col["latitude"]]), float(row[col["longitude"]]),
                           row[col["country"]], names.get(row[col["country"]], row[col["country"]]), population))
    # A country's capital: the largest place of that name in that country (the file has no
    # feature codes; every row is a populated place). Search ranks capitals before other cities.
    largest = {}
    for i, (name, _, _, code, _, population) in enumerate(places):
        if capitals.get(code) == name and (code not in largest or population > places[largest[code]][5]):
            largest[code] = i
    capital_rows = set(largest.values())
    return [p + (1 if i in capital_rows else 0,) for i, p in enumerate(places)]


def main():
    sources = load_countries()
    places = load_places()
    places.sort(key=lambda p: -p[5])
    out_dir = os.path.join(ROOT, "Public", "basemap")
    os.makedirs(out_dir, exist_ok=True)
    for level, source, tolerance, quantum, min_population, size in LEVELS:
        # Simplify once per level, then cut into cells.
        simplified = []
        for name, rings in sources[source]:
            kept = []
            for ring in rings:
                simple = simplify(ring, tolerance)
                # Islands smaller than a few pixels at this level are noise.
                if len(simple) >= 4 and ring_area(simple) >= tolerance * tolerance * 4:
                    kept.append(simple)
            if kept:
                simplified.append((name, kept))
        level_dir = os.path.join(out_dir, str(level))
        os.makedirs(level_dir, exist_ok=True)
        for old in os.listdir(level_dir):
            os.remove(os.path.join(level_dir, old))
        files, points, total_bytes, largest = 0, 0, 0, 0
        for cy in range(max(1, 180 // size)):
            for cx in range(360 // size):
                x0, y0 = -180 + cx * size, -90 + cy * size
                x1, y1 = x0 + size, y0 + size
                fills, lines = [], []
                for name, rings in simplified:
                    for ring in rings:
                        xs = [p[0] for p in ring]
                        ys = [p[1] for p in ring]
                        if max(xs) < x0 or min(xs) > x1 or max(ys) < y0 or min(ys) > y1:
                            continue
                        if size >= 360:
                            # Unclipped: the client strokes the fills themselves.
                            fills.append(encode_ring(ring, quantum))
                            points += len(ring)
                            continue
                        clipped = clip_polygon(ring, x0 - MARGIN, y0 - MARGIN, x1 + MARGIN, y1 + MARGIN)
                        if len(clipped) >= 3:
                            fills.append(encode_ring(clipped, quantum))
                            points += len(clipped)
                        for line in clip_line(ring, x0, y0, x1, y1):
                            lines.append(encode_ring(line, quantum))
                labels = [[p[0], round(p[1], 4), round(p[2], 4), p[5]] for p in places
                          if p[5] >= min_population and x0 <= p[2] < x1 and y0 <= p[1] < y1]
                if not fills and not labels:
                    continue  # open sea: the server answers an empty cell
                document = {"quantum": quantum, "fills": fills, "lines": lines, "labels": labels}
                path = os.path.join(level_dir, "%d_%d.json" % (cx, cy))
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(document, f, ensure_ascii=False, separators=(",", ":"))
                files += 1
                size_now = os.path.getsize(path)
                total_bytes += size_now
                largest = max(largest, size_now)
        print("level %d: %d cells of %d°, %d fill points, %.0f KB in all, largest cell %.0f KB" % (
            level, files, size, points, total_bytes / 1024, largest / 1024))
    with open(os.path.join(out_dir, "ATTRIBUTION.txt"), "w", encoding="utf-8") as f:
        f.write("Land and borders: Natural Earth (naturalearthdata.com), public domain.\n"
                "Place names: GeoNames (geonames.org), CC BY 4.0.\n"
                "Converted by script/tools/convert-geo.py.\n")

    geo_dir = os.path.join(ROOT, "Public", "geo")
    os.makedirs(geo_dir, exist_ok=True)
    kept = [p for p in places if p[5] >= 5000]
    buffer = io.StringIO()
    buffer.write("# GeoNames places with population >= 5000 (CC BY 4.0, geonames.org): name, lat, lon, country code, country, population, capital (1 or 0)\n")
    for name, lat, lon, code, country, population, capital in kept:
        buffer.write("%s\t%.4f\t%.4f\t%s\t%s\t%d\t%d\n" % (name, lat, lon, code, country, population, capital))
    with gzip.GzipFile(os.path.join(geo_dir, "places.tsv.gz"), "wb", mtime=0) as f:
        f.write(buffer.getvalue().encode("utf-8"))
    print("places: %d rows, %.0f KB" % (len(kept), os.path.getsize(os.path.join(geo_dir, "places.tsv.gz")) / 1024))


if __name__ == "__main__":
    main()
