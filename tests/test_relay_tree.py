"""The master's relay tree (master/relays.py): who relays, who is homed where, and how a node
leaves a relay that went silent. Real daemons relaying are in tests/test_relays.py."""

from gangsched.master.relays import Home, RelayTree
from gangsched.protocol.records import RelayEndpoints


def endpoints(node: str) -> RelayEndpoints:
    return RelayEndpoints(switch=f"ipc:///tmp/{node}/switch", report=f"ipc:///tmp/{node}/report")


def register(tree: RelayTree, *nodes: str, left: str | None = None) -> list[Home]:
    return [tree.home(node, endpoints(node), left) for node in nodes]


def test_the_first_nodes_are_homed_at_the_master_then_nodes_relay_for_as_many_others():
    tree = RelayTree(fanout=2)
    a, b, c, d, e, f, g = register(tree, "a", "b", "c", "d", "e", "f", "g")
    assert a == b == Home(None, None, False)
    assert c == Home(None, None, True)  # the master has 2: c takes the next ones
    assert d == e == Home("c", endpoints("c"), False)
    assert f == Home(None, None, True)  # c is full
    assert g == Home("f", endpoints("f"), False)
    assert tree.relays() == ["c", "f"]


def test_a_node_goes_to_the_relay_with_fewest_nodes():
    tree = RelayTree(fanout=3)
    register(tree, "a", "b", "c", "r1", "x", "y", "z", "r2")  # r1 holds x, y, z
    tree.home("y", endpoints("y"), None)  # y registers again: it leaves r1 and goes to the emptier r2
    assert tree.via("y") == "r2"
    assert tree.home("w", endpoints("w"), None).via == "r2"  # r1 has x and z, r2 only y
    assert tree.home("v", endpoints("v"), None).via == "r1"  # 2 each: the first by name


def test_no_node_relays_without_endpoints_or_with_fanout_zero():
    tree = RelayTree(fanout=1)
    tree.home("a", endpoints("a"), None)
    assert tree.home("b", None, None) == Home(None, None, False)  # over tcp without keys: it cannot
    none = RelayTree(fanout=0)
    assert {none.home(name, endpoints(name), None) for name in "abcdef"} == {Home(None, None, False)}


def test_a_relay_left_for_silence_or_lost_takes_no_new_nodes_until_it_registers_again():
    tree = RelayTree(fanout=2)
    register(tree, "a", "b", "r", "x", "y")
    home = tree.home("x", endpoints("x"), "r")  # x heard no switch through r
    assert home == Home(None, None, True)  # r is closed: x relays itself
    assert tree.home("z", endpoints("z"), None).via == "x"
    tree.lost("x")
    assert tree.home("r", endpoints("r"), None) == Home(None, None, True)  # r is back: open again
    assert tree.home("s", endpoints("s"), None).via == "r"  # x is lost


def test_a_relay_that_can_no_longer_relay_drops_its_nodes():
    tree = RelayTree(fanout=1)
    register(tree, "a", "r", "x")
    assert tree.via("x") == "r"
    assert tree.home("r", None, None) == Home(None, None, False)
    assert tree.via("x") is None  # it hears nothing now, leaves for silence and is homed anew
    assert tree.relays() == []
