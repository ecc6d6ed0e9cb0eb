// Vector tiles on the canvas map: fetched from /tiles/{z}/{x}/{y}, decoded by mvt.js, drawn with a
// small style for the Protomaps basemap layers (earth, landcover, landuse, water, buildings, roads,
// boundaries, places). Each tile's features become one Path2D per style bucket, built once in tile
// units, so a frame only sets a transform and fills or strokes a few paths per tile.
// See docs/architecture.md, "Street-level maps".
import { decodeTile, POINT, LINESTRING, POLYGON } from "./mvt.js";
import { worldSize, LRU, backoff } from "./geo.js";
import { drawLabels } from "./labels.js";

// Colours: the land and border tones of the built-in map, so switching sources does not jar.
export const STYLE = {
  earth: "#f3efe4",
  water: "#9dc7dc",          // not the built-in SEA (#a9cfe0): tests tell drawn water from background
  park: "#d4e6c3",
  wood: "#c8dfb8",
  landuse: "#ece6d6",
  urban: "#ece8df",
  glacier: "#fbfbfb",
  building: "#ddd5c8",
  boundaryCountry: "#a89c84",
  boundaryRegion: "#c9bda4",
  highway: "#f0b060",
  highwayCasing: "#cf8f45",
  majorRoad: "#ffffff",
  roadCasing: "#cfc5b2",
  minorRoad: "#ffffff",
  path: "#c9bca3",
  rail: "#b5aca0",
};

const PARKS = new Set(["park", "national_park", "nature_reserve", "protected_area", "cemetery", "golf_course", "garden",
  "playground", "village_green", "grass", "grassland", "recreation_ground", "pitch", "zoo"]);
const WOODS = new Set(["forest", "wood", "scrub", "farmland", "meadow"]);

/**
 * Which bucket a feature goes to (null: not drawn). Buckets are drawn in BUCKETS order, so water
 * covers earth, roads cover buildings and so on; a line bucket may have a casing drawn beneath.
 * `zoom` is the tile's zoom; widths are CSS pixels at that zoom and grow as one zooms in.
 */
export function bucketFor(layer, props, type, zoom) {
  const kind = props.kind ?? props["pmap:kind"] ?? "";
  switch (layer) {
    case "earth": return type === POLYGON ? "earth" : null;
    case "water": return type === POLYGON ? "water" : type === LINESTRING && zoom >= 9 ? "waterway" : null;
    case "landcover":
      return kind === "glacier" ? "glacier" : kind === "urban_area" ? "urban" : PARKS.has(kind) || kind === "grassland" ? "park" : "wood";
    case "landuse":
      if (type !== POLYGON) return null;
      return PARKS.has(kind) ? "park" : WOODS.has(kind) ? "wood" : "landuse";
    case "buildings": return type === POLYGON && zoom >= 13 ? "building" : null;
    case "roads":
      if (type !== LINESTRING) return null;
      if (kind === "highway") return "highway";
      if (kind === "major_road") return "major_road";
      if (kind === "minor_road") return zoom >= 11 ? "minor_road" : null;
      if (kind === "path") return zoom >= 14 ? "path" : null;
      return zoom >= 13 ? "minor_road" : null;
    case "transit": return type === LINESTRING && zoom >= 11 && (kind === "rail" || props.kind_detail === "rail") ? "rail" : null;
    case "boundaries":
      if (type !== LINESTRING) return null;
      return kind === "country" || props.kind_detail === 2 || props.admin_level === 2 ? "boundary_country"
        : kind === "region" || kind === "state" ? "boundary_region" : null;
    default: return null;
  }
}

