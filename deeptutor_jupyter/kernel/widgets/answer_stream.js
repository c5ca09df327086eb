// A turn's streamed answer, append-only (answer_stream.py). Sent with every open: keep it tiny.
// The text lives on the model, so every view of it, one drawn late included, shows all of it.
// New text comes as {at} plus a UTF-8 buffer; a gap asks the kernel for the whole text once.
function initialize({ model }) {
  let asked = false;
  const add = (msg, buffers) => {
    if (typeof msg?.at !== "number") return;
    const text = model.get("text") || "";
    if (msg.at > text.length) {
      if (!asked) model.send({ resync: 1 });
      asked = true;
      return;
    }
    asked = false;
    // ignoreBOM: a delta that starts with U+FEFF keeps it (the kernel counted it).
    const a = new TextDecoder("utf-8", { ignoreBOM: true }).decode(buffers[0]);
    if (msg.at + a.length > text.length) model.set("text", text.slice(0, msg.at) + a);
  };
  model.on("msg:custom", add);
  return () => model.off("msg:custom", add);
}

// Rendered as Markdown by the labextension's hook (answerhook.ts) where it is installed;
// elsewhere the text is readable as it is, and the turn's end replaces it with static HTML.
function render({ model, el }) {
  el.classList.add("dt-answer");
  const hook = globalThis.__deeptutorAnswer;
  let view = hook && hook(el);
  if (!view) {
    const pre = el.appendChild(document.createElement("div"));
    pre.className = "dt-text";
    pre.style.whiteSpace = "pre-wrap";
    view = { update: (text) => (pre.textContent = text) };
  }
  const show = () => view.update(model.get("text") || "", model.get("suffix") || "");
  show();
  model.on("change:text", show);
  model.on("change:suffix", show);
  return () => {
    model.off("change:text", show);
    model.off("change:suffix", show);
    view.dispose?.();
  };
}

export default { initialize, render };
