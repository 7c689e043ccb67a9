"""Routing a task's unroutable addresses nowhere (grading/surround.py): the netlink request's
bytes, and what is recorded when there is nothing to route. The route itself is made in a
container (tests/integration/test_unroutable.py): never on this host."""

from __future__ import annotations

import socket
import struct

import pytest

from packager.grading import surround


def test_the_route_request_names_the_address_and_loopback() -> None:
    message = surround.route_message("10.255.255.1", ifindex=7, seq=3)
    length, kind, flags, seq, pid = struct.unpack_from("=IHHII", message)
    assert (length, kind, seq, pid) == (len(message), surround.RTM_NEWROUTE, 3, 0)
    assert flags & surround.NLM_F_CREATE and flags & surround.NLM_F_ACK
    family, dst_len, _, _, table, _, scope, rtype, _ = struct.unpack_from("=BBBBBBBBI", message, 16)
    assert (family, dst_len, table, rtype) == (socket.AF_INET, 32, 254, surround.RTN_UNICAST)
    assert scope == surround.RT_SCOPE_LINK
    attributes, at = {}, 28
    while at < len(message):
        size, name = struct.unpack_from("=HH", message, at)
        attributes[name] = message[at + 4 : at + size]
        at += size + (-size % 4)
    assert attributes == {
        surround.RTA_DST: socket.inet_aton("10.255.255.1"),
        surround.RTA_OIF: struct.pack("=I", 7),
    }


def test_nothing_to_route_routes_nothing() -> None:
    assert surround.route_nowhere({}) == {"routed": [], "failed": {}}
    with pytest.raises(ValueError, match="unroutable must be a list"):
        surround.route_nowhere({"unroutable": "10.255.255.1"})
    with pytest.raises(ValueError):
        surround.route_message("not an address", 1)
