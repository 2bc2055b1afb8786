#!/usr/bin/env python3
"""Sends memcached binary-protocol requests that a server refuses (unknown opcodes, bad magic,
lengths that disagree, over-long keys and bodies, shapes that do not fit the opcode), each on a
fresh connection followed by a `noop`, and prints per request whether the connection was closed
and the packets answered. Run it against memcached and `wort serve` and diff the outputs
(doc/server.md, "Binary protocol"):

    memcached -u root -p 22911 -l 127.0.0.1 -t 1 &
    build/wort serve --pool /dev/shm/p.pool -p 22912 -t 1 &
    diff <(scripts/memcached_bin_refusals.py 22911) <(scripts/memcached_bin_refusals.py 22912)

`--big` also streams a set and an unknown opcode with a body just over 1 GiB (a few seconds each).
"""
import socket
import struct
import sys
import time

port = int(sys.argv[1])
def req(op, extras=b'', key=b'', value=b'', magic=0x80, keylen=None, extlen=None, bodylen=None, opaque=0x1234, dtype=0, vb=0):
    kl = len(key) if keylen is None else keylen
    el = len(extras) if extlen is None else extlen
    bl = len(extras)+len(key)+len(value) if bodylen is None else bodylen
    return struct.pack('>BBHBBHIIQ', magic, op, kl, el, dtype, vb, bl, opaque, 0) + extras + key + value
def probe(name, data, follow=True):
    s=socket.create_connection(('127.0.0.1',port)); s.settimeout(0.5)
    s.sendall(data)
    if follow:
        time.sleep(0.05)
        try: s.sendall(req(0x0a, opaque=0x77))  # noop after
        except OSError:
            pass
    out=b''; closed=False
    try:
        while True:
            d=s.recv(65536)
            if not d: closed=True; break
            out+=d
    except socket.timeout: pass
    except ConnectionResetError: closed=True
    s.close()
    res=[]; i=0
    while i+24<=len(out):
        m,op,kl,el,dt,st,bl,opq,cas=struct.unpack('>BBHBBHIIQ',out[i:i+24])
        res.append('op=%#x st=%#x opq=%#x body=%r'%(op,st,opq,out[i+24:i+24+bl][:40])); i+=24+bl
    if i<len(out): res.append('text=%r'%out[i:][:60])
    print('%-40s %s | %s'%(name, 'CLOSED' if closed else 'open', '; '.join(res)))
ex8=struct.pack('>II',0,0)
probe('unknown opcode 0x50', req(0x50))
probe('unknown opcode 0x50 body 5', req(0x50, value=b'hello'))
probe('unknown opcode 0x25', req(0x25))
probe('bad magic 0x81', req(0x0a, magic=0x81))
probe('bad magic 0x00', req(0x0a, magic=0x00), follow=False)
probe('keylen+extlen>bodylen', req(0x00, key=b'abc', bodylen=2))
probe('keylen 251 get', req(0x00, key=b'k'*251))
probe('keylen 251 set', req(0x01, extras=ex8, key=b'k'*251, value=b'v'))
probe('bodylen > 1GiB set', req(0x01, extras=ex8, key=b'k', bodylen=(1<<30)+100))
probe('set value 2MB (too large)', req(0x01, extras=ex8, key=b'k', value=b'v'*(2<<20)))
probe('get with extras', req(0x00, extras=b'1234', key=b'k'))
probe('get no key', req(0x00))
probe('set no extras', req(0x01, key=b'k', value=b'v'))
probe('noop with body', req(0x0a, value=b'x'))
probe('version with key', req(0x0b, key=b'x'))
probe('incr bad extlen', req(0x05, extras=b'1234', key=b'k'))
probe('flush extlen 3', req(0x08, extras=b'123'))
probe('verbosity no extras', req(0x1b))
probe('touch no extras', req(0x1c, key=b'k'))
probe('stat with extras', req(0x10, extras=b'1234'))
probe('stat with value', req(0x10, key=b'x', value=b'x'))
probe('touch extra value', req(0x1c, extras=b'1234', key=b'k', value=b'zz'))
probe('sasl list mechs', req(0x20))
probe('sasl auth', req(0x21, key=b'PLAIN', value=b'\0a\0b'))
probe('datatype 1', req(0x0a, dtype=1))
probe('vbucket 5 get', req(0x00, key=b'k', vb=5))
probe('delete with value', req(0x04, key=b'k', value=b'x'))
probe('delete with extras', req(0x04, extras=b'1234', key=b'k'))
probe('append with extras', req(0x0e, extras=b'1234', key=b'k', value=b'x'))
probe('quit with body', req(0x07, value=b'x'))
noop=req(0x0a, opaque=0x11)
probe('noop then bad magic 0x81', noop+req(0x0a, magic=0x81))
probe('noop then bad magic 0x00', noop+req(0x0a, magic=0x00))
probe('noop then magic 0x18 (text?)', noop+b'get foo\r\n')
probe('keylen+extlen>bodylen unknown op', req(0x50, key=b'abc', bodylen=2))
probe('bodylen>1GiB unknown op', req(0x50, bodylen=(1<<30)+100))
probe('bodylen>1GiB get', req(0x00, key=b'k', bodylen=(1<<30)+100))
probe('set flags 2^32-1', req(0x01, extras=struct.pack('>II',0xffffffff,0), key=b'k', value=b'v'))
probe('sasl auth no key', req(0x21, value=b'x'))
probe('setq too large', req(0x11, extras=ex8, key=b'k', value=b'v'*(2<<20)))
probe('getq key 251', req(0x09, key=b'k'*251))
probe('verbosity extlen 8', req(0x1b, extras=b'12345678'))
probe('verbosity with key', req(0x1b, extras=b'1234', key=b'k'))
probe('flush with key', req(0x08, key=b'k'))
probe('gat no extras', req(0x1d, key=b'k'))
probe('incr with value', req(0x05, extras=b'0'*20, key=b'k', value=b'v'))
probe('sasl step no key', req(0x22, value=b'x'))
probe('set extlen 4', req(0x01, extras=b'1234', key=b'k', value=b'v'))
probe('stat key 251', req(0x10, key=b's'*251))
probe('stat unknown group', req(0x10, key=b'nosuch'))
probe('append key 251', req(0x0e, key=b'k'*251, value=b'v'))
probe('version', req(0x0b))

if "--big" in sys.argv:
    for op in (0x01, 0x50):
        ex, key = (struct.pack('>II', 0, 0), b'k') if op == 0x01 else (b'', b'')
        bl = (1 << 30) + 100
        s = socket.create_connection(('127.0.0.1', port))
        s.settimeout(2)
        s.sendall(req(op, extras=ex, key=key, bodylen=bl))
        left = bl - len(ex) - len(key)
        chunk = b'z' * (1 << 20)
        while left > 0:
            n = min(left, len(chunk))
            s.sendall(chunk[:n])
            left -= n
        s.sendall(req(0x0a, opaque=0x77))
        out = b''
        try:
            while True:
                d = s.recv(65536)
                if not d:
                    break
                out += d
        except socket.timeout:
            pass
        got, i = [], 0
        while i + 24 <= len(out):
            _, o, _, _, _, st, b, opq, _ = struct.unpack('>BBHBBHIIQ', out[i:i + 24])
            got.append('op=%#x st=%#x opq=%#x' % (o, st, opq))
            i += 24 + b
        print('body over 1 GiB, op %#x: %s' % (op, '; '.join(got)))
