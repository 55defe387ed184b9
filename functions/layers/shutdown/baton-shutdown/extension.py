"""An external Lambda extension that registers for the SHUTDOWN event only and waits for it.

Its presence is its purpose: Lambda sends SIGTERM to the runtime of a function that has an external extension
before stopping the container (300 ms before SIGKILL), and the api function then writes what it has counted.
Registered for no INVOKE event, it takes no part in requests. At a cold start without SnapStart, Lambda starts the
runtime once the extensions have registered: so this imports the least it can (`http.client`, `json`; the launcher
runs Python without `site`), and registers first.
The Extensions API: https://docs.aws.amazon.com/lambda/latest/dg/runtimes-extensions-api.html
"""

from __future__ import annotations

import http.client
import json
import os
import sys

NAME = "baton-shutdown"
BASE = "/2020-01-01/extension"


def main() -> int:
    connection = http.client.HTTPConnection(os.environ["AWS_LAMBDA_RUNTIME_API"])
    body = json.dumps({"events": ["SHUTDOWN"]})
    connection.request("POST", f"{BASE}/register", body, {"Lambda-Extension-Name": NAME})
    answer = connection.getresponse()
    answer.read()
    identifier = answer.headers["Lambda-Extension-Identifier"]
    if answer.status != 200 or not identifier:
        print(f"{NAME}: registration refused ({answer.status})", file=sys.stderr)
        return 1
    while True:
        connection.request("GET", f"{BASE}/event/next", headers={"Lambda-Extension-Identifier": identifier})
        event = json.loads(connection.getresponse().read() or b"{}")
        if event.get("eventType") == "SHUTDOWN":
            return 0


if __name__ == "__main__":
    sys.exit(main())
