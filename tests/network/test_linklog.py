"""links.csv's rows by hand: a solve from t replaces the future of the links it touches; a round takes its part."""
import numpy as np

from testbed.network.contention import Usage
from testbed.network.linklog import LinkLog
from testbed.network.topology import Topology
from testbed.schema.network import Network

TOPOLOGY = Topology.build(Network(cells=[{"name": "c", "count": 2, "down_Bps": 10, "up_Bps": 10, "groups": [0]}],
                                  server={"up_Bps": 20}), np.zeros(4, dtype=np.int64))


def spans(rows):
    return [(r["link"], r["t_start_s"], r["t_end_s"], r["Bps"]) for r in rows]


def test_a_solve_replaces_the_future_of_the_links_it_touches_only():
    log = LinkLog(TOPOLOGY)
    log.solved(Usage([("up", 0, 0.0, 4.0, 10.0), ("up", 1, 1.0, 5.0, 8.0), ("up", 4, 0.0, 5.0, 18.0)]), 0.0)
    # from 2: cell c.0 and the server again; c.1 (link 1) untouched keeps its row to 5
    log.solved(Usage([("up", 0, 2.0, 3.0, 5.0), ("up", 4, 2.0, 3.0, 13.0)]), 2.0)
    assert spans(log.pending) == [("c.0", 0.0, 2.0, 10.0), ("c.1", 1.0, 5.0, 8.0), ("server", 0.0, 2.0, 18.0),
                                  ("c.0", 2.0, 3.0, 5.0), ("server", 2.0, 3.0, 13.0)]
    assert log.pending[0]["capacity_Bps"] == 10.0 and log.pending[2]["capacity_Bps"] == 20.0


def test_a_round_takes_its_rows_cut_at_its_end():
    log = LinkLog(TOPOLOGY)
    log.solved(Usage([("down", 0, 0.0, 4.0, 10.0), ("down", 1, 5.0, 6.0, 3.0)]), 0.0)
    taken = log.until(3.0, 7, keep_rest=True)   # an aggregation at 3: the rest goes on into the next
    assert spans(taken) == [("c.0", 0.0, 3.0, 10.0)] and taken[0]["round"] == 7
    assert spans(log.pending) == [("c.0", 3.0, 4.0, 10.0), ("c.1", 5.0, 6.0, 3.0)]
    assert spans(log.until(4.5, 8, keep_rest=False)) == [("c.0", 3.0, 4.0, 10.0)] and log.pending == []
