// mcp-harness console: keeps lease countdowns and "ago" times current, and shows whether the
// page is following live changes. No inline script anywhere (the Content-Security-Policy forbids it).
(function () {
  "use strict";
  var serverNow = Date.parse(document.body.getAttribute("data-server-now") || "");
  var skew = isNaN(serverNow) ? 0 : serverNow - Date.now();

  function span(seconds) {
    var s = Math.floor(seconds);
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
    if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
    return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
  }

  function tick() {
    var now = Date.now() + skew;
    document.querySelectorAll("time.countdown").forEach(function (el) {
      var left = (Date.parse(el.getAttribute("datetime")) - now) / 1000;
      el.textContent = left >= 0 ? span(left) + " left" : "overdue " + span(-left);
      el.classList.toggle("overdue", left < 0);
      el.classList.toggle("soon", left >= 0 && left < 60);
    });
    document.querySelectorAll("time.elapsed").forEach(function (el) {
      el.textContent = span(Math.max(0, (now - Date.parse(el.getAttribute("datetime"))) / 1000));
    });
    document.querySelectorAll("time.ago").forEach(function (el) {
      var ago = (now - Date.parse(el.getAttribute("datetime"))) / 1000;
      el.textContent = span(Math.max(0, ago)) + " ago";
    });
  }

  function live(on) {
    var dot = document.getElementById("live-dot");
    if (dot) {
      dot.classList.toggle("on", on);
      dot.title = on ? "Live: this page follows changes as they happen" : "Not live: reconnecting";
    }
  }

  // A tab hidden for a while lets go of its change stream and takes it up again when shown, catching up
  // at once. A browser opens at most 6 connections to one server over HTTP/1.1 and each open page's
  // stream holds one: without this a 7th console tab would not load while 6 others sat in the
  // background. The grace (15 s, or the body's data-stream-grace in ms) spares a quick tab switch.
  var stream = null;
  var paused = false;
  var pauseTimer = null;
  if (window.htmx && htmx.createEventSource) {
    var create = htmx.createEventSource;  // the sse extension's: every stream a page opens passes here
    htmx.createEventSource = function (url) {
      stream = create(url);
      return stream;
    };
  }

  function refresh() {
    ["live", "needs"].forEach(function (id) {
      var part = document.getElementById(id);
      if (part) htmx.trigger(part, "sse:change");
    });
  }

  document.addEventListener("visibilitychange", function () {
    clearTimeout(pauseTimer);
    if (document.hidden) {
      var grace = parseInt(document.body.getAttribute("data-stream-grace") || "15000", 10);
      pauseTimer = setTimeout(function () {
        if (document.hidden && stream && stream.readyState !== EventSource.CLOSED) {
          paused = true;
          stream.close();
          live(false);
        }
      }, grace);
    } else if (paused && stream && stream.onerror) {
      stream.onerror(new Event("error"));  // the extension reconnects a closed stream, as after a drop
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    tick();
    setInterval(tick, 1000);
    document.body.addEventListener("htmx:sseOpen", function () {
      live(true);
      if (paused) {  // back from the background: what changed meanwhile is fetched now
        paused = false;
        refresh();
      }
    });
    document.body.addEventListener("htmx:sseError", function () { live(false); });
    document.body.addEventListener("htmx:afterSwap", tick);
    // A person typing a reason must not lose it to a live refresh: while an action's form is open
    // the refresh waits, and closing the form catches up.
    var held = false;
    document.body.addEventListener("htmx:beforeRequest", function (evt) {
      var part = document.getElementById("live");
      if (part && evt.detail.elt === part && part.querySelector("details.action[open]")) {
        evt.preventDefault();
        held = true;
      }
    });
    // A refresh already on its way when the form opened must not replace it either: its answer is
    // dropped, and closing the form catches up.
    document.body.addEventListener("htmx:beforeSwap", function (evt) {
      var part = document.getElementById("live");
      if (part && evt.detail.target === part && part.querySelector("details.action[open]")) {
        evt.detail.shouldSwap = false;
        held = true;
      }
    });
    document.addEventListener("toggle", function (evt) {
      var el = evt.target;
      if (el.matches && el.matches("details.action")) {
        // The summary is announced as a button (role="button"): say whether its form is open.
        var summary = el.querySelector("summary");
        if (summary) summary.setAttribute("aria-expanded", el.open ? "true" : "false");
      }
      if (held && el.matches && el.matches("details.action") && !el.open) {
        held = false;
        var part = document.getElementById("live");
        if (part) htmx.trigger(part, "sse:change");
      }
    }, true);  // toggle does not bubble
  });
})();
