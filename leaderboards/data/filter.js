// The main board's filters: a text filter on the model name, a modality filter and a size filter.
// Rows that do not match are hidden; baseline rows (random ranking) always stay visible.
"use strict";
(function () {
  var form = document.querySelector("form.filters");
  if (!form) return;
  var table = document.getElementById(form.getAttribute("data-table"));
  if (!table) return;
  var text = document.getElementById("filter-text");
  var modality = document.getElementById("filter-modality");
  var size = document.getElementById("filter-size");
  var count = document.getElementById("filter-count");

  function apply() {
    var needle = text.value.trim().toLowerCase();
    var mod = modality.value, sz = size.value;
    var shown = 0, total = 0;
    Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
      if (row.classList.contains("baseline")) return;
      total += 1;
      var name = row.cells[1] ? row.cells[1].textContent.toLowerCase() : "";
      var mods = (row.getAttribute("data-modalities") || "").split(" ");
      var ok = (!needle || name.indexOf(needle) !== -1) &&
               (!mod || mods.indexOf(mod) !== -1) &&
               (!sz || row.getAttribute("data-size") === sz);
      row.hidden = !ok;
      if (ok) shown += 1;
    });
    count.textContent = shown === total ? "" : shown + " of " + total + " models";
  }

  form.addEventListener("submit", function (ev) { ev.preventDefault(); });
  text.addEventListener("input", apply);
  modality.addEventListener("change", apply);
  size.addEventListener("change", apply);
  apply();
})();
