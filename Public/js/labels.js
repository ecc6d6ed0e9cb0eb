// Place labels, for the built-in basemap and vector tiles alike.
import { colours } from "./view.js";

/** Largest places first; a label that would overlap one already placed is skipped. */
export function drawLabels(ctx, view, labels, size) {
  labels.sort((a, b) => b.population - a.population);
  const placed = [];
  ctx.font = "12px system-ui, -apple-system, Segoe UI, Roboto, sans-serif";
  ctx.textBaseline = "middle";
  ctx.lineJoin = "round";
  const limit = Math.min(labels.length, 400);
  for (let i = 0; i < limit; i++) {
    const l = labels[i];
    const x = view.width / 2 + (l.x - view.center.x + l.offset) * size;
    const y = view.height / 2 + (l.y - view.center.y) * size;
    if (x < -50 || x > view.width + 50 || y < -10 || y > view.height + 10) continue;
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
