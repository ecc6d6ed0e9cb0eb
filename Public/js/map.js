// The map: a Web Mercator slippy map on a canvas, with our own vector basemap (or raster tiles),
// and pointer, wheel, touch and keyboard interaction. No map library: see docs/architecture.md.
import {
  project, unproject, clampZoom, worldSize, visibleTiles, tileURL, basemapLevel, decodeRing,
  LRU, backoff, MAX_ZOOM,
} from "./geo.js";
import { VectorTiles } from "./vector.js";

const LONG_PRESS_MS = 500;
const LONG_PRESS_SLOP = 6;          // px the pointer may wander during a press-and-hold
const DOUBLE_TAP_MS = 300;
// The built-in basemap in the page's theme (prefers-color-scheme), so a dark page does not frame
// a glaring map. The light sea colour is also what tests read to tell background from tiles.
const LIGHT = { sea: "#a9cfe0", land: "#f3efe4", border: "#b7ab93", coast: "#8fa9b4",
                dot: "#5b5347", label: "#2f2a22", halo: "rgba(255,255,255,0.9)" };
const DARK = { sea: "#1c3441", land: "#2b302d", border: "#6a6251", coast: "#456573",
               dot: "#c2b8a3", label: "#ece6d8", halo: "rgba(20,24,27,0.9)" };
const darkScheme = typeof matchMedia === "function" ? matchMedia("(prefers-color-scheme: dark)") : null;
const colours = () => (darkScheme && darkScheme.matches ? DARK : LIGHT);

/** Whether a tile overlaps the archive's bounds (west, south, east, north in degrees). */
function tileInBounds(t, bounds) {
  if (!bounds) return true;
  const n = Math.pow(2, t.z);
  const west = t.x / n * 360 - 180, east = (t.x + 1) / n * 360 - 180;
  const lat = (y) => unproject(0, y / n).lat;
  return east > bounds[0] && west < bounds[2] && lat(t.y) > bounds[1] && lat(t.y + 1) < bounds[3];
}

export class MapView {
  constructor(canvas, { lat, lon, zoom, tileTemplate = "none", interactive = true }) {
    this.canvas = canvas;
    this.ctx = canvas.getContext("2d");
    const p = project(lon, lat);
    this.center = { x: p.x, y: p.y };
    this.zoom = clampZoom(zoom);
    this.tileTemplate = tileTemplate && tileTemplate !== "none" ? tileTemplate : null;
    this.width = 0;
    this.height = 0;
    this.dpr = 1;
    this.layers = [];            // objects with draw(ctx, view) and optionally animating()
    this.listeners = { move: [], moveend: [], longpress: [], tap: [] };
    this.cells = new Map();      // "level/x/y" → {state, fills, lines, labels}
    this.cellDegrees = [];       // cell size per level: the server sends it with every cell
    this.tiles = new LRU(256);   // raster tiles: key → {img, state, attempts, retryAt}
    this.frames = 0;
    this.frameTimes = [];
    this.pointers = new Map();
    this.animation = null;
    this.scheduled = false;
    this.resize();
    new ResizeObserver(() => { this.resize(); this.redraw(); }).observe(canvas);
    if (darkScheme) darkScheme.addEventListener("change", () => this.redraw());
    if (interactive) this.attachInput();
    this.loadCell(0, 0, 0);
    if (this.tileTemplate) this.loadTileInfo();
    this.redraw();
  }

  /** What /tiles serves (format, zoom range, bounds): vector tiles get their own layer, raster
   *  tiles are asked for only inside the archive's zooms and bounds. */
  loadTileInfo(attempt = 1) {
    fetch("/tiles.json")
      .then((r) => { if (!r.ok) throw new Error(r.status); return r.json(); })
      .then((info) => {
        this.tileInfo = info;
        if (info.format === "mvt") this.vector = new VectorTiles(info, () => this.redraw());
        this.redraw();
      })
      .catch(() => { if (attempt < 5) setTimeout(() => this.loadTileInfo(attempt + 1), backoff(attempt) * 1000); });
  }

  // ----- view -----

  get view() {
    const { lon, lat } = unproject(this.center.x, this.center.y);
    return { lat, lon: ((lon + 540) % 360) - 180, zoom: this.zoom };
  }

  setView(lat, lon, zoom) {
    const p = project(lon, lat);
    this.center = { x: p.x, y: p.y };
    this.zoom = clampZoom(zoom ?? this.zoom);
    this.changed(true);
  }

