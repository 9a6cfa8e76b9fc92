// A figure squeezed into the page's column (a row of heatmaps, say) opens at full size
// when clicked: each output image becomes a link to its own file.
document.addEventListener("DOMContentLoaded", () => {
  for (const image of document.querySelectorAll(".cell_output img")) {
    const link = document.createElement("a");
    link.href = image.src;
    link.title = "open the figure at full size";
    image.replaceWith(link);
    link.appendChild(image);
  }
});
