// The map's view: projection, moves, events, and the frame loop (sea, base layer, layers above).
import { project, unproject, clampZoom, worldSize, MAX_ZOOM } from "./geo.js";

// The built-in basemap's colours in the page's theme (prefers-color-scheme), so a dark page does not
// frame a glaring map. The light sea colour is also what tests read to tell background from tiles.
const LIGHT = { sea: "#a9cfe0", land: "#f3efe4", border: "#b7ab93", coast: "#8fa9b4",
                dot: "#5b5347", label: "#2f2a22", halo: "rgba(255,255,255,0.9)" };
const DARK = { sea: "#1c3441", land: "#2b302d", border: "#6a6251", coast: "#456573",
               dot: "#c2b8a3", label: "#ece6d8", halo: "rgba(20,24,27,0.9)" };
export const darkScheme = typeof matchMedia === "function" ? matchMedia("(prefers-color-scheme: dark)") : null;
export const colours = () => (darkScheme && darkScheme.matches ? DARK : LIGHT);

export class View {
  constructor(canvas, { lat, lon, zoom }) {
    this.canvas = canvas;
    this.ctx = canvas.getContext("2d");
    const p = project(lon, lat);
    this.center = { x: p.x, y: p.y };
    this.zoom = clampZoom(zoom);
    this.width = 0;
    this.height = 0;
    this.dpr = 1;
    this.base = null;            // drawn first, over the sea: draw(ctx, view)
    this.layers = [];            // objects with draw(ctx, view) and optionally animating()
    this.listeners = { move: [], moveend: [], longpress: [], tap: [] };
    this.frames = 0;
    this.frameTimes = [];
    this.animation = null;
    this.scheduled = false;
    // this.baseCopy: the base as last drawn for a view that stood still (this.baseKey), which a
    // frame where only the layers changed (a pin dropping, a pin selected) puts back.
    this.resize();
    new ResizeObserver(() => { this.resize(); this.redraw(); }).observe(canvas);
    if (darkScheme) darkScheme.addEventListener("change", () => this.redraw());
  }

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

  animateZoom(px, py, target, duration = 250) {
    const from = this.zoom;
    target = clampZoom(target);
    this.animate(duration, (t) => {
      const e = 1 - Math.pow(1 - t, 3);
      this.zoomAround(px, py, from + (target - from) * e);
    });
  }

  zoomIn() { this.animateZoom(this.width / 2, this.height / 2, Math.min(MAX_ZOOM, Math.round(this.zoom) + 1)); }
  zoomOut() { this.animateZoom(this.width / 2, this.height / 2, Math.round(this.zoom) - 1); }

  // ----- frames -----

  resize() {
    const rect = this.canvas.getBoundingClientRect();
    this.dpr = window.devicePixelRatio || 1;
    this.width = Math.max(1, rect.width);
    this.height = Math.max(1, rect.height);
    this.canvas.width = Math.round(this.width * this.dpr);
    this.canvas.height = Math.round(this.height * this.dpr);
  }

  redraw() {
    this.baseStale = true;
    this.redrawLayers();
  }

  // Only the layers above the base changed (pins): the next frame reuses the base's copy when it
  // has one for this view. Where the canvas is drawn in software a full frame is long, and a pin's
  // drop animation asks for one every 16 ms: drawn in full, they hold up the page's answer to
  // POST /pins (docs/performance.md, "Albums", pindrop).
  redrawLayers() {
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
    if (this.animation) this.redraw();
    else if (this.layers.some((l) => l.animating && l.animating(now))) this.redrawLayers();
  }

  draw() {
    const ctx = this.ctx;
    const sea = colours().sea;
    const key = [this.center.x, this.center.y, this.zoom, this.canvas.width, this.canvas.height, sea].join();
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    if (!this.baseStale && key === this.baseKey) ctx.drawImage(this.baseCopy, 0, 0);
    else {
      ctx.fillStyle = sea;
      ctx.fillRect(0, 0, this.canvas.width, this.canvas.height);
      ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
      if (this.base) this.base.draw(ctx, this);
      // Copied only when the view stood still since the last frame: a moving view's copy (a
      // pan, a zoom) would never be used, and the copy costs a blit.
      this.baseKey = null;
      if (key === this.lastKey) {
        const copy = this.baseCopy ||= document.createElement("canvas");
        copy.width = this.canvas.width;
        copy.height = this.canvas.height;
        copy.getContext("2d").drawImage(this.canvas, 0, 0);
        this.baseKey = key;
      }
      this.baseStale = false;
    }
    ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    this.lastKey = key;
    for (const layer of this.layers) layer.draw(ctx, this);
    const v = this.view;
    const ds = this.canvas.parentElement.dataset;
    ds.viewLat = v.lat.toFixed(5);
    ds.viewLon = v.lon.toFixed(5);
    ds.viewZoom = v.zoom.toFixed(3);
    ds.frames = String(this.frames + 1);
  }

  /** Frame statistics for script/bench map. */
  stats() {
    const sorted = [...this.frameTimes].sort((a, b) => a - b);
    return { frames: this.frames, medianDrawMs: sorted[Math.floor(sorted.length / 2)] || 0, p95DrawMs: sorted[Math.floor(sorted.length * 0.95)] || 0 };
  }
}