  /** Animated move: zooms out a little on long trips, like people expect from maps. */
  flyTo(lat, lon, zoom, duration = 900) {
    const from = { ...this.center, zoom: this.zoom };
    const target = project(lon, lat);
    let dx = target.x - from.x;
    if (dx > 0.5) dx -= 1; else if (dx < -0.5) dx += 1; // the short way round
    const to = { x: from.x + dx, y: target.y, zoom: clampZoom(zoom) };
    const distancePx = Math.hypot(dx, to.y - from.y) * worldSize(Math.min(from.zoom, to.zoom));
    const dip = Math.min(4, Math.max(0, Math.log2(distancePx / 800)));
    this.animate(duration, (t) => {
      const e = t < 0.5 ? 4 * t * t * t : 1 - Math.pow(-2 * t + 2, 3) / 2;
      this.center = { x: from.x + (to.x - from.x) * e, y: from.y + (to.y - from.y) * e };
      this.zoom = clampZoom(from.zoom + (to.zoom - from.zoom) * e - dip * Math.sin(Math.PI * t));
    });
  }

  screenToWorld(px, py) {
    const size = worldSize(this.zoom);
    return { x: this.center.x + (px - this.width / 2) / size, y: this.center.y + (py - this.height / 2) / size };
  }

  screenToLonLat(px, py) {
    const w = this.screenToWorld(px, py);
    const { lon, lat } = unproject(w.x, Math.max(0, Math.min(1, w.y)));
    return { lat, lon: ((lon % 360) + 540) % 360 - 180 };
  }

  /** Screen position of a world point, in the copy of the world nearest the centre. */
  worldToScreen(wx, wy) {
    const size = worldSize(this.zoom);
    let dx = wx - this.center.x;
    dx -= Math.round(dx);
    return { x: this.width / 2 + dx * size, y: this.height / 2 + (wy - this.center.y) * size };
  }

  /** The visible box in degrees (west may exceed east across the antimeridian). */
  bounds(marginPx = 0) {
    const nw = this.screenToLonLat(-marginPx, -marginPx);
    const se = this.screenToLonLat(this.width + marginPx, this.height + marginPx);
    const span = (this.width + 2 * marginPx) / worldSize(this.zoom) * 360;
    if (span >= 360) return { west: -180, south: se.lat, east: 180, north: nw.lat };
    return { west: nw.lon, south: se.lat, east: se.lon, north: nw.lat };
  }

  zoomAround(px, py, newZoom) {
    newZoom = clampZoom(newZoom);
    const before = this.screenToWorld(px, py);
    this.zoom = newZoom;
    const after = this.screenToWorld(px, py);
    this.center = { x: this.center.x + before.x - after.x, y: this.center.y + before.y - after.y };
    this.changed();
  }

  panBy(dx, dy) {
    const size = worldSize(this.zoom);
    this.center = { x: this.center.x - dx / size, y: this.center.y - dy / size };
    this.changed();
  }

  changed(ended = false) {
    // Keep x in [0, 1) (the world wraps) and the centre inside the world vertically.
    this.center.x -= Math.floor(this.center.x);
    const halfView = this.height / 2 / worldSize(this.zoom);
    this.center.y = halfView >= 0.5 ? 0.5 : Math.max(halfView, Math.min(1 - halfView, this.center.y));
    this.emit("move", this.view);
    if (ended) this.moveEnded();
    this.redraw();
  }

  moveEnded() {
    clearTimeout(this.moveEndTimer);
    this.moveEndTimer = setTimeout(() => this.emit("moveend", this.view), 50);
  }

  on(event, handler) { this.listeners[event].push(handler); }
  emit(event, value) { for (const handler of this.listeners[event]) handler(value); }

  animate(duration, step, done) {
    const start = performance.now();
    this.animation = { start, duration, step, done };
    this.redraw();
  }

  stopAnimation() {
    if (this.animation) { this.animation = null; this.moveEnded(); }
  }

  // ----- drawing -----

  resize() {
    const rect = this.canvas.getBoundingClientRect();
    this.dpr = window.devicePixelRatio || 1;
    this.width = Math.max(1, rect.width);
    this.height = Math.max(1, rect.height);
    this.canvas.width = Math.round(this.width * this.dpr);
    this.canvas.height = Math.round(this.height * this.dpr);
  }

  redraw() {
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame((now) => this.frame(now));
  }

