// A turn's status line (status_line.py): the kernel's HTML, whose clock this module advances
// each second while the turn runs, so the kernel sends the line only when its words change.
// Drawn as ipywidgets draws its HTML widget, so the line looks as it did. The Stop button is
// drawn here too (one widget, not a Button and its style): its click is ipywidgets' Button's.
function render({ model, el }) {
  let timer;
  el.classList.add("widget-inline-hbox", "widget-html");
  const line = el.appendChild(document.createElement("div"));
  line.className = "widget-html-content";
  const stop = el.appendChild(document.createElement("button"));
  stop.className = "jupyter-widgets jupyter-button widget-button mod-warning dt-stop-button";
  stop.type = "button";
  stop.onclick = () => model.send({ event: "click" });
  const show = () => {
    clearInterval(timer);
    line.innerHTML = model.get("value") || "";
    stop.textContent = "■ " + (model.get("stop") || "");
    // A screen reader says its label ("Stop"), not the square's name before it.
    stop.setAttribute("aria-label", model.get("stop") || "");
    stop.style.display = model.get("stop") ? "" : "none";
    const clock = line.querySelector(".dt-clock[data-live]");
    if (!clock) return;
    const base = parseFloat(clock.textContent);
    const since = Date.now();
    timer = setInterval(() => {
      clock.textContent = `${(base + (Date.now() - since) / 1000).toFixed(1)} s`;
    }, 1000);
  };
  // A restarted or disconnected kernel: its turn is not running on (nothing to stop); a
  // reconnect's new state (change:value) starts the clock again.
  const gone = () => {
    clearInterval(timer);
    stop.style.display = "none";
  };
  show();
  model.on("change:value", show);
  model.on("change:stop", show);
  model.on("comm_live_update", gone);
  return () => {
    clearInterval(timer);
    model.off("change:value", show);
    model.off("change:stop", show);
    model.off("comm_live_update", gone);
  };
}

export default { render };