/** Drawing order and paint. Line widths in CSS pixels as a function of the view's zoom. */
export const BUCKETS = [
  { id: "earth", fill: STYLE.earth },
  { id: "glacier", fill: STYLE.glacier },
  { id: "urban", fill: STYLE.urban },
  { id: "wood", fill: STYLE.wood },
  { id: "landuse", fill: STYLE.landuse },
  { id: "park", fill: STYLE.park },
  { id: "water", fill: STYLE.water },
  { id: "waterway", stroke: STYLE.water, width: (z) => Math.max(1, z - 11) },
  { id: "building", fill: STYLE.building },
  { id: "boundary_region", stroke: STYLE.boundaryRegion, width: () => 1, dash: [4, 3] },
  { id: "rail", stroke: STYLE.rail, width: () => 1.2 },
  { id: "path", stroke: STYLE.path, width: () => 1, dash: [2, 2] },
  { id: "minor_road", stroke: STYLE.minorRoad, casing: STYLE.roadCasing, width: (z) => roadWidth(z, 1.2) },
  { id: "major_road", stroke: STYLE.majorRoad, casing: STYLE.roadCasing, width: (z) => roadWidth(z, 2.2) },
  { id: "highway", stroke: STYLE.highway, casing: STYLE.highwayCasing, width: (z) => roadWidth(z, 3.2) },
  { id: "boundary_country", stroke: STYLE.boundaryCountry, width: (z) => (z < 5 ? 0.8 : 1.3) },
];

/** Roads widen by about √2 per zoom from zoom 12, and thin to a hairline far out. */
export function roadWidth(zoom, base) {
  return Math.max(0.6, Math.min(base * 8, base * Math.pow(2, (zoom - 12) / 2)));
}

/** Which archive zoom draws a view zoom: tiles are drawn around 512 CSS px (as the Protomaps
 *  basemap is designed), never past the archive's maxzoom (deeper views overzoom the last level). */
export function tileZoom(zoom, minzoom, maxzoom) {
  return Math.max(minzoom, Math.min(maxzoom, Math.round(zoom) - 1));
}

/** Turns a decoded tile into Path2D per bucket and a list of labels (tile units). */
export function buildTile(layers, z, makePath = () => new Path2D()) {
  const paths = new Map();
  const labels = [];
  let extent = 4096;
  for (const layer of Object.values(layers)) {
    extent = layer.extent || extent;
    const k = 4096 / (layer.extent || 4096);   // normalise every layer to 4096 units
    for (const f of layer.features) {
      if (layer.name === "places" && f.type === POINT) {
        const name = f.properties.name;
        if (name && f.geometry.length) {
          const rank = f.properties.population_rank ?? Math.log10(Math.max(1, f.properties.population || 1)) * 2;
          const kind = f.properties.kind ?? f.properties["pmap:kind"];
          const weight = kind === "country" ? 1e9 : kind === "region" ? 1e8 : Math.pow(10, rank / 2);
          labels.push({ name, x: f.geometry[0][0] * k, y: f.geometry[0][1] * k, population: weight });
        }
        continue;
      }
      const bucket = bucketFor(layer.name, f.properties, f.type, z);
      if (!bucket) continue;
      let path = paths.get(bucket);
      if (!path) { path = makePath(); paths.set(bucket, path); }
      for (const part of f.geometry) {
        if (part.length < 4) continue;
        path.moveTo(part[0] * k, part[1] * k);
        for (let i = 2; i < part.length; i += 2) path.lineTo(part[i] * k, part[i + 1] * k);
        if (f.type === POLYGON) path.closePath();
      }
    }
  }
  return { paths, labels, extent: 4096 };
}

/** The vector tile layer of one map. */
export class VectorTiles {
  constructor(info, onChange) {
    this.info = info;
    this.onChange = onChange;
    this.tiles = new LRU(160);
  }

  tile(z, x, y) {
    const key = `${z}/${x}/${y}`;
    let entry = this.tiles.get(key);
    if (entry && (entry.state !== "failed" || performance.now() < entry.retryAt)) return entry;
    const attempts = entry ? entry.attempts + 1 : 1;
    entry = { state: "loading", attempts, retryAt: 0, paths: null, labels: [] };
    this.tiles.set(key, entry);
    fetch(`/tiles/${z}/${x}/${y}`)
      .then((r) => {
        if (r.status === 404) return null;       // no tile: nothing there (open sea, outside the archive)
        if (!r.ok) throw new Error(String(r.status));
        return r.arrayBuffer();
      })
      .then((buffer) => {
        const built = buffer ? buildTile(decodeTile(new Uint8Array(buffer)), z) : { paths: new Map(), labels: [] };
        entry.paths = built.paths;
        entry.labels = built.labels;
        entry.empty = !buffer;
        entry.state = "loaded";
        this.onChange();
      })
      .catch(() => {
        entry.state = "failed";
        const wait = backoff(attempts) * 1000;
        entry.retryAt = performance.now() + wait;
        setTimeout(() => this.onChange(), wait);
        this.onChange();
      });
    return entry;
  }

