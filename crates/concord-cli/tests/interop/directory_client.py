"""A foreign client of `concord directory serve`: Python `requests` and `sseclient-py`
(PyPI), written from the W3C WoT Discovery specification, not from our code.

Usage: directory_client.py BASE_URL   (e.g. http://127.0.0.1:8081/)

Checks CRUD, paging Link headers, validation errors, SSE with Last-Event-ID resume and
JSONPath search; prints one line per check and exits 1 at the first failure.
"""

import json
import sys
import threading
from urllib.parse import quote

import requests
import sseclient

BASE = sys.argv[1].rstrip("/")
TIMEOUT = 10


def check(condition, what):
    if not condition:
        print(f"FAIL {what}", flush=True)
        sys.exit(1)
    print(f"ok   {what}", flush=True)


def td(thing_id, title):
    document = {
        "@context": "https://www.w3.org/2022/wot/td/v1.1",
        "title": title,
        "securityDefinitions": {"nosec_sc": {"scheme": "nosec"}},
        "security": "nosec_sc",
        "actions": {"toggle": {"forms": [{"href": "https://lamp.example.com/toggle"}]}},
    }
    if thing_id is not None:
        document["id"] = thing_id
    return document


def thing_url(thing_id):
    return f"{BASE}/things/{quote(thing_id, safe=':')}"


def put(thing_id, document):
    return requests.put(
        thing_url(thing_id),
        data=json.dumps(document),
        headers={"Content-Type": "application/td+json"},
        timeout=TIMEOUT,
    )


class Events:
    """An SSE subscription read on a daemon thread: (id, event type, data) as they arrive.
    It stays open until the script exits (closing a response another thread reads waits
    for that read's timeout)."""

    def __init__(self, path, last_event_id=None):
        headers = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        self.response = requests.get(f"{BASE}{path}", stream=True, headers=headers, timeout=TIMEOUT)
        self.status = self.response.status_code
        self.events = []
        self.arrived = threading.Condition()
        if self.status == 200:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        try:
            for event in sseclient.SSEClient(self.response).events():
                with self.arrived:
                    self.events.append((event.id, event.event, json.loads(event.data)))
                    self.arrived.notify_all()
        except Exception:  # the connection closed at the end of the run
            pass

    def wait_for(self, count):
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.events) >= count, timeout=TIMEOUT)
            return list(self.events)



# --- CRUD (tdd-things-crud) ------------------------------------------------------------
events = Events("/events")
check(events.status == 200, "GET /events is 200 (tdd-notification-sse)")
lamp = "urn:example:py-lamp"
response = put(lamp, td(lamp, "Lamp"))
check(response.status_code == 201, "PUT /things/{id} creates: 201 (tdd-things-create-known-td-resp)")
response = put(lamp, td(lamp, "Lamp v2"))
check(response.status_code == 204, "PUT again replaces: 204 (tdd-things-update-resp)")
response = requests.get(thing_url(lamp), timeout=TIMEOUT)
check(response.status_code == 200, "GET /things/{id} is 200 (tdd-things-retrieve-resp)")
check(
    response.headers["Content-Type"].startswith("application/td+json"),
    "a TD is application/td+json (tdd-things-retrieve-resp-content-type)",
)
check(response.json()["title"] == "Lamp v2", "the TD read back is the one written")
check("registration" in response.json(), "the TD is enriched with registration (tdd-registrationinfo-vocab-created)")
response = requests.patch(
    thing_url(lamp),
    data=json.dumps({"title": "Lamp v3"}),
    headers={"Content-Type": "application/merge-patch+json"},
    timeout=TIMEOUT,
)
check(response.status_code == 204, "PATCH with a merge patch: 204 (tdd-things-update-partial-resp)")
check(requests.get(thing_url(lamp), timeout=TIMEOUT).json()["title"] == "Lamp v3", "the patch applied")
response = requests.post(
    f"{BASE}/things",
    data=json.dumps(td(None, "Anonymous lamp")),
    headers={"Content-Type": "application/td+json"},
    timeout=TIMEOUT,
)
check(response.status_code == 201, "POST /things an anonymous TD: 201 (tdd-things-create-anonymous-td-resp)")
location = response.headers.get("Location", "")
check(location.startswith("/things/urn:uuid:"), f"Location is a urn:uuid id ({location}) (tdd-anonymous-td-local-uuid)")
anonymous_id = location[len("/things/"):]
response = requests.delete(f"{BASE}{location}", timeout=TIMEOUT)
check(response.status_code == 204, "DELETE /things/{id}: 204 (tdd-things-delete-resp)")
response = requests.get(f"{BASE}{location}", timeout=TIMEOUT)
check(response.status_code == 404, "a deleted TD is 404")
check(
    response.headers["Content-Type"].startswith("application/problem+json"),
    "errors are problem details (tdd-http-error-response)",
)

