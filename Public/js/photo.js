// The photo page: previous and next with the arrow keys.
document.documentElement.classList.add("js");
document.addEventListener("keydown", (event) => {
  if (event.altKey || event.ctrlKey || event.metaKey || event.target.closest("input, textarea, select")) return;
  const link = document.getElementById(event.key === "ArrowLeft" ? "previous-photo" : event.key === "ArrowRight" ? "next-photo" : "");
  if (link) { event.preventDefault(); location.href = link.href; }
});
