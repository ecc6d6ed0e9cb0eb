// A shared map, live: each "pins" event of /map/events (another member dropped, imported or
// deleted a pin) re-reads the view, one read at a time (events during a read fold into one more).
// Once read from the server, the pins follow the map's moves too.
export function follow(root, map, loadInView) {
  if (!window.EventSource) return;
  let reading = false, again = false;
  const refresh = async () => {
    if (reading) { again = true; return; }
    reading = true;
    do { again = false; await loadInView(); } while (again);
    reading = false;
    root.dataset.liveUpdates = String(Number(root.dataset.liveUpdates || 0) + 1);
  };
  const events = new EventSource("/map/events");
  events.addEventListener("pins", refresh);
  if (root.dataset.pinsComplete === "true") map.on("moveend", () => { if (root.dataset.liveUpdates) loadInView(); });
}
