// Map math with no DOM: Web Mercator projection, tiles, clustering, parsing. Pure functions, so
// node's test runner checks them (Tests/JavaScript/geo.test.mjs).

export const TILE_SIZE = 256;
export const MAX_LAT = 85.0511287798066; // Web Mercator's square world: atan(sinh(π))
export const MIN_ZOOM = 0;
export const MAX_ZOOM = 18;

/** Longitude/latitude → world coordinates in [0, 1) × [0, 1], origin top-left. */
export function project(lon, lat) {
  const clamped = clampLat(lat);
  const sin = Math.sin((clamped * Math.PI) / 180);
  return {
    x: lon / 360 + 0.5,
    y: 0.5 - Math.log((1 + sin) / (1 - sin)) / (4 * Math.PI),
  };
}

/** World coordinates → longitude/latitude (x may lie outside [0, 1): the world wraps). */
export function unproject(x, y) {
  const lon = (x - 0.5) * 360;
  const n = Math.PI - 2 * Math.PI * y;
  const lat = (180 / Math.PI) * Math.atan(Math.sinh(n));
  return { lon, lat };
}

export function clampLat(lat) {
  return Math.max(-MAX_LAT, Math.min(MAX_LAT, lat));
}

export function clampZoom(zoom) {
  return Math.max(MIN_ZOOM, Math.min(MAX_ZOOM, zoom));
}

/** Longitude folded into [-180, 180). */
export function wrapLon(lon) {
  const wrapped = ((((lon + 180) % 360) + 360) % 360) - 180;
  return wrapped === -180 && lon > 0 ? 180 : wrapped;
}

/** Width of the whole world in CSS pixels at `zoom`. */
export function worldSize(zoom) {
  return TILE_SIZE * Math.pow(2, zoom);
}

/**
 * The tiles covering a view: `center` in world coordinates, size in CSS pixels. x is wrapped into
 * [0, 2^z) for the URL, while `offset` says which copy of the world it is drawn in.
 */
export function visibleTiles(center, zoom, width, height) {
  const z = Math.max(0, Math.floor(zoom));
  const n = Math.pow(2, z);
  const scale = worldSize(zoom) / n; // pixels per tile at this fractional zoom
  const cx = center.x * n;
  const cy = center.y * n;
  const halfW = width / 2 / scale;
  const halfH = height / 2 / scale;
  const tiles = [];
  for (let ty = Math.max(0, Math.floor(cy - halfH)); ty <= Math.min(n - 1, Math.floor(cy + halfH)); ty++) {
    for (let tx = Math.floor(cx - halfW); tx <= Math.floor(cx + halfW); tx++) {
      const x = ((tx % n) + n) % n;
      tiles.push({ z, x, y: ty, tx, left: (tx - cx) * scale + width / 2, top: (ty - cy) * scale + height / 2, size: scale });
    }
  }
  return tiles;
}

/** Fills a raster tile URL template: {z}/{x}/{y}, {s} subdomains (a, b, c) and {r} for retina. */
export function tileURL(template, z, x, y, retina = false, subdomains = "abc") {
  const s = subdomains[Math.abs(x + y) % subdomains.length] || "";
  return template
    .replace("{z}", String(z))
    .replace("{x}", String(x))
    .replace("{y}", String(y))
    .replace("{s}", s)
    .replace("{r}", retina ? "@2x" : "");
}

/** Which built-in basemap level draws a zoom (see Public/basemap and docs/architecture.md). */
export function basemapLevel(zoom) {
  if (zoom < 2.5) return 0;
  if (zoom < 4.5) return 1;
  if (zoom < 6.5) return 2;
  return 3;
}

/** A delta-encoded integer ring → flat Float64Array [lon, lat, lon, lat, …]. */
export function decodeRing(deltas, quantum) {
  const out = new Float64Array(deltas.length);
  let x = 0;
  let y = 0;
  for (let i = 0; i < deltas.length; i += 2) {
    x += deltas[i];
    y += deltas[i + 1];
    out[i] = x * quantum;
    out[i + 1] = y * quantum;
  }
  return out;
}

/**
 * Greedy clustering in screen space: points closer than `radius` pixels to a cluster's first
 * point join it. Points are visited in the given order, so results are stable between frames.
 * Uses a grid of radius-sized cells, so 1,000 pins cost a few thousand distance checks.
 */
export function cluster(points, radius) {
  const clusters = [];
  const grid = new Map();
  const r2 = radius * radius;
  for (const point of points) {
    const gx = Math.floor(point.x / radius);
    const gy = Math.floor(point.y / radius);
    let joined = null;
    for (let dx = -1; dx <= 1 && !joined; dx++) {
      for (let dy = -1; dy <= 1 && !joined; dy++) {
        const cell = grid.get((gx + dx) + "," + (gy + dy));
        if (!cell) continue;
        for (const c of cell) {
          const ddx = c.x - point.x;
          const ddy = c.y - point.y;
          if (ddx * ddx + ddy * ddy <= r2) { joined = c; break; }
        }
      }
    }
    if (joined) {
      joined.members.push(point);
    } else {
      const c = { x: point.x, y: point.y, members: [point] };
      clusters.push(c);
      const key = gx + "," + gy;
      if (!grid.has(key)) grid.set(key, []);
      grid.get(key).push(c);
    }
  }
  return clusters;
}

/** "35.01, 135.77" or "35.01 135.77" → {lat, lon}; null when it is not a coordinate pair. */
export function parseLatLon(text) {
  const match = /^\s*(-?\d+(?:\.\d+)?)\s*[,;\s]\s*(-?\d+(?:\.\d+)?)\s*$/.exec(text);
  if (!match) return null;
  const lat = Number(match[1]);
  const lon = Number(match[2]);
  if (!(lat >= -90 && lat <= 90 && lon >= -180 && lon <= 180)) return null;
  return { lat, lon };
}

/** Least-recently-used map with a size limit (tile images). */
export class LRU {
  constructor(limit) { this.limit = limit; this.map = new Map(); }
  get(key) {
    const value = this.map.get(key);
    if (value !== undefined) { this.map.delete(key); this.map.set(key, value); }
    return value;
  }
  set(key, value) {
    this.map.delete(key);
    this.map.set(key, value);
    while (this.map.size > this.limit) {
      const oldest = this.map.keys().next().value;
      const evicted = this.map.get(oldest);
      this.map.delete(oldest);
      if (this.onEvict) this.onEvict(oldest, evicted);
    }
  }
  has(key) { return this.map.has(key); }
  get size() { return this.map.size; }
}

/** Seconds to wait before retry number `attempt` (1, 2, …) of a failed tile: 1, 2, 4 … 30. */
export function backoff(attempt) {
  return Math.min(30, Math.pow(2, attempt - 1));
}
