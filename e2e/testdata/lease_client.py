"""The Python example of docs/serve.md, checked against a corral cluster by e2e/TestLeasePython.

Usage: python3 lease_client.py HOST:PORT HOST:PORT  (the Redis protocol ports of two nodes)
It uses only Python's redis package (Debian: python3-redis) and exits non-zero on a failure.
"""
import sys
import threading

import redis


def connect(addr):
    host, port = addr.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port), socket_timeout=30)


def check(what, got, want):
    if got != want:
        sys.exit(f"lease_client: {what}: got {got!r}, want {want!r}")
    print(f"lease_client: {what}: {got!r}")


a, b = connect(sys.argv[1]), connect(sys.argv[2])
check("PING", a.ping(), True)

# docs/serve.md's example: FILLGET answers HIT, FILL, BUSY or STALE; the one FILL caller builds
# the value and stores it with its token.
fill = a.execute_command("FILLGET", "product:42", 5000, "WAIT", 200)
check("first FILLGET state", fill[0], b"FILL")
token = fill[1]

# A second caller, on the other node, is held by the server until the value lands.
waited = {}
waiter = threading.Thread(target=lambda: waited.update(
    answer=b.execute_command("FILLGET", "product:42", 5000, "WAIT", 10000)))
waiter.start()

stored = a.execute_command("FILLSET", "product:42", '{"id": 42}', 60_000, token, "SWR", 30_000)
check("FILLSET", stored, 1)
waiter.join()
check("the waiter's answer", waited["answer"], [b"HIT", b'{"id": 42}'])

check("FILLSET with a used token", b.execute_command("FILLSET", "product:42", "x", 60_000, token), 0)
check("GET", b.get("product:42"), b'{"id": 42}')

# BUSY without WAIT; a FILLSET after a DELETE answers 0 and changes nothing.
token = a.execute_command("FILLGET", "user:7", 5000)[1]
check("BUSY", b.execute_command("FILLGET", "user:7", 5000), [b"BUSY", None])
check("DEL", b.delete("user:7"), 1)
check("FILLSET after DEL", a.execute_command("FILLSET", "user:7", "old", 60_000, token), 0)
check("GET after", a.get("user:7"), None)

# SET with an expiry, and the error of an unknown command.
check("SET EX", a.set("session:1", "v", ex=60), True)
check("GET", b.get("session:1"), b"v")
try:
    a.execute_command("NOSUCH", "x")
    sys.exit("lease_client: NOSUCH did not fail")
except redis.ResponseError as e:
    check("unknown command", str(e).split(",")[0], "unknown command 'NOSUCH'")

print("lease_client: ok")
