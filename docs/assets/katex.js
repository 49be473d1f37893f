// Typeset the maths that pymdownx.arithmatex marks (class "arithmatex") with the local KaTeX copy,
// on the first load and after every instant navigation of Material's theme.
function renderMaths() {
  for (const element of document.querySelectorAll(".arithmatex")) {
    renderMathInElement(element, {
      delimiters: [
        { left: "\\(", right: "\\)", display: false },
        { left: "\\[", right: "\\]", display: true },
      ],
      throwOnError: false,
    });
  }
}
if (typeof document$ !== "undefined") {
  document$.subscribe(renderMaths);
} else {
  document.addEventListener("DOMContentLoaded", renderMaths);
}
