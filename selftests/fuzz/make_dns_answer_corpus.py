#!/usr/bin/env python3
"""Writes the seed corpus of the dns_answer fuzz target (and of the bpf tier's
kernel/twin agreement test): DNS responses, well formed ("ok-*") and
malformed ("bad-*": none may teach an address). Run from the repository root:
python3 selftests/fuzz/make_dns_answer_corpus.py"""
import ipaddress
import os
import struct

OUT = "selftests/fuzz/corpus/dns_answer"


def wire(name):
    out = b""
    for label in name.split("."):
        out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def header(qd=1, an=1, flags=0x8180, ident=0x1234):
    return struct.pack(">HHHHHH", ident, flags, qd, an, 0, 0)


def question(name, qtype=1):
    return wire(name) + struct.pack(">HH", qtype, 1)


def rr(owner, rtype, rdata, ttl=300, klass=1):
    return owner + struct.pack(">HHIH", rtype, klass, ttl, len(rdata)) + rdata


def a(addr):
    return ipaddress.IPv4Address(addr).packed


def aaaa(addr):
    return ipaddress.IPv6Address(addr).packed


QPTR = b"\xc0\x0c"  # the question's name, at offset 12
cases = {}

cases["ok-a"] = header() + question("ok.example.test") + rr(QPTR, 1, a("192.0.2.10"))
cases["ok-aaaa"] = header() + question("ok.example.test", 28) + rr(QPTR, 28, aaaa("2001:db8::10"))
cases["ok-two-a"] = header(an=2) + question("ok.example.test") + rr(QPTR, 1, a("192.0.2.11")) + rr(
    QPTR, 1, a("192.0.2.12"), ttl=60)
cases["ok-uppercase"] = header() + question("OK.Example.TEST") + rr(QPTR, 1, a("192.0.2.13"))
cases["ok-uncompressed-owner"] = header() + question("ok.example.test") + rr(wire("ok.example.test"), 1,
                                                                              a("192.0.2.14"))
# www.example.test CNAME edge.cdn.test; edge.cdn.test CNAME e1.(cdn.test); e1.cdn.test A
q = header(an=3) + question("www.example.test")
edge_off = len(q) + 2 + 10  # after the first record's owner pointer and fixed fields
first = rr(QPTR, 5, wire("edge.cdn.test"))
cdn_off = edge_off + 5  # "cdn.test" inside "edge.cdn.test"
second_owner = struct.pack(">H", 0xC000 | edge_off)
e1 = b"\x02e1" + struct.pack(">H", 0xC000 | cdn_off)
second = rr(second_owner, 5, e1)
e1_off = len(q) + len(first) + len(second_owner) + 10
third = rr(struct.pack(">H", 0xC000 | e1_off), 1, a("192.0.2.20"), ttl=5)
cases["ok-cname-chain"] = q + first + second + third
cases["ok-wildcard"] = header() + question("api.svc.example.test") + rr(QPTR, 1, a("192.0.2.30"))
cases["ok-ttl-zero"] = header() + question("ok.example.test") + rr(QPTR, 1, a("192.0.2.40"), ttl=0)
cases["ok-ttl-huge"] = header() + question("ok.example.test") + rr(QPTR, 1, a("192.0.2.41"), ttl=0x7FFFFFFF)
cases["ok-other-owner"] = header(an=2) + question("ok.example.test") + rr(wire("evil.test"), 1, a(
    "192.0.2.50")) + rr(QPTR, 1, a("192.0.2.51"))
cases["ok-txt-then-a"] = header(an=2) + question("ok.example.test") + rr(QPTR, 16, b"\x03abc") + rr(
    QPTR, 1, a("192.0.2.52"))
cases["ok-no-answer"] = header(an=0) + question("ok.example.test")
cases["ok-nxdomain"] = header(flags=0x8183) + question("ok.example.test") + rr(QPTR, 1, a("192.0.2.53"))
cases["ok-query-not-response"] = header(flags=0x0100) + question("ok.example.test") + rr(QPTR, 1, a("192.0.2.54"))

