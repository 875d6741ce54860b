// Click a column header to sort its table; click again to reverse. Missing values sort last.
"use strict";
(function () {
  function cellValue(row, index, type) {
    var cell = row.cells[index];
    if (!cell) return null;
    var raw = cell.getAttribute("data-value");
    if (raw === null) raw = cell.textContent;
    if (type === "number") {
      var x = parseFloat(raw);
      return isNaN(x) ? null : x;
    }
    return raw === "" ? null : raw.toLowerCase();
  }

  function sortRows(table, index, type, descending) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellValue(a, index, type), y = cellValue(b, index, type);
      if (x === null || y === null) return (x === null) - (y === null);
      var c = x < y ? -1 : x > y ? 1 : 0;
      return descending ? -c : c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }

  document.querySelectorAll("table.sortable").forEach(function (table) {
    var headers = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(headers, function (th, index) {
      var button = th.querySelector("button");
      if (!button) return;
      button.addEventListener("click", function () {
        var type = th.getAttribute("data-type") === "number" ? "number" : "text";
        var current = th.getAttribute("aria-sort");
        // numbers: best (highest) first, except columns marked data-low-first (rank); text: A to Z first
        var lowFirst = th.hasAttribute("data-low-first");
        var descending = type === "number" && !lowFirst ? current !== "descending" : current === "ascending";
        Array.prototype.forEach.call(headers, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", descending ? "descending" : "ascending");
        sortRows(table, index, type, descending);
      });
    });
  });
})();
