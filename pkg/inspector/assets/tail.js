// Live tail: append each server-sent event as text (never as HTML).
(function () {
  var list = document.getElementById("tail");
  var status = document.getElementById("tail-status");
  var es = new EventSource(list.dataset.src);
  es.onopen = function () { status.textContent = "live"; };
  es.onerror = function () { status.textContent = "disconnected, retrying…"; };
  es.onmessage = function (m) {
    var e = JSON.parse(m.data);
    var li = document.createElement("li");
    li.textContent = e.ts + " " + e.type + " " + e.subject + (e.text ? " — " + e.text : "");
    list.insertBefore(li, list.firstChild);
    while (list.children.length > 500) list.removeChild(list.lastChild);
  };
})();
