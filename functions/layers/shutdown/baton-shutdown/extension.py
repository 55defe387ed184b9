"""An external Lambda extension that registers for the SHUTDOWN event only and waits for it.

Its presence is its purpose: Lambda sends SIGTERM to the runtime of a function that has an external extension
before stopping the container (300 ms before SIGKILL), and the api function then writes what it has counted.
Registered for no INVOKE event, it costs the requests nothing; it starts beside the runtime at cold start.
The Extensions API: https://docs.aws.amazon.com/lambda/latest/dg/runtimes-extensions-api.html
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request

NAME = "baton-shutdown"
API_VERSION = "2020-01-01"


def main() -> int:
    base = f"http://{os.environ['AWS_LAMBDA_RUNTIME_API']}/{API_VERSION}/extension"
    register = urllib.request.Request(
        f"{base}/register",
        data=json.dumps({"events": ["SHUTDOWN"]}).encode(),
        headers={"Lambda-Extension-Name": NAME, "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(register) as answer:
        identifier = answer.headers["Lambda-Extension-Identifier"]
    while True:
        ask = urllib.request.Request(f"{base}/event/next", headers={"Lambda-Extension-Identifier": identifier})
        with urllib.request.urlopen(ask) as answer:
            event = json.loads(answer.read() or b"{}")
        if event.get("eventType") == "SHUTDOWN":
            return 0


if __name__ == "__main__":
    sys.exit(main())
