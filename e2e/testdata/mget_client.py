"""MGET through Python's redis package, checked against a corral cluster by e2e/TestMGetClients.

Usage: python3 mget_client.py HOST:PORT HOST:PORT  (the Redis protocol ports of two nodes of a
cluster with an --origin that answers "value of KEY", 404 for keys starting with "missing" and
500 for keys starting with "broken")
It uses only Python's redis package (Debian: python3-redis) and exits non-zero on a failure.
"""
import sys

import redis


def connect(addr):
    host, port = addr.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port), socket_timeout=30)


def check(what, got, want):
    if got != want:
        sys.exit(f"mget_client: {what}: got {got!r}, want {want!r}")
    print(f"mget_client: {what}: {got!r}")


a, b = connect(sys.argv[1]), connect(sys.argv[2])
keys = [f"py-{i}" for i in range(100)]

# One MGET of 100 keys through one node: each key's value, in order.
check("MGET of 100 keys", a.mget(keys), [f"value of {k}".encode() for k in keys])
# Through the other node, with a key the origin does not have and a key named twice.
check("MGET with nil and a repeat", b.mget("py-1", "missing-py", "py-2", "py-1"),
      [b"value of py-1", None, b"value of py-2", b"value of py-1"])

# A key whose fill failed fails the command: redis-py raises, naming the key.
try:
    a.mget("py-3", "broken-py")
    sys.exit("mget_client: an MGET with a failing key did not raise")
except redis.ResponseError as e:
    check("MGET with a failing key", "'broken-py': origin answered 500" in str(e), True)

print("mget_client: ok")
