#!/usr/bin/env python3
"""PMTiles archives for tests and benchmarks, written by other software than our reader (Python's
`pmtiles` writer and `mapbox-vector-tile` encoder, installed from PyPI when missing).

  make-tiles.py vector OUT.pmtiles [GEO_DIR]
      A vector (MVT, gzip) archive in the Protomaps basemap layer schema (earth, water, landuse,
      roads, buildings, boundaries, places): the whole world at zoom 0-3 from Natural Earth 1:110m,
      and zoom 4-14 around Naples (a coastal city, so one view has land, sea, roads and labels) from
      Natural Earth 1:10m and GeoNames. Natural Earth has no streets or buildings: the roads join
      each GeoNames place to its nearest neighbours (kind by population) and the buildings are
      squares on a grid near places. They exist to exercise the style, not to be a map.
  make-tiles.py leaves OUT.pmtiles
      A small raster-typed archive of 32,768 tiny tiles at zoom 8 whose directory entries do not
      compress, so the writer needs leaf directories and a reader must follow root -> leaf.
  make-tiles.py manifest ARCHIVE
      Every tile the archive addresses: "z x y length fnv1a64" lines, the reference tests compare with.
  make-tiles.py extract ARCHIVE DIR
      Writes every tile to DIR/z/x/y (for nginx in script/bench tiles).

GEO_DIR holds ne_110m_countries/, ne_10m_admin_0_countries_deu.zip and geonames_cities1000.tsv.xz
(the project's data sources, see README "Credits"); it is read once, the output is committed.
"""
import gzip, io, json, lzma, math, os, subprocess, sys, zipfile


def need(*modules):
    try:
        for m in modules:
            __import__(m)
    except ImportError:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                               "pmtiles", "mapbox-vector-tile", "pyshp", "shapely"])


def fnv1a(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def all_entries(path):
    """(z, x, y, bytes) for every addressed tile, walking directories with the pmtiles package."""
    from pmtiles.reader import Reader, MmapSource, all_tiles
    with open(path, "rb") as f:
        yield from ((z, x, y, data) for (z, x, y), data in all_tiles(MmapSource(f)))


def manifest(path):
    for z, x, y, data in sorted(all_entries(path)):
        print(z, x, y, len(data), format(fnv1a(data), "016x"))


def extract(path, out):
    for z, x, y, data in all_entries(path):
        os.makedirs(f"{out}/{z}/{x}", exist_ok=True)
        with open(f"{out}/{z}/{x}/{y}", "wb") as f:
            f.write(data)


def leaf_tile(z, x, y):
    """The leaves archive's content for a tile, or None (Tests/VirtualTouristTests/Values/PMTilesTests.swift
    computes the same): half the zoom-8 tiles, each one of 300 blobs of 3-300 bytes."""
    h = (x * 73856093 ^ y * 19349663 ^ z * 83492791) & 0xFFFFFFFF
    if h % 2:
        return None
    k = (h >> 8) % 300
    return (f"{k}:" + "abcdefghijklmnopqrstuvwxyz"[k % 26] * (k + 1)).encode()


def leaves(out):
    """32,768 tiles whose entries do not compress: the pmtiles writer itself needs leaf
    directories for them (the root must stay under 16 KB)."""
    import pmtiles.writer as w
    from pmtiles.tile import zxy_to_tileid, TileType, Compression
    tiles = []
    for x in range(256):
        for y in range(256):
            data = leaf_tile(8, x, y)
            if data:
                tiles.append((zxy_to_tileid(8, x, y), data))
    tiles.sort()
    with w.write(out) as writer:
        for tid, data in tiles:
            writer.write_tile(tid, data)
        writer.finalize({"tile_type": TileType.PNG, "tile_compression": Compression.NONE,
                         "min_lon_e7": -1800000000, "min_lat_e7": -850000000, "max_lon_e7": 1800000000,
                         "max_lat_e7": 850000000, "center_zoom": 0, "center_lon_e7": 0, "center_lat_e7": 0},
                        {"name": "leaves", "attribution": "test pattern"})
    print(f"{out}: {len(tiles)} tiles, {os.path.getsize(out)} bytes", file=sys.stderr)


# ----- the vector archive -----

REGION = (14.05, 40.70, 14.50, 41.00)   # west, south, east, north: Naples and its bay
WORLD_MAX = 3
MAX_ZOOM = 14
EXTENT = 4096


def mercator(lon, lat):
    lat = max(-85.0511, min(85.0511, lat))
    x = (lon + 180) / 360
    y = (1 - math.log(math.tan(math.radians(lat)) + 1 / math.cos(math.radians(lat))) / math.pi) / 2
    return x, y


def tile_range(z, box):
    w, s, e, n = box
    x0, y0 = mercator(w, n)
    x1, y1 = mercator(e, s)
    k = 1 << z
    return (max(0, int(x0 * k)), min(k - 1, int(x1 * k)), max(0, int(y0 * k)), min(k - 1, int(y1 * k)))


def load_geo(geo):
    import shapefile
    from shapely.geometry import shape
    from shapely.ops import unary_union

    def countries(path):
        r = shapefile.Reader(path)
        fields = [f[0] for f in r.fields[1:]]
        out = []
        for rec, shp in zip(r.records(), r.shapes()):
            g = shape(shp.__geo_interface__).buffer(0)
            out.append((dict(zip(fields, rec)), g))
        return out

    c110 = countries(os.path.join(geo, "ne_110m_countries", [f for f in os.listdir(os.path.join(geo, "ne_110m_countries")) if f.endswith(".shp")][0]))
    c10 = countries(os.path.join(geo, "ne_10m_admin_0_countries_deu.zip"))
    places = []
    with lzma.open(os.path.join(geo, "geonames_cities1000.tsv.xz"), "rt", encoding="utf-8") as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) < 7 or not cols[6].isdigit():
                continue
            places.append((cols[1], float(cols[2]), float(cols[3]), int(cols[6])))
    return c110, c10, places