  frame(now) {
    this.scheduled = false;
    if (this.animation) {
      const t = Math.min(1, (now - this.animation.start) / this.animation.duration);
      this.animation.step(t);
      this.changed();
      if (t >= 1) {
        const done = this.animation.done;
        this.animation = null;
        this.moveEnded();
        if (done) done();
      }
    }
    const started = performance.now();
    this.draw();
    this.frameTimes.push(performance.now() - started);
    if (this.frameTimes.length > 240) this.frameTimes.shift();
    if (this.frames === 0) this.firstFrameAt = performance.now();
    if (!this.basemapReadyAt && this.canvas.parentElement.dataset.basemap === "ready") this.basemapReadyAt = performance.now();
    this.frames++;
    if (this.animation || this.layers.some((l) => l.animating && l.animating(now))) this.redraw();
  }

  draw() {
    const ctx = this.ctx;
    ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    ctx.fillStyle = colours().sea;
    ctx.fillRect(0, 0, this.width, this.height);
    // Tiles from /tiles when configured; where they are missing, the built-in map beneath.
    if (this.vector) this.vector.draw(ctx, this, () => this.drawBasemap(ctx));
    else if (this.tileTemplate && this.tileInfo) this.drawTiles(ctx);
    else this.drawBasemap(ctx);
    for (const layer of this.layers) layer.draw(ctx, this);
    const v = this.view;
    const ds = this.canvas.parentElement.dataset;
    ds.viewLat = v.lat.toFixed(5);
    ds.viewLon = v.lon.toFixed(5);
    ds.viewZoom = v.zoom.toFixed(3);
    ds.frames = String(this.frames + 1);
  }

  /** Raster tiles, with lower-zoom tiles scaled up where a tile has not arrived, and the last
   *  zoom of the archive scaled up past its maxzoom. Where some tile is missing, the built-in map
   *  is drawn first, beneath. True when every visible tile was drawn at its own zoom. */
  drawTiles(ctx) {
    const tiles = visibleTiles(this.center, this.zoom, this.width, this.height);
    const retina = this.dpr > 1.5;
    const { minzoom = 0, maxzoom = MAX_ZOOM, bounds } = this.tileInfo;
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
    if (!complete) this.drawBasemap(ctx);
    for (const { t, entry, up } of plan) {
      const f = 1 << up;
      const sw = entry.img.naturalWidth / f;
      const sx = (t.x % f) * sw, sy = (t.y % f) * sw;
      ctx.drawImage(entry.img, sx, sy, sw, sw, t.left, t.top, t.size + 0.5, t.size + 0.5);
    }
    this.canvas.parentElement.dataset.rasterTiles = complete ? "ready" : "loading";
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
    img.src = tileURL(this.tileTemplate, z, x, y, retina);
    this.tiles.set(key, entry);
    return entry;
  }

  /** Our vector basemap: the cells of the zoom's level that are in view, falling back to coarser
   *  levels for cells still loading. */
  drawBasemap(ctx) {
    const wanted = basemapLevel(this.zoom);
    const size = worldSize(this.zoom);
    const view = this.visibleCells(wanted);
    const labels = [];
    const drawnCells = new Set(); // a coarse cell standing in for several fine ones is drawn once
    let ready = this.cellDegrees.length > 0;
    for (const { level, cx, cy, copies } of view) {
      let drawn = null;
      for (let l = level; l >= 0 && !drawn; l--) {
        const cell = l === level ? this.cell(l, cx, cy) : this.cellCovering(l, cx, cy, level);
        if (cell && cell.state === "loaded") drawn = cell;
      }
      if (!drawn) { ready = false; continue; }
      if (drawn.level !== wanted) ready = false;
      for (const offset of copies) {
        const key = drawn.key + "@" + offset;
        if (drawnCells.has(key)) continue;
        drawnCells.add(key);
        this.drawCell(ctx, drawn, size, offset);
      }
      if (drawn.level === wanted) for (const offset of copies) labels.push(...drawn.labels.map((l) => ({ ...l, offset })));
    }
    this.drawLabels(ctx, labels, size);
    this.canvas.parentElement.dataset.basemap = ready ? "ready" : "loading";
  }

