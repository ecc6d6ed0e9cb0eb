// The built-in basemap: land, borders and labels from the cells under /basemap.
import { project, unproject, worldSize, basemapLevel, decodeRing, backoff } from "./geo.js";
import { colours } from "./view.js";
import { drawLabels } from "./labels.js";

export class Basemap {
  constructor(redraw) {
    this.redraw = redraw;
    this.cells = new Map();      // "level/x/y" → {state, fills, lines, labels}
    this.cellDegrees = [];       // cell size per level: the server sends it with every cell
    this.loadCell(0, 0, 0);
  }

  /** The cells of the zoom's level that are in view, falling back to coarser levels for cells
   *  still loading. */
  draw(ctx, view) {
    const wanted = basemapLevel(view.zoom);
    const size = worldSize(view.zoom);
    const visible = this.visibleCells(view, wanted);
    const labels = [];
    const drawnCells = new Set(); // a coarse cell standing in for several fine ones is drawn once
    let ready = this.cellDegrees.length > 0;
    for (const { level, cx, cy, copies } of visible) {
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
        this.drawCell(ctx, view, drawn, size, offset);
      }
      if (drawn.level === wanted) for (const offset of copies) labels.push(...drawn.labels.map((l) => ({ ...l, offset })));
    }
    drawLabels(ctx, view, labels, size);
    view.canvas.parentElement.dataset.basemap = ready ? "ready" : "loading";
  }

  visibleCells(view, level) {
    const deg = this.cellDegrees[level];
    if (!deg) return []; // the grid is not known before the first cell arrives
    const nw = view.screenToWorld(0, 0);
    const se = view.screenToWorld(view.width, view.height);
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

  drawCell(ctx, view, cell, size, offset) {
    const ox = view.width / 2 - (view.center.x - offset) * size;
    const oy = view.height / 2 - view.center.y * size;
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
    ctx.strokeStyle = view.zoom < 3 ? colours().coast : colours().border;
    ctx.lineWidth = view.zoom < 3 ? 0.6 : 0.9;
    ctx.stroke();
  }
}