good = header() + question("ok.example.test") + rr(QPTR, 1, a("192.0.2.60"))
cases["bad-header-only"] = good[:5]
cases["bad-truncated-qname"] = good[:18]
cases["bad-truncated-rdata"] = good[:-2]
cases["bad-count-too-big"] = header(an=3) + question("ok.example.test") + rr(QPTR, 1, a("192.0.2.61"))
cases["bad-ancount-oversized"] = header(an=1000) + question("ok.example.test") + rr(QPTR, 1, a("192.0.2.62")) * 40
# The question's name is a pointer to itself.
cases["bad-ptr-self"] = header() + b"\xc0\x0c" + struct.pack(">HH", 1, 1) + rr(QPTR, 1, a("192.0.2.63"))
# Two answer owners pointing at each other.
base = header(an=1) + question("ok.example.test")
x = len(base)
cases["bad-ptr-loop"] = base + struct.pack(">H", 0xC000 | (x + 2)) + struct.pack(">H", 0xC000 | x) + struct.pack(
    ">HHIH", 1, 1, 300, 4) + a("192.0.2.64")
cases["bad-ptr-forward"] = base + struct.pack(">H", 0xC000 | (x + 40)) + struct.pack(">HHIH", 1, 1, 300, 4) + a(
    "192.0.2.65") + b"\0" * 40
cases["bad-ptr-out-of-bounds"] = base + b"\xff\xff" + struct.pack(">HHIH", 1, 1, 300, 4) + a("192.0.2.66")
cases["bad-ptr-into-header"] = base + b"\xc0\x02" + struct.pack(">HHIH", 1, 1, 300, 4) + a("192.0.2.67")
cases["bad-label-64"] = header() + b"\x40" + b"a" * 64 + wire("example.test") + struct.pack(">HH", 1, 1) + rr(
    QPTR, 1, a("192.0.2.68"))
cases["bad-label-type-0x80"] = base + b"\x80\x01" + struct.pack(">HHIH", 1, 1, 300, 4) + a("192.0.2.69")
long_name = ".".join(["abcdefghij"] * 23) + ".example.test"  # > 255 bytes
cases["bad-name-too-long"] = header() + wire(long_name) + struct.pack(">HH", 1, 1) + rr(QPTR, 1, a("192.0.2.70"))
cases["bad-a-rdlen"] = header() + question("ok.example.test") + rr(QPTR, 1, a("192.0.2.71") + b"\0")
cases["bad-cname-overruns-rdata"] = header(an=2) + question("www.example.test") + rr(
    QPTR, 5, wire("edge.cdn.test"))[:-1] + rr(QPTR, 1, a("192.0.2.72"))
cases["bad-second-record-cut"] = header(an=2) + question("ok.example.test") + rr(QPTR, 1, a("192.0.2.73")) + QPTR + b"\0\1"
# A label then a pointer back to that label's own start: a loop.
cases["bad-ptr-loop-label"] = base + b"\x01a" + struct.pack(">H", 0xC000 | x) + struct.pack(">HHIH", 1, 1, 300, 4) + a(
    "192.0.2.75")
# Many pointer hops, each strictly backwards, but more than the parser follows:
# a TXT record's data holds the chain, the next record's owner enters it at its end.
chain = header(an=2) + question("ok.example.test")
p0 = len(chain) + 2 + 10  # the TXT record's data
hops = b"\xc0\x0c" + b"".join(struct.pack(">H", 0xC000 | (p0 + 2 * i)) for i in range(20))
cases["bad-too-many-hops"] = chain + rr(QPTR, 16, hops) + rr(struct.pack(">H", 0xC000 | (p0 + 2 * 20)), 1,
                                                              a("192.0.2.74"))
# The same chain with few enough hops is fine.
hops = b"\xc0\x0c" + b"".join(struct.pack(">H", 0xC000 | (p0 + 2 * i)) for i in range(10))
cases["ok-ten-hops"] = chain + rr(QPTR, 16, hops) + rr(struct.pack(">H", 0xC000 | (p0 + 2 * 10)), 1, a("192.0.2.76"))

os.makedirs(OUT, exist_ok=True)
for name, data in cases.items():
    with open(os.path.join(OUT, name + ".bin"), "wb") as f:
        f.write(data)
print(f"wrote {len(cases)} files to {OUT}")