def borders(countries):
    from shapely.strtree import STRtree
    geoms = [g for _, g in countries]
    tree = STRtree(geoms)
    lines = []
    for i, g in enumerate(geoms):
        for j in tree.query(g):
            if j <= i:
                continue
            shared = g.boundary.intersection(geoms[j].boundary)
            if not shared.is_empty and shared.length > 0:
                lines.append(shared)
    return lines


def synthetic_roads(places):
    from shapely.geometry import LineString
    pts = [(n, lat, lon, pop) for n, lat, lon, pop in places]
    roads = []
    seen = set()
    for i, (n, lat, lon, pop) in enumerate(pts):
        near = sorted(range(len(pts)), key=lambda j: (pts[j][1] - lat) ** 2 + ((pts[j][2] - lon) * math.cos(math.radians(lat))) ** 2)[1:4]
        for j in near:
            key = (min(i, j), max(i, j))
            if key in seen:
                continue
            seen.add(key)
            smaller = min(pop, pts[j][3])
            kind = "highway" if smaller >= 100_000 else "major_road" if smaller >= 20_000 else "minor_road"
            roads.append((kind, LineString([(lon, lat), (pts[j][2], pts[j][1])])))
    return roads


def synthetic_buildings(places):
    from shapely.geometry import box
    out = []
    for n, lat, lon, pop in places:
        if pop < 20_000:
            continue
        step = 0.0009
        for i in range(-3, 4):
            for j in range(-3, 4):
                if (i, j) == (0, 0):
                    continue
                x, y = lon + i * step, lat + j * step * 0.8
                out.append(box(x, y, x + step * 0.55, y + step * 0.4))
    return out


