// The photo page: previous and next with the arrow keys, back to the album with Escape.
document.documentElement.classList.add("js");
document.addEventListener("keydown", (event) => {
  if (event.altKey || event.ctrlKey || event.metaKey || event.target.closest("input, textarea, select")) return;
  const link = document.getElementById(event.key === "ArrowLeft" ? "previous-photo" : event.key === "ArrowRight" ? "next-photo"
    : event.key === "Escape" ? "back-to-album" : "");
  if (link) { event.preventDefault(); location.href = link.href; }
});
