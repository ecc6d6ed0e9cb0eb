// Input on the map's canvas: pointer (mouse, touch, pinch, long-press, taps), wheel and keyboard.
const LONG_PRESS_MS = 500;
const LONG_PRESS_SLOP = 6;          // px the pointer may wander during a press-and-hold
const DOUBLE_TAP_MS = 300;

export class MapInput {
  constructor(view) {
    this.view = view;
    this.pointers = new Map();
    const c = view.canvas;
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
    const rect = this.view.canvas.getBoundingClientRect();
    return { x: e.clientX - rect.left, y: e.clientY - rect.top };
  }

  pointerDown(e) {
    if (e.button !== undefined && e.button > 0) return;
    const view = this.view;
    view.canvas.setPointerCapture(e.pointerId);
    view.canvas.focus({ preventScroll: true });
    view.stopAnimation();
    const p = this.local(e);
    this.pointers.set(e.pointerId, { ...p, startX: p.x, startY: p.y, time: performance.now() });
    if (this.pointers.size === 1) {
      this.gesture = { moved: false, samples: [{ ...p, t: performance.now() }], longPressed: false };
      clearTimeout(this.longPressTimer);
      this.longPressTimer = setTimeout(() => {
        if (this.gesture && !this.gesture.moved && this.pointers.size === 1) {
          this.gesture.longPressed = true;
          view.emit("longpress", { ...view.screenToLonLat(p.x, p.y), x: p.x, y: p.y });
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
    return { distance: Math.hypot(a.x - b.x, a.y - b.y), mid: { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 }, zoom: this.view.zoom };
  }

  pointerMove(e) {
    const pointer = this.pointers.get(e.pointerId);
    if (!pointer) return;
    const view = this.view;
    const p = this.local(e);
    const dx = p.x - pointer.x, dy = p.y - pointer.y;
    pointer.x = p.x; pointer.y = p.y;
    if (this.pointers.size >= 2 && this.pinch) {
      // Pinch: zoom by the change in finger distance around their midpoint; pan with the midpoint.
      const now = this.pinchState();
      if (this.pinch.distance > 0) view.zoomAround(now.mid.x, now.mid.y, this.pinch.zoom + Math.log2(now.distance / this.pinch.distance));
      view.panBy(now.mid.x - this.pinch.mid.x, now.mid.y - this.pinch.mid.y);
      this.pinch.mid = now.mid;
      return;
    }
    if (!this.gesture) return;
    if (!this.gesture.moved && Math.hypot(p.x - pointer.startX, p.y - pointer.startY) > LONG_PRESS_SLOP) {
      this.gesture.moved = true;
      clearTimeout(this.longPressTimer);
    }
    if (this.gesture.moved && !this.gesture.longPressed) {
      view.panBy(dx, dy);
      this.gesture.samples.push({ ...p, t: performance.now() });
      if (this.gesture.samples.length > 6) this.gesture.samples.shift();
    }
  }

  pointerUp(e, cancelled = false) {
    const pointer = this.pointers.get(e.pointerId);
    if (!pointer) return;
    const view = this.view;
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
    if (!gesture || cancelled) { view.moveEnded(); return; }
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
      view.animateZoom(p.x, p.y, Math.round(view.zoom) + 1);
      return;
    }
    this.lastTap = { ...p, t: now };
    view.emit("tap", { ...view.screenToLonLat(p.x, p.y), x: p.x, y: p.y });
  }

  /** Keeps gliding after a flick, slowing down. */
  inertia(samples) {
    const view = this.view;
    const last = samples[samples.length - 1];
    const first = samples.find((s) => last.t - s.t < 100) || samples[0];
    const dt = last.t - first.t;
    if (dt <= 0 || performance.now() - last.t > 80) { view.moveEnded(); return; }
    const vx = (last.x - first.x) / dt, vy = (last.y - first.y) / dt; // px per ms
    const speed = Math.hypot(vx, vy);
    if (speed < 0.2) { view.moveEnded(); return; }
    const duration = Math.min(900, speed * 400);
    let travelled = 0;
    const distance = speed * duration / 3; // integral of a cubic ease-out
    view.animate(duration, (t) => {
      const e = 1 - Math.pow(1 - t, 3);
      const step = e * distance - travelled;
      travelled = e * distance;
      view.panBy(vx / speed * step, vy / speed * step);
    });
  }

  wheel(e) {
    e.preventDefault();
    const view = this.view;
    view.stopAnimation();
    const p = this.local(e);
    // Lines (Firefox) and pages into pixels; trackpads send many small deltas, mice a few large.
    const unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? view.height : 1;
    const delta = Math.max(-200, Math.min(200, e.deltaY * unit));
    view.zoomAround(p.x, p.y, view.zoom - delta / (e.ctrlKey ? 100 : 300));
    view.moveEnded();
  }

  key(e) {
    const view = this.view;
    const step = 100;
    const zoomBy = (d) => () => view.animateZoom(view.width / 2, view.height / 2, Math.round(view.zoom) + d);
    const actions = {
      ArrowLeft: () => view.panBy(step, 0), ArrowRight: () => view.panBy(-step, 0),
      ArrowUp: () => view.panBy(0, step), ArrowDown: () => view.panBy(0, -step),
      "+": zoomBy(1), "=": zoomBy(1), "-": zoomBy(-1), "_": zoomBy(-1),
    };
    const action = actions[e.key];
    if (!action || e.altKey || e.ctrlKey || e.metaKey) return;
    e.preventDefault();
    action();
    view.moveEnded();
  }
}
