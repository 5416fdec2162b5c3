// Keeps an explorer page's figures live: every few seconds it reads the page's JSON twin (the address in
// <body data-live-src>) and sets the text and title of each [data-live] element from the figure of that key,
// and the size of each bar ([data-series] rects) from its series. Read-only: it only ever sends GETs.
(function () {
  "use strict";
  var body = document.body;
  var source = body.getAttribute("data-live-src");
  if (!source) {
    return;
  }
  var every = Number(body.getAttribute("data-live-every")) || 3000;

  function setFigures(figures) {
    document.querySelectorAll("[data-live]").forEach(function (element) {
      var figure = figures[element.getAttribute("data-live")];
      if (!figure) {
        return;
      }
      if (element.textContent !== figure.text) {
        element.textContent = figure.text;
      }
      if (figure.title) {
        element.setAttribute("title", figure.title);
      }
    });
  }

  function setSeries(series) {
    Object.keys(series).forEach(function (name) {
      var bars = document.querySelectorAll('[data-series="' + CSS.escape(name) + '"]');
      series[name].forEach(function (height, index) {
        var bar = bars[index];
        if (!bar) {
          return;
        }
        if (bar.getAttribute("data-axis") === "x") {
          bar.setAttribute("width", String(height));
        } else {
          bar.setAttribute("y", String(100 - height));
          bar.setAttribute("height", String(height));
        }
      });
    });
  }

  function refresh() {
    fetch(source, { headers: { Accept: "application/json" }, cache: "no-store", credentials: "omit" })
      .then(function (response) {
        return response.ok ? response.json() : null;
      })
      .then(function (data) {
        if (data) {
          setFigures(data.figures);
          setSeries(data.series);
          body.setAttribute("data-refreshed", String(Date.now()));
        }
      })
      .catch(function () {
        // the coordinator is away for a moment: the next tick tries again
      });
  }

  window.setInterval(refresh, every);
})();
