// Live tail: append each server-sent event as text (never as HTML). The status
// says what the page is doing: connecting, waiting for the first event, or how
// many events it has shown.
(function () {
  var list = document.getElementById("tail");
  var status = document.getElementById("tail-status");
  var seen = 0;
  var es = new EventSource(list.dataset.src);
  es.onopen = function () {
    status.textContent = seen ? "connected: " + seen + " events" : "connected: waiting for events…";
  };
  es.onerror = function () { status.textContent = "disconnected: retrying…"; };
  es.onmessage = function (m) {
    var e = JSON.parse(m.data);
    var li = document.createElement("li");
    li.textContent = e.ts + " " + e.type + " " + e.subject + (e.text ? " — " + e.text : "");
    list.insertBefore(li, list.firstChild);
    while (list.children.length > 500) list.removeChild(list.lastChild);
    seen++;
    status.textContent = "connected: " + seen + (seen === 1 ? " event" : " events");
  };
})();