# --- validation (tdd-validation-response) ----------------------------------------------
bad = td("urn:example:py-bad", "Bad")
del bad["securityDefinitions"]
response = put("urn:example:py-bad", bad)
check(response.status_code == 400, "an invalid TD is 400 (tdd-validation-result)")
problem = response.json()
check(
    isinstance(problem.get("validationErrors"), list)
    and all("field" in error and "description" in error for error in problem["validationErrors"]),
    "validationErrors lists {field, description} (tdd-validation-response)",
)

# --- listing and paging ----------------------------------------------------------------
for index in range(5):
    thing_id = f"urn:example:py-page-{index}"
    check(put(thing_id, td(thing_id, f"Page {index}")).status_code == 201, f"registered {thing_id}")
seen = []
url = f"{BASE}/things?limit=2"
pages = 0
while url:
    response = requests.get(url, timeout=TIMEOUT)
    check(response.status_code == 200, f"GET {url[len(BASE):]} is 200 (tdd-things-list-resp)")
    check(
        response.headers["Content-Type"].startswith("application/ld+json"),
        "the listing is application/ld+json (tdd-things-list-resp)",
    )
    links = response.links
    check(
        links.get("canonical", {}).get("url") == "/things" and "etag" in response.headers.get("Link", ""),
        "Link rel=canonical with an etag (tdd-things-list-pagination-header-canonicallink)",
    )
    seen.extend(thing["id"] for thing in response.json())
    pages += 1
    url = f"{BASE}{links['next']['url']}" if "next" in links else None
check(seen == sorted(seen), "the listing is in code-point order of id (tdd-things-list-pagination-order-default)")
check(len(seen) == 6 and pages == 3, f"{len(seen)} TDs over {pages} pages of 2, next links followed (tdd-things-list-pagination-header-nextlink)")

# --- JSONPath (tdd-search-jsonpath) -----------------------------------------------------
response = requests.get(f"{BASE}/search/jsonpath", params={"query": "$[?@.title=='Page 3'].id"}, timeout=TIMEOUT)
check(response.status_code == 200, "GET /search/jsonpath is 200 (tdd-search-jsonpath-response)")
check(response.json() == ["urn:example:py-page-3"], f"JSONPath found {response.json()}")
response = requests.get(f"{BASE}/search/jsonpath", params={"query": "$[?@.title=="}, timeout=TIMEOUT)
check(response.status_code == 400, "a malformed JSONPath is 400 (tdd-search-malformed-query)")

# --- SSE with Last-Event-ID resume (tdd-notification-event-id) ---------------------------
received = events.wait_for(3)
check(len(received) >= 3, f"{len(received)} events arrived live")
check(all(event_id for event_id, _, _ in received), "every event has an id (tdd-notification-event-id)")
check(
    [kind for _, kind, _ in received[:3]] == ["thing_created", "thing_updated", "thing_updated"],
    "events are named thing_created, thing_updated (tdd-notification-event-types)",
)
check(received[0][2] == {"id": lamp}, "an event's data is the TD's id (tdd-notification-data-td-id)")
first_id = received[0][0]
resumed = Events("/events", last_event_id=first_id)
check(resumed.status == 200, "reconnecting with Last-Event-ID is 200")
replayed = resumed.wait_for(2)
check(
    [event_id for event_id, _, _ in replayed[:2]] == [received[1][0], received[2][0]],
    "the events after Last-Event-ID are replayed in order",
)
created = Events("/events/thing_created?diff=true")
thing_id = "urn:example:py-late"
check(put(thing_id, td(thing_id, "Late")).status_code == 201, "registered one more")
late = created.wait_for(1)
check(late and late[0][2].get("title") == "Late", "thing_created with diff=true carries the TD (tdd-notification-data-create-full)")
print("all checks passed", flush=True)
