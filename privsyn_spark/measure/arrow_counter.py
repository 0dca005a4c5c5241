"""The marginal engine's Python backend: ``mapInArrow`` + ``np.bincount`` per partition.

Portable (it needs no jar, and runs wherever PySpark's Arrow UDFs run), but every row crosses
from the JVM to a Python worker as Arrow; :mod:`privsyn_spark.measure.jvm_counter` avoids that.
Per-partition memory: the requested cells (8 bytes each) plus about ``BATCH_ROWS`` rows: the
session's Arrow batches (``spark.sql.execution.arrow.maxRecordsPerBatch``, never changed here) are
gathered into blocks of that size before counting.
"""

from __future__ import annotations

import resource
from collections.abc import Iterator
from typing import Any

import numpy as np

from privsyn_spark.measure.encode import STATUS_BITS, TALLIED_STATUSES
from privsyn_spark.measure.packing import CounterLayout
from privsyn_spark.runtime.backend import backend_of

BATCH_ROWS = 200_000  # rows counted at once (small Arrow batches are gathered up to this)


def _blocks(batches: Iterator[Any], rows: int = BATCH_ROWS) -> Any:
    """The Arrow batches gathered into record batches of about ``rows`` rows (fewer bincount calls)."""
    import pyarrow as pa

    pending, held = [], 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        held += batch.num_rows
        if held >= rows:
            yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]
            pending, held = [], 0
    if pending:
        yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]


def _partition_counter(layout: CounterLayout) -> Any:
    """The function each partition runs: Arrow batches of packed words -> one row of partial counts."""
    import pyarrow as pa

    fields, needed, luts = layout.fields, layout.needed, layout.luts
    masks = layout.status_masks()
    sizes = [int(np.prod(s)) for s in layout.shapes]
    offsets, tail = layout.offsets, layout.cells
    status_field = (1 << STATUS_BITS) - 1

    def count(batches: Iterator[Any]) -> Any:
        acc = np.zeros(layout.length, dtype=np.int64)
        for batch in _blocks(batches):
            words = [batch.column(i).to_numpy(zero_copy_only=False) for i in range(batch.num_columns)]
            flagged = [bool(np.any(w & m)) for w, m in zip(words, masks)]  # any status bit set?
            codes = {}
            for name in needed:
                word, offset, bits = fields[name]
                raw = (words[word] >> (offset + STATUS_BITS)) & ((1 << (bits - STATUS_BITS)) - 1)
                codes[name] = luts[name][raw]
            for k, marginal in enumerate(layout.tables):
                index = codes[marginal[0]]
                for a, size in zip(marginal[1:], layout.shapes[k][1:]):
                    index = index * size + codes[a]
                acc[offsets[k]:offsets[k + 1]] += np.bincount(index, minlength=sizes[k])
            acc[tail] += batch.num_rows
            for j, (word, offset, _) in enumerate(fields.values()):
                if flagged[word]:
                    state = (words[word] >> offset) & status_field
                    for s, status in enumerate(TALLIED_STATUSES):
                        acc[tail + 1 + len(TALLIED_STATUSES) * j + s] += np.count_nonzero(state == status)
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        yield pa.RecordBatch.from_arrays([pa.array([acc.tobytes()], type=pa.binary()), pa.array([peak_kb])],
                                         ["counts", "peak_kb"])

    return count


def count_with_arrow(packed: Any, layout: CounterLayout) -> tuple[np.ndarray, float]:
    """The flat count array of ``layout`` over ``packed``, and the largest Python worker peak RSS (MB;
    0 on Spark Connect, where the partials are summed by DataFrame steps that carry only the counts)."""
    partials = packed.mapInArrow(_partition_counter(layout), "counts binary, peak_kb long")
    total, peak_kb = backend_of(packed.sparkSession).sum_vectors_and_peak(partials, "counts", "peak_kb")
    return (np.zeros(layout.length, dtype=np.int64) if total is None else total), peak_kb / 1024