  visibleCells(level) {
    const deg = this.cellDegrees[level];
    if (!deg) return []; // the grid is not known before the first cell arrives
    const nw = this.screenToWorld(0, 0);
    const se = this.screenToWorld(this.width, this.height);
    const west = (nw.x - 0.5) * 360, east = (se.x - 0.5) * 360;
    const north = unproject(0, Math.max(0, nw.y)).lat, south = unproject(0, Math.min(1, se.y)).lat;
    const rows = Math.max(1, 180 / deg), cols = 360 / deg;
    const out = new Map();
    for (let gx = Math.floor((west + 180) / deg); gx <= Math.floor((east + 180) / deg); gx++) {
      const cx = ((gx % cols) + cols) % cols;
      const offset = Math.floor(gx / cols); // which copy of the world
      for (let cy = Math.max(0, Math.floor((south + 90) / deg)); cy <= Math.min(rows - 1, Math.floor((north + 90) / deg)); cy++) {
        const key = cx + "," + cy;
        if (!out.has(key)) out.set(key, { level, cx, cy, copies: [] });
        out.get(key).copies.push(offset);
      }
    }
    return [...out.values()];
  }

  cell(level, cx, cy) {
    const key = `${level}/${cx}/${cy}`;
    return this.cells.get(key) || this.loadCell(level, cx, cy);
  }

  /** The loaded cell of a coarser level that contains cell (cx, cy) of `finer`. */
  cellCovering(level, cx, cy, finer) {
    const ratio = this.cellDegrees[level] / this.cellDegrees[finer];
    return this.cells.get(`${level}/${Math.floor(cx / ratio)}/${Math.floor(cy / ratio)}`);
  }

  loadCell(level, cx, cy, attempt = 1) {
    const key = `${level}/${cx}/${cy}`;
    const entry = { state: "loading", key, level, fills: [], lines: [], labels: [] };
    this.cells.set(key, entry);
    fetch(`/basemap/${level}/${cx}_${cy}.json`)
      .then((r) => {
        if (!r.ok) throw new Error(r.status);
        const grid = r.headers.get("Basemap-Cell-Degrees");
        if (grid) this.cellDegrees = grid.split(",").map(Number);
        return r.json();
      })
      .then((data) => {
        const q = data.quantum;
        // Project once; frames then only scale and translate.
        const toWorld = (ring) => {
          const ll = decodeRing(ring, q);
          const out = new Float64Array(ll.length);
          for (let i = 0; i < ll.length; i += 2) {
            const p = project(ll[i], ll[i + 1]);
            out[i] = p.x; out[i + 1] = p.y;
          }
          return out;
        };
        entry.fills = data.fills.map(toWorld);
        entry.lines = data.lines.length ? data.lines.map(toWorld) : entry.fills;
        entry.closedLines = data.lines.length === 0;
        entry.labels = data.labels.map(([name, lat, lon, population]) => {
          const p = project(lon, lat);
          return { name, x: p.x, y: p.y, population };
        });
        entry.state = "loaded";
        this.redraw();
      })
      .catch(() => {
        entry.state = "failed";
        setTimeout(() => { this.cells.delete(key); this.redraw(); }, backoff(attempt) * 1000);
      });
    return entry;
  }

  drawCell(ctx, cell, size, offset) {
    const ox = this.width / 2 - (this.center.x - offset) * size;
    const oy = this.height / 2 - this.center.y * size;
    ctx.beginPath();
    for (const ring of cell.fills) {
      ctx.moveTo(ring[0] * size + ox, ring[1] * size + oy);
      for (let i = 2; i < ring.length; i += 2) ctx.lineTo(ring[i] * size + ox, ring[i + 1] * size + oy);
      ctx.closePath();
    }
    ctx.fillStyle = colours().land;
    ctx.fill("evenodd");
    ctx.beginPath();
    for (const line of cell.lines) {
      ctx.moveTo(line[0] * size + ox, line[1] * size + oy);
      for (let i = 2; i < line.length; i += 2) ctx.lineTo(line[i] * size + ox, line[i + 1] * size + oy);
      if (cell.closedLines) ctx.closePath();
    }
    ctx.strokeStyle = this.zoom < 3 ? colours().coast : colours().border;
    ctx.lineWidth = this.zoom < 3 ? 0.6 : 0.9;
    ctx.stroke();
  }

