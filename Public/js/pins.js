// The pins layer: markers with a drop animation, clusters with a count where pins crowd together,
// and hit-testing for taps.
import { project, cluster } from "./geo.js";

const CLUSTER_RADIUS = 34;
const DROP_MS = 350;

export class PinLayer {
  constructor() {
    this.pins = [];      // {id, lat, lon, name, photos, status, x, y (world), droppedAt?, pending?}
    this.hits = [];      // what was drawn last frame, for hit-testing: {x, y, r, members, count}
    this.selected = null;
    this.clusters = [];  // groups the server made for a crowded view: {x, y (world), count}
  }

  /** The server's clusters for the current view (/pins.json?bbox&zoom), drawn as they are. */
  setClusters(clusters) {
    this.clusters = clusters.map((c) => ({ ...project(c.lon, c.lat), count: c.count }));
  }

  set(pins) {
    this.pins = pins.map((p) => this.prepare(p));
  }

  prepare(pin) {
    const w = project(pin.lon, pin.lat);
    return { ...pin, x: w.x, y: w.y };
  }

  add(pin, animate = true) {
    const prepared = this.prepare(pin);
    if (animate) prepared.droppedAt = performance.now();
    this.pins.unshift(prepared);
    return prepared;
  }

  replace(old, pin) {
    const index = this.pins.indexOf(old);
    const prepared = { ...this.prepare(pin), droppedAt: old.droppedAt };
    if (index >= 0) this.pins[index] = prepared; else this.pins.unshift(prepared);
    return prepared;
  }

  remove(pin) {
    this.pins = this.pins.filter((p) => p !== pin && p.id !== pin.id);
    if (this.selected && this.selected.id === pin.id) this.selected = null;
  }

  animating(now) {
    return this.pins.some((p) => p.droppedAt && now - p.droppedAt < DROP_MS);
  }

  draw(ctx, map) {
    const now = performance.now();
    const points = [];
    const margin = 40;
    for (const pin of this.pins) {
      const s = map.worldToScreen(pin.x, pin.y);
      if (s.x < -margin || s.x > map.width + margin || s.y < -margin || s.y > map.height + margin) continue;
      points.push({ x: s.x, y: s.y, pin });
    }
    // Cluster only when pins would overlap; at close zoom every pin stands alone.
    const groups = map.zoom < 14 ? cluster(points, CLUSTER_RADIUS) : points.map((p) => ({ x: p.x, y: p.y, members: [p] }));
    this.hits = [];
    for (const group of groups) {
      if (group.members.length > 1) {
        this.drawCluster(ctx, group);
        this.hits.push({ x: group.x, y: group.y, r: 18, members: group.members.map((m) => m.pin), count: group.members.length });
      }
    }
    for (const c of this.clusters) {
      const s = map.worldToScreen(c.x, c.y);
      if (s.x < -margin || s.x > map.width + margin || s.y < -margin || s.y > map.height + margin) continue;
      this.drawCluster(ctx, { x: s.x, y: s.y, members: [], count: c.count });
      this.hits.push({ x: s.x, y: s.y, r: 18, members: [], count: c.count });
    }
    for (const group of groups) {
      if (group.members.length !== 1) continue;
      const { x, y, pin } = group.members[0];
      let drop = 0;
      if (pin.droppedAt) {
        const t = Math.min(1, (now - pin.droppedAt) / DROP_MS);
        drop = (1 - t) * (1 - t) * -40; // falls in, easing out
        if (t >= 1) pin.droppedAt = null;
      }
      this.drawMarker(ctx, x, y + drop, pin === this.selected || (this.selected && pin.id === this.selected.id), pin.pending);
      this.hits.push({ x, y: y - 16, r: 16, members: [pin], count: 1 });
    }
    // The keyboard's current pin or cluster (Tab on the map): a ring in the page's focus colour.
    if (this.focused) {
      const key = (h) => `${h.count}:${h.members.length ? h.members[0].id : `${Math.round(h.x)},${Math.round(h.y)}`}`;
      const f = this.hits.find((h) => key(h) === key(this.focused));
      if (f) {
        ctx.save();
        ctx.beginPath();
        ctx.arc(f.x, f.y, f.r + 6, 0, 2 * Math.PI);
        ctx.lineWidth = 4;
        ctx.strokeStyle = getComputedStyle(map.canvas).getPropertyValue("--focus").trim() || "#0b5cad";
        ctx.stroke();
        ctx.restore();
      }
    }
    map.canvas.parentElement.dataset.pinsDrawn = String(points.length);
    map.canvas.parentElement.dataset.clusters = String(groups.filter((g) => g.members.length > 1).length + this.clusters.length);
  }

  drawMarker(ctx, x, y, selected, pending) {
    ctx.save();
    ctx.translate(x, y);
    ctx.fillStyle = "rgba(0,0,0,0.25)";
    ctx.beginPath();
    ctx.ellipse(0, 0, 6, 2.5, 0, 0, 2 * Math.PI);
    ctx.fill();
    ctx.beginPath();
    ctx.moveTo(0, 0);
    ctx.bezierCurveTo(-3, -9, -11, -14, -11, -22);
    ctx.arc(0, -22, 11, Math.PI, 0);
    ctx.bezierCurveTo(11, -14, 3, -9, 0, 0);
    ctx.fillStyle = pending ? "#8aa7b3" : selected ? "#b3261e" : "#d9412f";
    ctx.fill();
    ctx.lineWidth = 1.5;
    ctx.strokeStyle = "#fff";
    ctx.stroke();
    ctx.beginPath();
    ctx.arc(0, -22, 4, 0, 2 * Math.PI);
    ctx.fillStyle = "#fff";
    ctx.fill();
    ctx.restore();
  }

  drawCluster(ctx, group) {
    const n = group.count ?? group.members.length;
    const r = n < 10 ? 15 : n < 100 ? 18 : 22;
    ctx.beginPath();
    ctx.arc(group.x, group.y, r, 0, 2 * Math.PI);
    ctx.fillStyle = "#1f6f8b";
    ctx.fill();
    ctx.lineWidth = 3;
    ctx.strokeStyle = "rgba(255,255,255,0.9)";
    ctx.stroke();
    ctx.fillStyle = "#fff";
    ctx.font = "bold 13px system-ui, -apple-system, Segoe UI, Roboto, sans-serif";
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    ctx.fillText(String(n), group.x, group.y + 0.5);
    ctx.textAlign = "start";
  }

  /** The pin or cluster under a screen point (markers on top first). */
  hit(x, y) {
    for (let i = this.hits.length - 1; i >= 0; i--) {
      const h = this.hits[i];
      if (Math.hypot(h.x - x, h.y - y) <= h.r + 4) return h;
    }
    return null;
  }
}