def vector(out, geo):
    import mapbox_vector_tile
    import pmtiles.writer as w
    from pmtiles.tile import zxy_to_tileid, TileType, Compression
    from shapely.geometry import box, mapping
    from shapely.ops import unary_union
    from shapely import transform as _unused  # noqa: F401 (shapely 2)
    from shapely.ops import transform
    from shapely.strtree import STRtree

    c110, c10, all_places = load_geo(geo)
    region = box(*REGION)
    near = box(REGION[0] - 1, REGION[1] - 1, REGION[2] + 1, REGION[3] + 1)
    land110 = unary_union([g for _, g in c110])
    land10 = unary_union([g for _, g in c10 if g.intersects(near)]).intersection(near)
    borders110 = borders(c110)
    borders10 = [l.intersection(near) for l in borders([(p, g) for p, g in c10 if g.intersects(near)])]
    world_places = [p for p in all_places if p[3] >= 2_000_000]
    local_places = [p for p in all_places if REGION[0] - 0.3 <= p[2] <= REGION[2] + 0.3 and REGION[1] - 0.3 <= p[1] <= REGION[3] + 0.3]
    roads = synthetic_roads(local_places)
    buildings = synthetic_buildings([p for p in local_places if region.contains(box(p[2], p[1], p[2], p[1]).centroid)])
    park = box(14.245, 40.835, 14.252, 40.840)  # a landuse polygon so the style's park colour shows

    def to_tile(z, x, y):
        k = 1 << z
        def f(lon, lat, zz=None):
            import numpy as np
            lon, lat = np.asarray(lon), np.asarray(lat)
            mx = (lon + 180) / 360
            la = np.radians(np.clip(lat, -85.0511, 85.0511))
            my = (1 - np.log(np.tan(la) + 1 / np.cos(la)) / math.pi) / 2
            return (mx * k - x) * EXTENT, (my * k - y) * EXTENT
        return f

    def tile_box(z, x, y, margin=0.02):
        k = 1 << z
        def lon(tx): return tx / k * 360 - 180
        def lat(ty): return math.degrees(math.atan(math.sinh(math.pi * (1 - 2 * ty / k))))
        return box(lon(x - margin), lat(y + 1 + margin), lon(x + 1 + margin), lat(y - margin))

    def features(geoms, props, bbox, proj, tolerance):
        out = []
        for g, p in zip(geoms, props):
            if not g.intersects(bbox):
                continue
            c = g.intersection(bbox)
            if c.is_empty:
                continue
            c = same_kind(c, g)
            if c is None:
                continue
            t = transform(proj, c)
            if tolerance:
                t = t.simplify(tolerance)
            if t.is_empty:
                continue
            out.append({"geometry": t.wkt, "properties": p})
        return out

    def same_kind(c, g):
        """Clipping can give a collection of mixed parts: keep those of the source's dimension."""
        from shapely.geometry import MultiPolygon, MultiLineString, MultiPoint
        if c.geom_type != "GeometryCollection":
            return c
        dim = {"Polygon": 2, "MultiPolygon": 2, "LineString": 1, "MultiLineString": 1}.get(g.geom_type, 0)
        parts = []
        for part in c.geoms:
            if part.geom_type.startswith("Multi"):
                parts.extend(part.geoms)
            else:
                parts.append(part)
        parts = [q for q in parts if {"Polygon": 2, "LineString": 1, "Point": 0}.get(q.geom_type) == dim]
        if not parts:
            return None
        return [MultiPoint, MultiLineString, MultiPolygon][dim](parts)

    def encode_tile(z, x, y):
        world = z <= WORLD_MAX
        bb = tile_box(z, x, y)
        proj = to_tile(z, x, y)
        land = land110 if world and z < 5 else land10 if not world else land110
        land_c = land.intersection(bb)
        water = bb.difference(land)
        tol = 2 if z < MAX_ZOOM else 0
        layers = [
            {"name": "earth", "features": features([land_c], [{"kind": "earth"}], bb, proj, tol)},
            {"name": "water", "features": features([water], [{"kind": "ocean"}], bb, proj, tol)},
        ]
        blines = borders110 if world else borders10
        layers.append({"name": "boundaries", "features": features(blines, [{"kind": "country", "kind_detail": 2}] * len(blines), bb, proj, tol)})
        if not world:
            layers.append({"name": "landuse", "features": features([park], [{"kind": "park"}], bb, proj, 0)})
            rz = [r for r in roads if z >= 12 or r[0] != "minor_road"]
            layers.append({"name": "roads", "features": features([g for _, g in rz], [{"kind": k, "min_zoom": 7} for k, _ in rz], bb, proj, 0)})
            if z >= 13:
                layers.append({"name": "buildings", "features": features(buildings, [{"kind": "building"}] * len(buildings), bb, proj, 0)})
        pl = world_places if world else [p for p in local_places if z >= 11 or p[3] >= 50_000]
        pts, props = [], []
        from shapely.geometry import Point
        for n, lat, lon, pop in pl:
            pts.append(Point(lon, lat))
            rank = max(0, min(17, int(math.log10(max(pop, 1)) * 2)))
            props.append({"kind": "locality", "name": n, "population": pop, "population_rank": rank, "min_zoom": 2})
        layers.append({"name": "places", "features": features(pts, props, bb, proj, 0)})
        layers = [l for l in layers if l["features"]]
        if not layers:
            return None
        data = mapbox_vector_tile.encode(layers, default_options={"extents": EXTENT, "y_coord_down": True})
        return gzip.compress(data, mtime=0)

    tiles = []
    for z in range(0, MAX_ZOOM + 1):
        if z <= WORLD_MAX:
            k = 1 << z
            rng = (0, k - 1, *tile_range(z, (-180, -85, 180, 85))[2:])
        else:
            rng = tile_range(z, REGION)
        for x in range(rng[0], rng[1] + 1):
            for y in range(rng[2], rng[3] + 1):
                data = encode_tile(z, x, y)
                if data:
                    tiles.append((zxy_to_tileid(z, x, y), data))
    tiles.sort()
    with w.write(out) as writer:
        for tid, data in tiles:
            writer.write_tile(tid, data)
        writer.finalize({"tile_type": TileType.MVT, "tile_compression": Compression.GZIP,
                         "min_lon_e7": int(REGION[0] * 1e7), "min_lat_e7": int(REGION[1] * 1e7),
                         "max_lon_e7": int(REGION[2] * 1e7), "max_lat_e7": int(REGION[3] * 1e7),
                         "center_zoom": 12, "center_lon_e7": int(14.2681 * 1e7), "center_lat_e7": int(40.8522 * 1e7)},
                        {"name": "Virtual Tourist test basemap (Naples)",
                         "attribution": '<a href="https://www.naturalearthdata.com/">Natural Earth</a> · <a href="https://www.geonames.org/">GeoNames</a> (synthetic roads)',
                         "vector_layers": [{"id": n} for n in ["earth", "water", "landuse", "roads", "buildings", "boundaries", "places"]]})
    print(f"{out}: {len(tiles)} tiles, {os.path.getsize(out)} bytes", file=sys.stderr)


def main():
    need("pmtiles", "mapbox_vector_tile", "shapefile", "shapely")
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "vector":
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        vector(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else os.path.join(root, "..", "shared", "data", "geo"))
    elif cmd == "leaves":
        leaves(sys.argv[2])
    elif cmd == "manifest":
        manifest(sys.argv[2])
    elif cmd == "extract":
        extract(sys.argv[2], sys.argv[3])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