  /** Largest places first; a label that would overlap one already placed is skipped. */
  drawLabels(ctx, labels, size) {
    labels.sort((a, b) => b.population - a.population);
    const placed = [];
    ctx.font = "12px system-ui, -apple-system, Segoe UI, Roboto, sans-serif";
    ctx.textBaseline = "middle";
    ctx.lineJoin = "round";
    const limit = Math.min(labels.length, 400);
    for (let i = 0; i < limit; i++) {
      const l = labels[i];
      const x = this.width / 2 + (l.x - this.center.x + l.offset) * size;
      const y = this.height / 2 + (l.y - this.center.y) * size;
      if (x < -50 || x > this.width + 50 || y < -10 || y > this.height + 10) continue;
      const w = ctx.measureText(l.name).width;
      const box = { x0: x - 3, y0: y - 9, x1: x + 8 + w, y1: y + 9 };
      if (placed.some((b) => box.x0 < b.x1 && box.x1 > b.x0 && box.y0 < b.y1 && box.y1 > b.y0)) continue;
      placed.push(box);
      const c = colours();
      ctx.fillStyle = c.dot;
      ctx.beginPath();
      ctx.arc(x, y, 2.2, 0, 2 * Math.PI);
      ctx.fill();
      ctx.strokeStyle = c.halo;
      ctx.lineWidth = 3;
      ctx.strokeText(l.name, x + 5, y);
      ctx.fillStyle = c.label;
      ctx.fillText(l.name, x + 5, y);
    }
  }

  // ----- input -----

  attachInput() {
    const c = this.canvas;
    c.style.touchAction = "none";
    c.addEventListener("pointerdown", (e) => this.pointerDown(e));
    c.addEventListener("pointermove", (e) => this.pointerMove(e));
    c.addEventListener("pointerup", (e) => this.pointerUp(e));
    c.addEventListener("pointercancel", (e) => this.pointerUp(e, true));
    c.addEventListener("wheel", (e) => this.wheel(e), { passive: false });
    c.addEventListener("keydown", (e) => this.key(e));
    c.addEventListener("contextmenu", (e) => e.preventDefault()); // long press on touch
  }

  local(e) {
    const rect = this.canvas.getBoundingClientRect();
    return { x: e.clientX - rect.left, y: e.clientY - rect.top };
  }

  pointerDown(e) {
    if (e.button !== undefined && e.button > 0) return;
    this.canvas.setPointerCapture(e.pointerId);
    this.canvas.focus({ preventScroll: true });
    this.stopAnimation();
    const p = this.local(e);
    this.pointers.set(e.pointerId, { ...p, startX: p.x, startY: p.y, time: performance.now() });
    if (this.pointers.size === 1) {
      this.gesture = { moved: false, samples: [{ ...p, t: performance.now() }], longPressed: false };
      clearTimeout(this.longPressTimer);
      this.longPressTimer = setTimeout(() => {
        if (this.gesture && !this.gesture.moved && this.pointers.size === 1) {
          this.gesture.longPressed = true;
          this.emit("longpress", { ...this.screenToLonLat(p.x, p.y), x: p.x, y: p.y });
        }
      }, LONG_PRESS_MS);
    } else {
      clearTimeout(this.longPressTimer);
      if (this.gesture) this.gesture.moved = true;
      this.pinch = this.pinchState();
    }
  }

  pinchState() {
    const [a, b] = [...this.pointers.values()];
    return { distance: Math.hypot(a.x - b.x, a.y - b.y), mid: { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 }, zoom: this.zoom };
  }

  pointerMove(e) {
    const pointer = this.pointers.get(e.pointerId);
    if (!pointer) return;
    const p = this.local(e);
    const dx = p.x - pointer.x, dy = p.y - pointer.y;
    pointer.x = p.x; pointer.y = p.y;
    if (this.pointers.size >= 2 && this.pinch) {
      // Pinch: zoom by the change in finger distance around their midpoint; pan with the midpoint.
      const now = this.pinchState();
      if (this.pinch.distance > 0) this.zoomAround(now.mid.x, now.mid.y, this.pinch.zoom + Math.log2(now.distance / this.pinch.distance));
      this.panBy(now.mid.x - this.pinch.mid.x, now.mid.y - this.pinch.mid.y);
      this.pinch.mid = now.mid;
      return;
    }
    if (!this.gesture) return;
    if (!this.gesture.moved && Math.hypot(p.x - pointer.startX, p.y - pointer.startY) > LONG_PRESS_SLOP) {
      this.gesture.moved = true;
      clearTimeout(this.longPressTimer);
    }
    if (this.gesture.moved && !this.gesture.longPressed) {
      this.panBy(dx, dy);
      this.gesture.samples.push({ ...p, t: performance.now() });
      if (this.gesture.samples.length > 6) this.gesture.samples.shift();
    }
  }

