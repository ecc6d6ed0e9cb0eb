// A shared map, live: each "pins" event of /map/events (another member dropped, imported or
// deleted a pin; its data is the pin's id, or 0 for "look again") re-reads the view, one read at a
// time (events during a read fold into one more). This tab's own drops and deletions (`own`,
// app.js) are shown already: their events are skipped, those that came before the answer too.
// Once read from the server, the pins follow the map's moves too.
export function follow(root, map, loadInView, own) {
  if (!window.EventSource) return;
  let reading = false, again = false;
  const refresh = async () => {
    if (reading) { again = true; return; }
    reading = true;
    do { again = false; await loadInView(); } while (again);
    reading = false;
    root.dataset.liveUpdates = String(Number(root.dataset.liveUpdates || 0) + 1);
  };
  const othersIn = (ids) => ids.filter((id) => !own.ids.delete(id)).length > 0;
  own.settled = () => { if (othersIn(own.held.splice(0))) refresh(); };
  const events = new EventSource("/map/events");
  events.addEventListener("pins", (event) => {
    const id = Number(event.data);
    if (own.unanswered > 0) { own.held.push(id); return; }
    if (othersIn([id])) refresh();
  });
  if (root.dataset.pinsComplete === "true") map.on("moveend", () => { if (root.dataset.liveUpdates) loadInView(); });
}
