"""Each node's column of every Ousterhout matrix it is in, as the master last sent it.

A switch names only the rows to run (and the alternates), the same few bytes for
every node whatever the cluster's size; each node holds its own column, the jobs
with tasks on it in each row, to know what those rows mean there. The master
sends a node its column when it changes (computed once per layout the policy
makes, before the switch that first runs it) and when the node says hello. The
node's reports echo the epoch of the column it applied each switch with: one
still behind at the switch after the newest was sent means that column was lost,
and it is sent again. So no column is a delta, and none stays lost.
"""

from collections.abc import Iterable, Mapping

from gangsched.policy.live_scheduler import Processor
from gangsched.protocol.messages import NodeColumn

# the report of the switch a column was sent before may still show the one before it: the
# column goes over the node's own connection and the switch over the broadcast one
_SWITCHES_IN_FLIGHT = 1


Rows = list[dict[Processor, int]]  # a matrix's layout: per row, processor -> the job whose task runs there


class NodeColumns:
    def __init__(self) -> None:
        self._rows_seen: dict[str, Rows] = {}  # per partition's matrix, the layout its columns were read from
        self._matrices: dict[str, dict[str, list[list[int]]]] = {}  # partition -> node -> its column there
        self._epochs: dict[str, int] = {}  # each node's newest column
        self._sent_at: dict[str, int] = {}  # the quantum whose switch it was sent before
        self._stale: set[str] = set()  # nodes whose column changed with the partitions (``forget``)
        self._epoch = 0

    def update(self, layouts: Mapping[str, tuple[Rows, Iterable[str]]], quantum: int) -> list[tuple[str, NodeColumn]]:
        """The columns new layouts (partition -> its matrix's rows and its nodes) changed, each under a new
        epoch: to send before ``quantum``'s switch."""
        changed, self._stale = self._stale, set()
        for matrix, (rows, nodes) in layouts.items():
            if rows is self._rows_seen.get(matrix):  # the scheduler makes a new list whenever it reads a layout
                continue
            self._rows_seen[matrix] = rows
            fresh: dict[str, list[list[int]]] = {name: [] for name in nodes}
            for index, row in enumerate(rows):
                for processor, job_id in row.items():
                    column = fresh[processor.node]
                    column.extend([] for _ in range(index + 1 - len(column)))
                    if job_id not in column[index]:
                        column[index].append(job_id)
            before = self._matrices.get(matrix, {})
            changed.update(name for name in fresh.keys() | before.keys() if fresh.get(name) != before.get(name))
            self._matrices[matrix] = fresh
        if not changed:
            return []
        self._epoch += 1
        for name in changed:
            self._epochs[name] = self._epoch
            self._sent_at[name] = quantum
        return [(name, self._column(name)) for name in sorted(changed)]

    def forget(self, partitions: set[str]) -> None:
        """Partitions a reconfiguration removed: the nodes that had a column of theirs get theirs anew with
        the next update."""
        for partition in partitions:
            self._rows_seen.pop(partition, None)
            self._stale.update(self._matrices.pop(partition, {}))

    def hello(self, name: str, quantum: int) -> NodeColumn:
        """The column of a node that (re)registers: it may hold none, or an old one."""
        self._sent_at[name] = quantum
        return self._column(name)

    def reported(self, name: str, epoch: int, quantum: int) -> NodeColumn | None:
        """The column to send again, if ``name`` applied ``quantum``'s switch with one older than it was sent."""
        newest = self._epochs.get(name, 0)
        if epoch >= newest or quantum < self._sent_at.get(name, 0) + _SWITCHES_IN_FLIGHT:
            return None
        self._sent_at[name] = quantum
        return self._column(name)

    def _column(self, name: str) -> NodeColumn:
        return NodeColumn(epoch=self._epochs.get(name, 0),
                          rows={matrix: columns[name] for matrix, columns in self._matrices.items() if name in columns})
