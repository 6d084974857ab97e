#!/usr/bin/env python3
"""Hostile activity clients, written from docs/wire-format.md, for the GPU stage `hostile`.

usage: hostile.py SOCKET names N     N connections, each sending hello + 16 MiB of kernel names
       hostile.py SOCKET silent N S  N connections that say nothing, held S seconds
       hostile.py SOCKET devices     one sender with records for 1000 made-up device ordinals
       hostile.py SOCKET madeup N    one sender declaring N made-up device UUIDs, a record on each
       hostile.py SOCKET devtable S  issue 30: four hello-only connections of this process declaring
                                     64 made-up UUIDs each (256: the device table), held S seconds
       hostile.py SOCKET keepalive N S  issue 30: N connections of this process that say hello and
                                     nothing more (keep-alives), held S seconds
       hostile.py SOCKET implausible issue 30: one sender (this process) with a kernel lasting 584
                                     years, one ending an hour ahead, ten drop reports of +2^40 and
                                     ESC, CR and NUL in its executable and cgroup
Prints one line: what was sent and how many connections the exporter closed.
Every hello is this process's own (its PID and start time, which the exporter checks against
/proc; a hello without a start time is refused), so the kernel verifies the sender.
"""
import os
import socket, struct, sys, time

MAGIC, VERSION = 0x57415843, 1

def frame(t, payload):
    return struct.pack('<IBBHI', MAGIC, VERSION, t, 0, len(payload)) + payload

def s(b):
    return struct.pack('<H', len(b)) + b

def self_start():
    """This process's start time as the injection library computes it: btime + start ticks."""
    stat = open('/proc/self/stat').read()
    ticks = int(stat[stat.rindex(')') + 2:].split()[19])
    btime = next(int(l.split()[1]) for l in open('/proc/stat') if l.startswith('btime '))
    return btime * 10**9 + ticks * 10**9 // os.sysconf('SC_CLK_TCK')

def hello(pid, uuids, start=None, exe=b'/bin/hostile', cgroup=b''):
    if start is None:
        start = self_start()
    p = struct.pack('<IQII', pid, start, 13000, 130001) + s(exe) + s(cgroup) + s(b'') + s(b'') + s(b'')
    p += struct.pack('<H', len(uuids)) + b''.join(s(u.encode()) for u in uuids)
    return frame(1, p)

def name_frames():
    name, per, total, out, i = b'k' * 4096, 255, 4096, [], 1
    while i <= total:
        n = min(per, total - i + 1)
        p = struct.pack('<I', n) + b''.join(struct.pack('<IH', j, 4096) + name for j in range(i, i + n))
        out.append(frame(2, p)); i += n
    return out

def connect(path):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); c.connect(path); return c

def main():
    path, mode = sys.argv[1], sys.argv[2]
    if mode == 'names':
        n, frames, conns, closed, sent = int(sys.argv[3]), name_frames(), [], 0, 0
        for i in range(n):
            c = connect(path)
            try:
                c.sendall(hello(100000 + i, ['']))
                for f in frames:
                    c.sendall(f); sent += len(f)
                conns.append(c)
            except OSError:
                closed += 1
        print(f'names: {n} connections, {sent / 2**20:.0f} MiB of names sent, {closed} closed by the exporter')
        time.sleep(float(sys.argv[4]) if len(sys.argv) > 4 else 5)
    elif mode == 'silent':
        n, hold = int(sys.argv[3]), float(sys.argv[4])
        conns = [connect(path) for _ in range(n)]
        time.sleep(hold)
        print(f'silent: {n} connections held {hold} s')
    elif mode == 'devices':
        c = connect(path)
        c.sendall(hello(4242, ['GPU-00000000-dead-beef-0000-000000000000']))
        recs = b''.join(struct.pack('<BBBBBxxxIIQQQII', 1, 0, 0, 0, 0, d, 0, 1, 1000, 0, 0, 0) for d in range(1000))
        for _ in range(100):
            c.sendall(frame(3, struct.pack('<QIHH', 0, 1000, 48, 0) + recs))
        print('devices: 100000 records for 1000 device ordinals the host does not have')
        time.sleep(2)
    elif mode == 'madeup':
        n, c = int(sys.argv[3]), connect(path)
        # its own PID and start time: the kernel verifies the sender, so the made-up devices
        # themselves are what the socket must refuse (a made-up PID is refused first)
        c.sendall(hello(os.getpid(), ['GPU-%08x-dead-beef-0000-000000000000' % d for d in range(n)]))
        recs = b''.join(struct.pack('<BBBBBxxxIIQQQII', 1, 0, 0, 0, 0, d, 0, 1, 1000, 0, 0, 0) for d in range(n))
        c.sendall(frame(3, struct.pack('<QIHH', 0, n, 48, 0) + recs))
        print(f'madeup: {n} records, one on each of {n} made-up device UUIDs')
        time.sleep(2)
    elif mode == 'devtable':
        hold, conns = float(sys.argv[3]), []
        for k in range(4):
            c = connect(path)
            c.sendall(hello(os.getpid(), ['GPU-%08x-dead-beef-0000-000000000000' % (64 * k + d) for d in range(64)]))
            conns.append(c)
        print('devtable: 4 hello-only connections of 64 made-up device UUIDs each')
        time.sleep(hold)
    elif mode == 'keepalive':
        n, hold, conns = int(sys.argv[3]), float(sys.argv[4]), []
        for _ in range(n):
            c = connect(path); c.sendall(hello(os.getpid(), ['']))
            conns.append(c)
        print(f'keepalive: {n} connections said hello, held {hold} s')
        time.sleep(hold)
    elif mode == 'implausible':
        c, now = connect(path), time.time_ns()
        c.sendall(hello(os.getpid(), ['GPU-00000000-dead-beef-0000-000000000000'],
                        exe=b'/bin/py\x1b[31mthon\r\x00', cgroup=b'0::/x\x1b]0;owned\x07'))
        recs = struct.pack('<BBBBBxxxIIQQQII', 1, 0, 0, 0, 0, 0, 0, 0, 2**64 - 1, 0, 0, 0)  # 584 years
        recs += struct.pack('<BBBBBxxxIIQQQII', 1, 0, 0, 0, 0, 0, 0, now + 3600 * 10**9, 1000, 0, 0, 0)  # an hour ahead
        c.sendall(frame(3, struct.pack('<QIHH', 0, 2, 48, 0) + recs))
        for k in range(1, 11):  # queue_full (reason 1) up by 2^40 a report
            c.sendall(frame(4, struct.pack('<HH', 2, 0) + struct.pack('<QQ', 0, k << 40)))
        print('implausible: a 584-year kernel, one ending an hour ahead, 10 drop reports of +2^40, control characters')
        time.sleep(2)

main()
