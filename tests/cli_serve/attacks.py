#!/usr/bin/env python3
"""The HTTP attacks of docs/serve.md ("Hostile clients"), against any exporter on loopback.

Usage: attacks.py HOST:PORT PID   (PID: the exporter's process, for its memory, descriptors
and threads). Prints one line per attack. Every request goes to the loopback address given;
each loop is bounded in count and time.
"""
import os
import resource
import socket
import sys
import threading
import time

ADDR, PID = sys.argv[1], int(sys.argv[2])
HOST, PORT = ADDR.rsplit(":", 1)
PORT = int(PORT)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def proc():
    status = open(f"/proc/{PID}/status").read()
    rss = int(next(l for l in status.splitlines() if l.startswith("VmRSS")).split()[1]) // 1024
    threads = int(next(l for l in status.splitlines() if l.startswith("Threads")).split()[1])
    fds = len(os.listdir(f"/proc/{PID}/fd"))
    return f"rss {rss} MB, {threads} threads, {fds} fds"


def status_of(data):
    try:
        return data.split(b"\r\n", 1)[0].decode(errors="replace") or "(closed, no status)"
    except Exception:
        return "(closed, no status)"


def scrape(path="/metrics", timeout=10.0):
    t = time.monotonic()
    try:
        s = socket.create_connection((HOST, PORT), timeout=timeout)
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        return status_of(data), time.monotonic() - t
    except Exception as e:
        return f"error {e}", time.monotonic() - t


def raw(request, timeout=5.0):
    s = socket.create_connection((HOST, PORT), timeout=timeout)
    try:
        s.sendall(request)
        data = s.recv(200)
    except Exception as e:
        data = f"error {e}".encode()
    s.close()
    return status_of(data)


print(f"start: {proc()}")

# 1. One huge header line (64 MB), sent while the server reads.
s = socket.create_connection((HOST, PORT), timeout=20)
s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ")
sent, chunk, reply = 0, b"a" * 65536, b""
try:
    while sent < 64 << 20:
        s.sendall(chunk)
        sent += len(chunk)
except Exception:
    pass
try:
    reply = s.recv(200)
except Exception:
    pass
s.close()
time.sleep(1)
print(f"64 MB header line: sent {sent >> 20} MB, answer {status_of(reply)!r}; after: {proc()}")

# 2. 300,000 header lines.
many = b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(300_000)) + b"\r\n"
s = socket.create_connection((HOST, PORT), timeout=20)
reply = b""
try:
    s.sendall(many)
    reply = s.recv(200)
except Exception:
    pass
s.close()
time.sleep(1)
print(f"300k header lines: answer {status_of(reply)!r}; after: {proc()}")

# 3. 40 clients pipelining 2,000 scrapes each and never reading.
stalled = []
for _ in range(40):
    c = socket.create_connection((HOST, PORT), timeout=5)
    c.setblocking(False)
    try:
        c.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 2000)
    except BlockingIOError:
        pass
    stalled.append(c)
time.sleep(2)
results = [scrape() for _ in range(5)]
health = scrape("/healthz")
print(f"40 pipelining non-readers: scrapes {[(r[0][9:12], round(r[1], 3)) for r in results]}, healthz {health[0][9:12]} in {health[1]:.3f}s; {proc()}")
for c in stalled:
    c.close()
time.sleep(2)

# 4. 3,000 idle connections.
idle = []
for _ in range(3000):
    try:
        idle.append(socket.create_connection((HOST, PORT), timeout=5))
    except Exception:
        break
time.sleep(3)
during = proc()
results = [scrape() for _ in range(3)]
print(f"3000 idle connections ({len(idle)} opened): {during}; scrapes {[(r[0][9:12], round(r[1], 3)) for r in results]}")
for c in idle:
    c.close()
time.sleep(2)

# 5. Malformed requests.
for name, req in [
    ("HTTP/2.0 request line", b"GET /metrics HTTP/2.0\r\nHost: x\r\n\r\n"),
    ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
    ("non-ASCII header name", b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-\xff: y\r\n\r\n"),
    ("non-ASCII header value", b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-A: \xff\xfe\r\nConnection: close\r\n\r\n"),
    ("bare LF", b"GET /metrics HTTP/1.1\nHost: x\nConnection: close\n\n"),
]:
    print(f"{name}: {raw(req)!r}")
print(f"end: {proc()}")
