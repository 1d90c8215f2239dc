// Each gallery figure links to its full-size image (its 2x rendering where there is one), as
// figures with a set size do in Sphinx: a wide figure is shown at the column's width, and a
// click opens it full size. Nothing is fetched.
document.addEventListener("DOMContentLoaded", () => {
  for (const img of document.querySelectorAll("img.sphx-glr-single-img, img.sphx-glr-multi-img")) {
    if (img.closest("a")) continue;
    const candidates = (img.getAttribute("srcset") || "").split(",")
      .map((entry) => entry.trim().split(/\s+/)).filter((entry) => entry[0]);
    candidates.sort((a, b) => parseFloat(b[1] || "1") - parseFloat(a[1] || "1"));
    const link = document.createElement("a");
    link.href = candidates.length ? candidates[0][0] : img.getAttribute("src");
    link.title = "the full-size image";
    img.replaceWith(link);
    link.appendChild(img);
  }
});
