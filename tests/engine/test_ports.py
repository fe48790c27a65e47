import socket

import pytest

from retrieval.engine.ports import LOWEST, drawing_range, ephemeral_low, free_port, port_free


def test_free_ports_are_never_handed_out_twice():
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)


def test_ports_are_drawn_below_the_range_of_outgoing_connections():
    assert drawing_range(32768) == range(LOWEST, 32767)
    assert drawing_range(LOWEST + 10) is None  # too little room: the OS picks
    assert drawing_range(None) is None
    span = drawing_range(ephemeral_low())
    if span is None:
        pytest.skip("this kernel names no range for outgoing connections: the OS picks the ports")
    assert all(free_port() in span for _ in range(50))


def test_a_pair_has_its_neighbour_free_and_both_are_taken_from_later_draws():
    port = free_port(pair=True)
    assert port_free(port) and port_free(port + 1)
    assert not {port, port + 1} & {free_port() for _ in range(200)}


def test_a_free_port_can_be_listened_on_and_then_is_not_free():
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        assert s.getsockname()[1] == port
        assert not port_free(port)