  /** The tiles to draw for the view: each visible tile, or while it loads its nearest loaded
   *  ancestor (drawn once however many children it stands in for). */
  plan(view) {
    const { minzoom, maxzoom } = this.info;
    const z = tileZoom(view.zoom, minzoom, maxzoom);
    const n = Math.pow(2, z);
    const scale = worldSize(view.zoom) / n;
    const cx = view.center.x * n, cy = view.center.y * n;
    const halfW = view.width / 2 / scale, halfH = view.height / 2 / scale;
    const drawn = new Map();
    let complete = true;
    for (let ty = Math.max(0, Math.floor(cy - halfH)); ty <= Math.min(n - 1, Math.floor(cy + halfH)); ty++) {
      for (let tx = Math.floor(cx - halfW); tx <= Math.floor(cx + halfW); tx++) {
        const x = ((tx % n) + n) % n;
        const copy = Math.floor(tx / n);
        let entry = this.tile(z, x, ty), up = 0;
        while (entry && entry.state !== "loaded") {
          up++;
          entry = z - up >= minzoom && up <= 6 ? this.tiles.get(`${z - up}/${x >> up}/${ty >> up}`) || { state: "none" } : null;
        }
        if (!entry || up > 0 || entry.empty) complete = false;
        if (!entry || entry.empty) continue;
        const tz = z - up, f = 1 << up;
        const key = `${tz}/${x >> up}/${ty >> up}@${copy}`;
        if (drawn.has(key)) continue;
        const size = scale * f;
        const left = ((copy * n + (x >> up) * f) - cx) * scale + view.width / 2;
        const top = (((ty >> up) * f) - cy) * scale + view.height / 2;
        drawn.set(key, { entry, left, top, size, z: tz, x: x >> up, y: ty >> up, copy });
      }
    }
    return { tiles: [...drawn.values()].sort((a, b) => a.z - b.z), complete, z };
  }

  /** Draws the tiles; `beneath` draws the built-in map first when some are missing. */
  draw(ctx, view, beneath) {
    const { tiles, complete, z } = this.plan(view);
    if (!complete) beneath();
    const dpr = view.dpr;
    const styleZoom = view.zoom;
    for (const bucket of BUCKETS) {
      for (const pass of bucket.casing ? ["casing", "line"] : ["line"]) {
        for (const t of tiles) {
          const path = t.entry.paths.get(bucket.id);
          if (!path) continue;
          const k = t.size / 4096;
          ctx.setTransform(dpr * k, 0, 0, dpr * k, dpr * t.left, dpr * t.top);
          if (bucket.fill) {
            ctx.fillStyle = bucket.fill;
            ctx.fill(path);
          } else {
            const width = bucket.width(styleZoom);
            ctx.lineWidth = (pass === "casing" ? width + 1.6 : width) / k;
            ctx.strokeStyle = pass === "casing" ? bucket.casing : bucket.stroke;
            ctx.lineCap = "round";
            ctx.lineJoin = "round";
            ctx.setLineDash(bucket.dash ? bucket.dash.map((d) => d / k) : []);
            ctx.stroke(path);
          }
        }
      }
    }
    ctx.setLineDash([]);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    // Labels in screen space, largest places first, from the tiles of the view's own level.
    const size = worldSize(view.zoom);
    const n = Math.pow(2, z);
    const labels = [];
    for (const t of tiles) {
      if (t.z !== z) continue;
      for (const l of t.entry.labels) {
        labels.push({ name: l.name, x: (t.x + l.x / 4096) / n, y: (t.y + l.y / 4096) / n, population: l.population, offset: t.copy });
      }
    }
    drawLabels(ctx, view, labels, size);
    view.canvas.parentElement.dataset.vectorTiles = complete ? "ready" : "loading";
    return complete;
  }
}
