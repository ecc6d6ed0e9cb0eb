// Raster tiles from /tiles, with the built-in basemap beneath where one is missing.
import { unproject, visibleTiles, tileURL, LRU, backoff, MAX_ZOOM } from "./geo.js";

/** Whether a tile overlaps the archive's bounds (west, south, east, north in degrees). */
function tileInBounds(t, bounds) {
  if (!bounds) return true;
  const n = Math.pow(2, t.z);
  const west = t.x / n * 360 - 180, east = (t.x + 1) / n * 360 - 180;
  const lat = (y) => unproject(0, y / n).lat;
  return east > bounds[0] && west < bounds[2] && lat(t.y) > bounds[1] && lat(t.y + 1) < bounds[3];
}

export class RasterTiles {
  constructor(template, info, redraw) {
    this.template = template;
    this.info = info;
    this.redraw = redraw;
    this.tiles = new LRU(256);   // key → {img, state, attempts, retryAt}
  }

  /** Raster tiles, with lower-zoom tiles scaled up where a tile has not arrived, and the last
   *  zoom of the archive scaled up past its maxzoom. Where some tile is missing, the built-in map
   *  is drawn first, beneath. True when every visible tile was drawn at its own zoom. */
  draw(ctx, view, beneath) {
    const tiles = visibleTiles(view.center, view.zoom, view.width, view.height);
    const retina = view.dpr > 1.5;
    const { minzoom = 0, maxzoom = MAX_ZOOM, bounds } = this.info;
    let complete = true;
    const plan = [];
    for (const t of tiles) {
      if (t.z < minzoom || !tileInBounds(t, bounds)) { complete = false; continue; }
      const over = Math.max(0, t.z - maxzoom); // overzoom: crop the archive's deepest tile
      let found = null;
      for (let up = over; up <= over + 4 && t.z - up >= minzoom; up++) {
        const key = `${t.z - up}/${t.x >> up}/${t.y >> up}/${retina}`;
        const entry = up === over ? this.tile(t.z - up, t.x >> up, t.y >> up, retina) : this.tiles.get(key);
        if (entry && entry.state === "loaded") { found = { entry, up }; break; }
      }
      if (!found || found.up !== over) complete = false;
      if (found) plan.push({ t, ...found });
    }
    if (!complete) beneath();
    for (const { t, entry, up } of plan) {
      const f = 1 << up;
      const sw = entry.img.naturalWidth / f;
      const sx = (t.x % f) * sw, sy = (t.y % f) * sw;
      ctx.drawImage(entry.img, sx, sy, sw, sw, t.left, t.top, t.size + 0.5, t.size + 0.5);
    }
    view.canvas.parentElement.dataset.rasterTiles = complete ? "ready" : "loading";
    return complete;
  }

  tile(z, x, y, retina) {
    const key = `${z}/${x}/${y}/${retina}`;
    let entry = this.tiles.get(key);
    const now = performance.now();
    if (entry && (entry.state !== "failed" || now < entry.retryAt)) return entry;
    const attempts = entry ? entry.attempts + 1 : 1;
    const img = new Image();
    img.crossOrigin = "anonymous";
    entry = { img, state: "loading", attempts, retryAt: 0 };
    img.onload = () => { entry.state = "loaded"; this.redraw(); };
    img.onerror = () => {
      entry.state = "failed";
      entry.retryAt = performance.now() + backoff(attempts) * 1000;
      setTimeout(() => this.redraw(), backoff(attempts) * 1000);
      this.redraw(); // the vector basemap shows meanwhile
    };
    img.src = tileURL(this.template, z, x, y, retina);
    this.tiles.set(key, entry);
    return entry;
  }
}