  pointerUp(e, cancelled = false) {
    const pointer = this.pointers.get(e.pointerId);
    if (!pointer) return;
    this.pointers.delete(e.pointerId);
    clearTimeout(this.longPressTimer);
    if (this.pointers.size === 1) {
      // One finger left after a pinch: it continues as a pan, never as a tap.
      this.pinch = null;
      const [rest] = this.pointers.values();
      rest.startX = rest.x; rest.startY = rest.y;
      return;
    }
    if (this.pointers.size > 0) return;
    this.pinch = null;
    const gesture = this.gesture;
    this.gesture = null;
    if (!gesture || cancelled) { this.moveEnded(); return; }
    const p = this.local(e);
    if (gesture.moved) {
      this.inertia(gesture.samples);
      return;
    }
    if (gesture.longPressed) return;
    // A tap: a second one soon after, near the first, zooms in (double-tap / double-click).
    const now = performance.now();
    if (this.lastTap && now - this.lastTap.t < DOUBLE_TAP_MS && Math.hypot(p.x - this.lastTap.x, p.y - this.lastTap.y) < 24) {
      this.lastTap = null;
      clearTimeout(this.tapTimer);
      this.animateZoom(p.x, p.y, Math.round(this.zoom) + 1);
      return;
    }
    this.lastTap = { ...p, t: now };
    this.emit("tap", { ...this.screenToLonLat(p.x, p.y), x: p.x, y: p.y });
  }

  /** Keeps gliding after a flick, slowing down. */
  inertia(samples) {
    const last = samples[samples.length - 1];
    const first = samples.find((s) => last.t - s.t < 100) || samples[0];
    const dt = last.t - first.t;
    if (dt <= 0 || performance.now() - last.t > 80) { this.moveEnded(); return; }
    const vx = (last.x - first.x) / dt, vy = (last.y - first.y) / dt; // px per ms
    const speed = Math.hypot(vx, vy);
    if (speed < 0.2) { this.moveEnded(); return; }
    const duration = Math.min(900, speed * 400);
    let travelled = 0;
    const distance = speed * duration / 3; // integral of a cubic ease-out
    this.animate(duration, (t) => {
      const e = 1 - Math.pow(1 - t, 3);
      const step = e * distance - travelled;
      travelled = e * distance;
      this.panBy(vx / speed * step, vy / speed * step);
    });
  }

  animateZoom(px, py, target, duration = 250) {
    const from = this.zoom;
    target = clampZoom(target);
    this.animate(duration, (t) => {
      const e = 1 - Math.pow(1 - t, 3);
      this.zoomAround(px, py, from + (target - from) * e);
    });
  }

  wheel(e) {
    e.preventDefault();
    this.stopAnimation();
    const p = this.local(e);
    // Lines (Firefox) and pages into pixels; trackpads send many small deltas, mice a few large.
    const unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? this.height : 1;
    const delta = Math.max(-200, Math.min(200, e.deltaY * unit));
    this.zoomAround(p.x, p.y, this.zoom - delta / (e.ctrlKey ? 100 : 300));
    this.moveEnded();
  }

  key(e) {
    const step = 100;
    const actions = {
      ArrowLeft: () => this.panBy(step, 0), ArrowRight: () => this.panBy(-step, 0),
      ArrowUp: () => this.panBy(0, step), ArrowDown: () => this.panBy(0, -step),
      "+": () => this.animateZoom(this.width / 2, this.height / 2, Math.round(this.zoom) + 1),
      "=": () => this.animateZoom(this.width / 2, this.height / 2, Math.round(this.zoom) + 1),
      "-": () => this.animateZoom(this.width / 2, this.height / 2, Math.round(this.zoom) - 1),
      "_": () => this.animateZoom(this.width / 2, this.height / 2, Math.round(this.zoom) - 1),
    };
    const action = actions[e.key];
    if (!action || e.altKey || e.ctrlKey || e.metaKey) return;
    e.preventDefault();
    action();
    this.moveEnded();
  }

  zoomIn() { this.animateZoom(this.width / 2, this.height / 2, Math.min(MAX_ZOOM, Math.round(this.zoom) + 1)); }
  zoomOut() { this.animateZoom(this.width / 2, this.height / 2, Math.round(this.zoom) - 1); }

  /** Frame statistics for script/bench map. */
  stats() {
    const sorted = [...this.frameTimes].sort((a, b) => a - b);
    return { frames: this.frames, medianDrawMs: sorted[Math.floor(sorted.length / 2)] || 0, p95DrawMs: sorted[Math.floor(sorted.length * 0.95)] || 0 };
  }
}
